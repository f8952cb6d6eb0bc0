// One generation's denoising, a step at a time. StableDiffusion::denoise loops over one run's steps; a
// server keeps several runs of one model and gives each step of all of them to StableDiffusion::step,
// which computes them in one UNet batch (each run with its own timestep, conditioning, guidance scale,
// sampler and generator): batching across requests that arrived at different times and stand at
// different steps. A run's numbers do not depend on its company, up to the summation order of the
// matrix products over a larger batch.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "core/tensor.h"
#include "models/unet.h"
#include "pipeline/generation_params.h"
#include "sampling/sampler.h"
#include "sampling/torch_rng.h"

namespace hd {

class StableDiffusion;

// Wall-clock milliseconds since `start`.
double ms_since(std::chrono::steady_clock::time_point start);

// The UNet's conditioning for one run's rows ([unconditional; conditional] when guided): context, and
// SDXL's pooled embedding and micro-conditioning ids (empty for SD1.x/2.x).
struct UnetConditioning {
  OwnedTensor context, pooled, time_ids;
};

class DenoisingRun {
 public:
  DenoisingRun(DenoisingRun&&) = default;
  DenoisingRun& operator=(DenoisingRun&&) = default;

  bool done() const { return next_ >= range_.end; }
  int steps_done() const { return next_ - range_.first; }
  int steps_total() const { return range_.end - range_.first; }
  const GenerationParams& params() const { return params_; }
  // The rows this run adds to a UNet batch: twice the batch under classifier-free guidance.
  int64_t rows() const { return guided_ ? 2 * batch_ : batch_; }
  // Whether this run's steps can share a UNet batch with `other`'s: the same model, latent size and
  // context length (a graph's shapes), and both with or both without SDXL's added conditioning.
  bool batches_with(const DenoisingRun& other) const;
  // Once done(): the final latents [N, h, w, 4] (host f32, before 1/scaling_factor), with the run's stage
  // times added to *times.
  OwnedTensor take_latents(StageTimes* times);

 private:
  friend class StableDiffusion;
  DenoisingRun() = default;

  const StableDiffusion* model_ = nullptr;
  GenerationParams params_;
  TorchCpuGenerator* generator_ = nullptr;  // the caller's: an expert ensemble goes on drawing from it
  std::unique_ptr<Sampler> sampler_;
  StepRange range_;
  int next_ = 0;  // the step the next StableDiffusion::step runs
  bool guided_ = false;
  int64_t batch_ = 0, height_ = 0, width_ = 0, channels_ = 0;  // the latents' [N, h, w, c]
  // The rows of the request's batch this run makes (DenoiseStart::share): noise is drawn for all
  // drawn_rows_ and rows [first_row_, first_row_ + batch_) kept.
  int64_t first_row_ = 0, drawn_rows_ = 0;
  UnetConditioning conditioning_;
  std::optional<TextTimeConditioning> added_;  // views of conditioning_ (SDXL)
  // The latents in f32 where the UNet computes; a multistep sampler's x0 history; the run's own model
  // input (used when it steps alone).
  OwnedTensor sample_, x0_, previous_x0_, model_input_;
  ProgressCallback progress_;
  StageTimes times_;
};

}  // namespace hd
