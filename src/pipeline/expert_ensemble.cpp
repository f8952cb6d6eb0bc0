#include "pipeline/expert_ensemble.h"

#include <chrono>

#include "core/error.h"

namespace hd {

void check_refiner_switch(double high_noise_frac) {
  HD_CHECK(high_noise_frac > 0.0 && high_noise_frac < 1.0,
           "the refiner's switch (the base model's share of the schedule) must be in (0, 1), leaving each model a "
           "share; got ", high_noise_frac);
}

RefinerShares refiner_shares(const StableDiffusion& base, const StableDiffusion& refiner,
                             const GenerationParams& params, double high_noise_frac, bool from_init_image) {
  HD_CHECK(base.family() == ModelFamily::kSDXL && refiner.family() == ModelFamily::kSDXL,
           "a base and its refiner are SDXL models (diffusers' ensemble of expert denoisers); got ",
           family_name(base.family()), " and ", family_name(refiner.family()));
  HD_CHECK(base.micro_conditioning() != MicroConditioning::kAestheticScore,
           "the base model is an SDXL refiner (aesthetic-score conditioning): give the base model as the model and "
           "the refiner as its refiner");
  base.check_same_latent_space(refiner);
  HD_CHECK(!params.denoising_start && !params.denoising_end,
           "with a refiner, the high-noise fraction says where the base stops and the refiner starts");
  check_refiner_switch(high_noise_frac);

  RefinerShares shares{params, params, 0, 0};
  shares.base.denoising_end = high_noise_frac;
  shares.refiner.denoising_start = high_noise_frac;
  // What each model does not take: the base no aesthetic scores, a refiner no target size (a base as the
  // refiner keeps the scores, which its validate refuses).
  shares.base.aesthetic_score.reset();
  shares.base.negative_aesthetic_score.reset();
  if (refiner.micro_conditioning() == MicroConditioning::kAestheticScore) {
    shares.refiner.sizes.target_size.reset();
    shares.refiner.negative_sizes.target_size.reset();
  }
  // Every check before the first step: each model's rules and each share's steps.
  base.validate(shares.base, from_init_image);
  refiner.validate(shares.refiner, true);
  StepRange base_steps = base.step_range(shares.base, from_init_image);
  if (from_init_image && base_steps.empty()) {
    // The strength starts the image below the switch: the base has no step of its own, and the refiner
    // makes the picture alone as the img2img of the init image that it is (A1111 does the same).
    shares.refiner.denoising_start.reset();
    base_steps = {};
  } else {
    base_steps = base.steps_of(shares.base, from_init_image);  // its error, when txt2img leaves none
  }
  const StepRange refiner_steps = refiner.steps_of(shares.refiner, base_steps.empty());
  shares.base_steps = base_steps.end - base_steps.first;
  shares.refiner_steps = refiner_steps.end - refiner_steps.first;
  return shares;
}

GenerationResult generate_with_refiner(const StableDiffusion& base, const StableDiffusion& refiner,
                                       const GenerationParams& params, double high_noise_frac,
                                       const ProgressCallback& progress, const Tensor* init_image) {
  const auto start = std::chrono::steady_clock::now();
  const RefinerShares shares = refiner_shares(base, refiner, params, high_noise_frac, init_image != nullptr);
  TorchCpuGenerator generator(params.seed);
  StageTimes times;
  OwnedTensor latents = denoise_with_refiner(base, refiner, shares, generator, &times, init_image, {}, progress);
  return refiner.finish(shares.refiner, std::move(latents), std::move(times), start);
}

OwnedTensor denoise_with_refiner(const StableDiffusion& base, const StableDiffusion& refiner,
                                 const RefinerShares& shares, TorchCpuGenerator& generator, StageTimes* times,
                                 const Tensor* init_image, BatchShare share, const ProgressCallback& progress) {
  const int total = shares.base_steps + shares.refiner_steps;
  const auto reported = [&](int offset) -> ProgressCallback {
    if (!progress) return {};
    return [&progress, offset, total](int done, int) { progress(offset + done, total); };
  };
  if (shares.base_steps == 0)  // img2img starting below the switch: the refiner's alone
    return refiner.denoise(shares.refiner, generator, times, DenoiseStart{init_image, nullptr, share}, reported(0));
  const OwnedTensor handed =
      base.denoise(shares.base, generator, times, DenoiseStart{init_image, nullptr, share}, reported(0));
  return refiner.denoise(shares.refiner, generator, times, DenoiseStart{nullptr, &handed.view(), share},
                         reported(shares.base_steps));
}

}  // namespace hd
