// The samplers of `hipdiffusion generate`, each reproducing a diffusers scheduler step for step:
//   euler     EulerDiscreteScheduler            (discrete or Karras sigmas)
//   euler_a   EulerAncestralDiscreteScheduler   (discrete sigmas)
//   ddim      DDIMScheduler, eta = 0
//   dpmpp_2m  DPMSolverMultistepScheduler, dpmsolver++, order 2, midpoint, lower-order final steps
//             (discrete or Karras sigmas)
// with epsilon or v-prediction and leading, trailing or linspace timestep spacing. A sampler computes
// each step's scalars (update()); the per-value arithmetic is ops::updated_sample, which step() runs
// here on host arrays and ops::sampler_step runs on the device the latents live on. Only the ancestral
// noise cares about layout, and it comes from the caller (drawn in diffusers' NCHW order, stored in the
// engine's layout).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "ops/sampler_update.h"
#include "sampling/noise_schedule.h"

namespace hd {

enum class SamplerKind { kEuler, kEulerAncestral, kDdim, kDpmpp2m };
enum class SigmaSchedule { kDiscrete, kKarras };

SamplerKind parse_sampler(std::string_view name);         // euler | euler_a | ddim | dpmpp_2m
SigmaSchedule parse_sigma_schedule(std::string_view name);  // discrete | karras
std::string_view sampler_name(SamplerKind kind);

// Throws Error for a combination diffusers does not offer (Karras sigmas with euler_a or ddim).
void check_sampler_schedule(SamplerKind kind, SigmaSchedule schedule);

// Fills out[0, count) with fresh standard normal noise.
using NoiseSource = std::function<void(float* out, int64_t count)>;

class Sampler {
 public:
  // Throws Error for a combination diffusers does not offer (Karras sigmas with euler_a or ddim).
  static std::unique_ptr<Sampler> create(SamplerKind kind, SigmaSchedule schedule, const SchedulerConfig& config,
                                         int steps);
  virtual ~Sampler() = default;

  int steps() const { return int(timesteps_.size()); }
  // The timestep the model is given at step i (fractional for Euler with Karras or linspace).
  float timestep(int i) const { return timesteps_[size_t(i)]; }
  const std::vector<float>& timesteps() const { return timesteps_; }
  // What the initial noise is multiplied by.
  float init_noise_sigma() const { return init_noise_sigma_; }
  // The model's input at step i is the sample divided by this (diffusers' scale_model_input).
  virtual float input_divisor(int) const { return 1.0f; }
  // out = the model's input at step i; out may alias sample.
  void scale_model_input(int i, const float* sample, float* out, int64_t count) const;
  // img2img: out = `original` noised to the level of step i, as the scheduler's add_noise does for the
  // step the denoising starts at. out may alias original.
  virtual void add_noise(int i, const float* original, const float* noise, float* out, int64_t count) const = 0;
  // The scalars of step i (guidance_scale left at 1: the caller sets it). Called once per step, in
  // order, from 0 or from the step add_noise started at (a multistep sampler counts its history).
  virtual ops::SamplerUpdate update(int i) = 0;
  // Advances `sample` by step i on the host, given the (guided) model output at step i: update(i), then
  // ops::updated_sample on every value, with the sampler keeping the x0 history.
  void step(int i, const float* model_output, float* sample, int64_t count, const NoiseSource& noise);

 protected:
  Sampler(const SchedulerConfig& config) : config_(config) {}

  SchedulerConfig config_;
  std::vector<float> timesteps_;
  float init_noise_sigma_ = 1.0f;

 private:
  std::vector<float> noise_, x0_, previous_x0_;  // step()'s buffers
};

}  // namespace hd
