// What one generation asks for (prompt, steps, sampler, size, seed, ...), the checks of a request against
// itself, and what a generation reports (step ranges, stage times, progress): shared by the pipeline and
// the front ends that build requests (CLI, server, C API) without a model at hand.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/tiled_decode.h"
#include "sampling/noise_schedule.h"
#include "sampling/sampler.h"

namespace hd {

// SDXL's micro-conditioning, in pixels, as diffusers' original_size, crops_coords_top_left and
// target_size: (height, width), (top, left), (height, width). Unset: the image's size and (0, 0).
struct SizeConditioning {
  std::optional<std::array<int, 2>> original_size, crop_top_left, target_size;
  bool empty() const { return !original_size && !crop_top_left && !target_size; }
};

struct GenerationParams {
  std::string prompt;
  std::string negative_prompt;
  int steps = 20;
  float cfg_scale = 7.5f;
  SamplerKind sampler = SamplerKind::kEuler;
  SigmaSchedule schedule = SigmaSchedule::kDiscrete;
  uint64_t seed = 0;
  int width = 512, height = 512;
  int batch = 1;
  std::optional<TimestepSpacing> spacing;  // overrides the model's scheduler config
  float strength = 1.0f;                   // img2img: how much of the init image is noised away, in [0, 1]
  std::optional<Prediction> prediction;    // overrides what the model says (SD2.x single files do not say)
  // Wait for the device after each denoising step, so that GenerationResult::times has each step's time
  // (a progress callback waits too).
  bool time_each_step = false;
  VaeTiling vae_tiling = VaeTiling::kAuto;
  // SDXL only. The base: the negative side takes the positive side's ids unless both its sizes are given
  // (as diffusers' negative_original_size and negative_target_size). The refiner (no target size): the
  // negative original size defaults to the positive one, the negative crop to (0, 0), as diffusers'.
  SizeConditioning sizes, negative_sizes;
  // SDXL refiner only (diffusers' aesthetic_score, negative_aesthetic_score; unset: 6 and 2.5).
  std::optional<float> aesthetic_score, negative_aesthetic_score;
  // diffusers' "ensemble of expert denoisers": the fraction of the schedule, by training timestep, at
  // which this model stops denoising (its latents then go to the next expert) or starts (from the
  // latents an earlier one handed over). In (0, 1); double as diffusers' Python floats are.
  std::optional<double> denoising_end, denoising_start;
};

// Classifier-free guidance runs (diffusers skips it at scale <= 1), and the UNet rows each step then takes:
// the batch, twice when guided ([unconditional; conditional]).
inline bool guided(const GenerationParams& p) { return p.cfg_scale > 1.0f; }
inline int64_t unet_rows(const GenerationParams& p) { return guided(p) ? 2 * int64_t(p.batch) : p.batch; }

// Validates the parameters against each other (sizes, steps, CFG, fractions), whatever the model: every
// failure is an Error that names the parameter. StableDiffusion::validate adds the model's own rules.
void validate(const GenerationParams& p, int64_t vae_scale_factor);

// img2img: the first denoising step that `strength` leaves (diffusers' get_timesteps); throws when it
// leaves none.
int img2img_first_step(const GenerationParams& p);

// The steps [first, end) of `timesteps` (descending) that a run denoises: from 0, from the step
// `strength` leaves with an init image (`img2img`), or from the first timestep below
// denoising_start's cutoff; up to the last one at or above denoising_end's (diffusers' get_timesteps
// and "Apply denoising_end", cutoff = round(T - fraction * T)). Throws when no step is left.
struct StepRange {
  int first = 0, end = 0;
  bool empty() const { return end <= first; }
};
StepRange denoising_steps(const GenerationParams& p, const std::vector<float>& timesteps, int num_train_timesteps,
                          bool img2img);
// The same range, empty rather than an error when no step is left (strength's own rule still throws).
StepRange denoising_range(const GenerationParams& p, const std::vector<float>& timesteps, int num_train_timesteps,
                          bool img2img);

// Wall-clock milliseconds of a generation's stages, each ended by waiting for the device.
struct StageTimes {
  double text_encoding = 0, denoising = 0, decoding = 0, total = 0;  // denoising: with img2img, the encoding too
  std::vector<double> steps;  // each denoising step (with GenerationParams::time_each_step or a progress callback)
};

// Called after each denoising step with (steps done, steps in all).
using ProgressCallback = std::function<void(int, int)>;

}  // namespace hd
