#include "pipeline/expert_ensemble.h"

#include <chrono>

#include "core/error.h"

namespace hd {

GenerationResult generate_with_refiner(const StableDiffusion& base, const StableDiffusion& refiner,
                                       const GenerationParams& params, double high_noise_frac,
                                       const ProgressCallback& progress, const Tensor* init_image) {
  const auto start = std::chrono::steady_clock::now();
  HD_CHECK(base.family() == ModelFamily::kSDXL && refiner.family() == ModelFamily::kSDXL,
           "a base and its refiner are SDXL models (diffusers' ensemble of expert denoisers); got ",
           family_name(base.family()), " and ", family_name(refiner.family()));
  HD_CHECK(base.micro_conditioning() != MicroConditioning::kAestheticScore,
           "the base model is an SDXL refiner (aesthetic-score conditioning): give the base model as the model and "
           "the refiner as its refiner");
  base.check_same_latent_space(refiner);
  HD_CHECK(!params.denoising_start && !params.denoising_end,
           "with a refiner, the high-noise fraction says where the base stops and the refiner starts");
  HD_CHECK(high_noise_frac > 0.0 && high_noise_frac < 1.0, "the high-noise fraction (the base's share of the "
           "schedule) must be in (0, 1), got ", high_noise_frac);

  GenerationParams first = params, second = params;
  first.denoising_end = high_noise_frac;
  second.denoising_start = high_noise_frac;
  // What each model does not take: the base no aesthetic scores, a refiner no target size (a base as the
  // refiner keeps the scores, which its validate refuses).
  first.aesthetic_score.reset();
  first.negative_aesthetic_score.reset();
  if (refiner.micro_conditioning() == MicroConditioning::kAestheticScore) {
    second.sizes.target_size.reset();
    second.negative_sizes.target_size.reset();
  }
  // Every check before the first step: each model's rules and each share's steps.
  base.validate(first, init_image != nullptr);
  refiner.validate(second, true);
  const StepRange base_steps = base.steps_of(first, init_image != nullptr), refiner_steps = refiner.steps_of(second, false);
  const int done_by_base = base_steps.end - base_steps.first;
  const int total = done_by_base + refiner_steps.end - refiner_steps.first;

  TorchCpuGenerator generator(params.seed);
  StageTimes times;
  const auto reported = [&](int offset) -> ProgressCallback {
    if (!progress) return {};
    return [&progress, offset, total](int done, int) { progress(offset + done, total); };
  };
  const OwnedTensor handed =
      base.denoise(first, generator, &times, DenoiseStart{init_image, nullptr, {}}, reported(0));
  OwnedTensor latents =
      refiner.denoise(second, generator, &times, DenoiseStart{nullptr, &handed.view(), {}}, reported(done_by_base));
  return refiner.finish(second, std::move(latents), std::move(times), start);
}

}  // namespace hd
