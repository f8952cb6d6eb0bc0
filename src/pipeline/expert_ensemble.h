// SDXL's base and refiner as diffusers' "ensemble of expert denoisers": the base denoises the high-noise
// share of the schedule and hands its latents to the refiner, which denoises the rest.
#pragma once

#include "pipeline/stable_diffusion.h"

namespace hd {

// The base denoises the first `high_noise_frac` of the schedule by training timestep (diffusers'
// denoising_end) and the refiner the rest from the base's latents, not noised again (denoising_start);
// one generator, seeded with params.seed, draws for both (the noise, then every ancestral step's), and the
// refiner's VAE decodes. From `init_image` the base starts as img2img does (params.strength). Each model
// takes its own share of `params`: the size conditioning the base's, the original size, crop and aesthetic
// scores the refiner's (a refiner has no target size). An img2img whose strength starts below the switch
// leaves the base no step: the refiner then makes the picture alone, as an img2img of `init_image` with
// params.strength (A1111 does the same). Throws before any work when the pair or a share is wrong: a
// refiner as the base, latents of different spaces, a fraction that leaves either model no step otherwise.
GenerationResult generate_with_refiner(const StableDiffusion& base, const StableDiffusion& refiner,
                                       const GenerationParams& params, double high_noise_frac,
                                       const ProgressCallback& progress = {}, const Tensor* init_image = nullptr);

// The refiner's switch, the base's share of the schedule by noise level (diffusers' high_noise_frac,
// A1111's refiner_switch_at): in (0, 1), so that each model has a share. The one check of it; every front
// end calls it before loading anything.
void check_refiner_switch(double high_noise_frac);

// Each model's share of a request with a refiner, every check of generate_with_refiner made (they throw
// before any work): the base's parameters (denoising_end) and the refiner's (denoising_start), and the
// steps each takes (the base none when the refiner makes an img2img alone: the refiner's share is then a
// plain img2img of the init image). A server steps the two runs itself (serve::Engine).
struct RefinerShares {
  GenerationParams base, refiner;
  int base_steps = 0, refiner_steps = 0;
};
RefinerShares refiner_shares(const StableDiffusion& base, const StableDiffusion& refiner,
                             const GenerationParams& params, double high_noise_frac, bool from_init_image);

// The ensemble's denoising of rows `share` of the batch (all of them by default): the base's share from
// noise or `init_image` (none when the img2img leaves it none), then the refiner's from the base's
// latents, one generator drawing for both. Returns the final latents, as StableDiffusion::denoise does;
// `progress` hears the steps of both, counted over both. Each model computes as it is set (a rank of
// several devices: split_guidance, split_image).
OwnedTensor denoise_with_refiner(const StableDiffusion& base, const StableDiffusion& refiner,
                                 const RefinerShares& shares, TorchCpuGenerator& generator, StageTimes* times,
                                 const Tensor* init_image, BatchShare share = {},
                                 const ProgressCallback& progress = {});

}  // namespace hd
