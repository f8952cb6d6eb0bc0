// Denoising runs in company (StableDiffusion::step over several runs, as the serving engine steps them),
// checked against each run alone: the CPU test and the GPU test share it.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/stable_diffusion.h"

namespace hd::test {

// A request of `size` x `size` with a negative prompt.
GenerationParams company_params(const char* prompt, uint64_t seed, float cfg, SamplerKind sampler, int steps,
                                int size);

// Three runs of `sd` stepped as a server would: A alone for two steps, then B joins (A and B together),
// then C joins; each leaves when done and the rest go on. Each run's latents against the same request run
// alone (StableDiffusion::denoise), within `tolerance` relative L2: the batch's matrix products may sum in
// another order (and on a GPU take other tiles), nothing else differs. Progress and step times per run.
void check_company(const StableDiffusion& sd, const std::vector<GenerationParams>& requests,
                   double tolerance);

}  // namespace hd::test
