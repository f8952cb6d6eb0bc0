#include "pipeline/generation_params.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace hd {

void validate(const GenerationParams& p, int64_t vae_scale_factor) {
  HD_CHECK(p.steps >= 1 && p.steps <= 1000, "steps must be between 1 and 1000, got ", p.steps);
  HD_CHECK(std::isfinite(p.cfg_scale) && p.cfg_scale >= 0.0f, "the CFG scale must be a finite number >= 0, got ",
           p.cfg_scale);
  HD_CHECK(p.batch >= 1 && p.batch <= 64, "the batch size must be between 1 and 64, got ", p.batch);
  const int64_t multiple = std::max<int64_t>(8, vae_scale_factor);
  HD_CHECK(p.strength >= 0.0f && p.strength <= 1.0f, "the strength must be in [0, 1], got ", p.strength);
  for (const auto& [name, v] : {std::pair{"the width", p.width}, {"the height", p.height}}) {
    HD_CHECK(v > 0 && v % multiple == 0 && v <= 8192, name, " must be a positive multiple of ", multiple,
             " (at most 8192), got ", v);
  }
  for (const auto& [side, s] : {std::pair{"", &p.sizes}, {"negative ", &p.negative_sizes}}) {
    for (const auto& [name, size] : {std::pair{"original size", s->original_size}, {"target size", s->target_size}}) {
      HD_CHECK(!size || ((*size)[0] >= 1 && (*size)[0] <= 16384 && (*size)[1] >= 1 && (*size)[1] <= 16384), "the ",
               side, name, " must be between 1 and 16384 pixels in each direction, got ", (*size)[1], "x", (*size)[0]);
    }
    HD_CHECK(!s->crop_top_left || ((*s->crop_top_left)[0] >= 0 && (*s->crop_top_left)[0] <= 16384 &&
                                   (*s->crop_top_left)[1] >= 0 && (*s->crop_top_left)[1] <= 16384),
             "the ", side, "crop's top-left corner must be between 0 and 16384 pixels, got top ",
             (*s->crop_top_left)[0], ", left ", (*s->crop_top_left)[1]);
  }
  for (const auto& [name, score] : {std::pair{"aesthetic score", p.aesthetic_score},
                                    {"negative aesthetic score", p.negative_aesthetic_score}}) {
    HD_CHECK(!score || (std::isfinite(*score) && std::abs(*score) <= 1000.0f), "the ", name,
             " must be a finite number (the refiner was trained on 0-10), got ", *score);
  }
  for (const auto& [name, f] : {std::pair{"denoising start", p.denoising_start}, {"denoising end", p.denoising_end}}) {
    HD_CHECK(!f || (*f > 0.0 && *f < 1.0), "the ", name, " must be a fraction of the schedule in (0, 1), got ", *f);
  }
  HD_CHECK(!p.denoising_start || !p.denoising_end || *p.denoising_start < *p.denoising_end, "the denoising start ",
           *p.denoising_start, " must come before the denoising end ", *p.denoising_end);
}

int img2img_first_step(const GenerationParams& p) {
  const int noised_steps = std::min(int(float(p.steps) * p.strength), p.steps);
  HD_CHECK(noised_steps >= 1, "a strength of ", p.strength, " with ", p.steps,
           " steps leaves no denoising step; raise the strength or the steps");
  return p.steps - noised_steps;
}

StepRange denoising_range(const GenerationParams& p, const std::vector<float>& timesteps, int num_train_timesteps,
                          bool img2img) {
  const int steps = int(timesteps.size());
  // diffusers: int(round(T - fraction * T)) in Python floats (round half to even, as nearbyint).
  const auto cutoff = [&](double fraction) {
    return std::nearbyint(double(num_train_timesteps) - fraction * double(num_train_timesteps));
  };
  StepRange r{0, steps};
  if (p.denoising_start) {
    const double c = cutoff(*p.denoising_start);
    r.first = steps - int(std::count_if(timesteps.begin(), timesteps.end(), [&](float t) { return double(t) < c; }));
  } else if (img2img) {
    r.first = img2img_first_step(p);
  }
  if (p.denoising_end) {
    const double c = cutoff(*p.denoising_end);
    r.end = r.first + int(std::count_if(timesteps.begin() + r.first, timesteps.end(), [&](float t) { return double(t) >= c; }));
  }
  return r;
}

StepRange denoising_steps(const GenerationParams& p, const std::vector<float>& timesteps, int num_train_timesteps,
                          bool img2img) {
  const StepRange r = denoising_range(p, timesteps, num_train_timesteps, img2img);
  const size_t steps = timesteps.size();
  HD_CHECK(!r.empty(), "of the ", steps, " steps, none lies ",
           p.denoising_start && p.denoising_end ? "between the denoising start and end"
           : p.denoising_start                  ? "after the denoising start"
                                                : "before the denoising end",
           " (start ", p.denoising_start.value_or(0.0), ", end ", p.denoising_end.value_or(1.0),
           "); use more steps or move the fraction");
  return r;
}

}  // namespace hd
