// One denoising step's arithmetic on a latent value: classifier-free guidance, then the sampler's update.
// The samplers (src/sampling) compute a step's scalars on the host; this header holds the per-value
// formulas, written once and compiled for the CPU loop and for the GPU kernel (ops::sampler_step), so
// that both devices step with the same expressions, in the order diffusers evaluates them.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/host_device.h"

namespace hd::ops {

enum class UpdateForm : int32_t {
  kEuler,           // k-diffusion's Euler step, plus noise · noise_scale when ancestral
  kDdim,            // DDIM with eta = 0
  kDpmFirstOrder,   // DPM-Solver++: the first-order update (first and last steps)
  kDpmSecondOrder,  // DPM-Solver++(2M): the midpoint update, using the previous step's x0
};

// The scalars of one step (each form reads its own; the rest stay zero).
struct SamplerUpdate {
  UpdateForm form = UpdateForm::kEuler;
  bool v_prediction = false;  // the model predicts v rather than the noise
  // > 1: the model's output holds [unconditional; conditional] halves, combined as
  // uncond + scale · (cond - uncond); otherwise it is one output used as is.
  float guidance_scale = 1.0f;
  // Euler: sigma of this step, dt = sigma_next (or sigma_down) - sigma; ancestral steps add fresh noise
  // with weight noise_scale (drawn on every ancestral step, even the last, where the weight is 0).
  float sigma = 0, dt = 0, noise_scale = 0;
  bool ancestral = false;
  // DDIM: sqrt(alpha_t), sqrt(1 - alpha_t), sqrt(alpha_prev), sqrt(1 - alpha_prev).
  float sqrt_alpha = 0, sqrt_beta = 0, sqrt_alpha_prev = 0, direction = 0;
  // DPM-Solver++: this step's alpha_t and sigma_t, sigma_next / sigma, alpha_next · (exp(-h) - 1),
  // and 1 / r0 for the second-order correction.
  float alpha = 0, sigma_t = 0, ratio = 0, phi = 0, inverse_r0 = 0;

  HD_HOST_DEVICE bool guided() const { return guidance_scale > 1.0f; }
  HD_HOST_DEVICE bool adds_noise() const { return form == UpdateForm::kEuler && ancestral; }
  // Whether the step writes this step's x0 (the next step's history) / reads the previous one.
  HD_HOST_DEVICE bool writes_x0() const { return form == UpdateForm::kDpmFirstOrder || form == UpdateForm::kDpmSecondOrder; }
  HD_HOST_DEVICE bool reads_previous_x0() const { return form == UpdateForm::kDpmSecondOrder; }
};

// The guided model output from the two halves (or the one output when unguided).
HD_HOST_DEVICE inline float guided_output(const SamplerUpdate& u, float uncond_or_only, float cond) {
  return u.guided() ? uncond_or_only + u.guidance_scale * (cond - uncond_or_only) : uncond_or_only;
}

// The next value of `sample` given the (guided) model output; `noise` is read when adds_noise(),
// `previous_x0` when reads_previous_x0(); *x0 is written when writes_x0().
HD_HOST_DEVICE inline float updated_sample(const SamplerUpdate& u, float sample, float model_output, float noise,
                                           float previous_x0, float* x0) {
  switch (u.form) {
    case UpdateForm::kEuler: {
      float predicted_x0;
      if (!u.v_prediction) {
        predicted_x0 = sample - u.sigma * model_output;
      } else {
        const float c_out = -u.sigma / sqrtf(u.sigma * u.sigma + 1.0f);
        predicted_x0 = model_output * c_out + sample / (u.sigma * u.sigma + 1.0f);
      }
      float next = sample + (sample - predicted_x0) / u.sigma * u.dt;
      if (u.ancestral) next = next + noise * u.noise_scale;
      return next;
    }
    case UpdateForm::kDdim: {
      float predicted_x0, eps;
      if (!u.v_prediction) {
        predicted_x0 = (sample - u.sqrt_beta * model_output) / u.sqrt_alpha;
        eps = model_output;
      } else {
        predicted_x0 = u.sqrt_alpha * sample - u.sqrt_beta * model_output;
        eps = u.sqrt_alpha * model_output + u.sqrt_beta * sample;
      }
      return u.sqrt_alpha_prev * predicted_x0 + u.direction * eps;
    }
    case UpdateForm::kDpmFirstOrder:
    case UpdateForm::kDpmSecondOrder: {
      const float d0 = !u.v_prediction ? (sample - u.sigma_t * model_output) / u.alpha
                                       : u.alpha * sample - u.sigma_t * model_output;
      *x0 = d0;
      if (u.form == UpdateForm::kDpmFirstOrder) return u.ratio * sample - u.phi * d0;
      const float d1 = u.inverse_r0 * (d0 - previous_x0);
      return u.ratio * sample - u.phi * d0 - 0.5f * u.phi * d1;
    }
  }
  return sample;
}

}  // namespace hd::ops
