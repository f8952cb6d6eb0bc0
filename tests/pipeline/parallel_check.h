// A request on several devices (ParallelStableDiffusion) checked against the same request on one: the CPU
// test and the GPU test share it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/parallel_generation.h"

namespace hd::test {

struct ParallelOutcome {
  double latents_relative_l2 = 0;  // against one device
  double image_psnr = 0;           // dB, against one device
  comm::ExchangeCounts counts;     // rank 0's, for this request's denoising
  comm::ExchangeCounts decode_counts;  // rank 0's, for its decode (zero: the first device decoded alone)
  uint64_t latents_bytes = 0;      // the final latents' in f32
};

// SDXL's refiner for the ensemble of expert denoisers: its path, and the base's share of the schedule.
struct RefinerChoice {
  std::string path;
  double high_noise_frac = 0.8;
};

// `p` on `devices` in `mode` and on devices[0] alone (a model of its own, same dtype): the pictures
// and final latents of both, compared. With `refiner`, both run the ensemble (generate_with_refiner).
ParallelOutcome compare_with_one_device(const std::string& model, const std::vector<Device>& devices, DType dtype,
                                        const GenerationParams& p, ParallelMode mode, const Tensor* init_image = nullptr,
                                        const std::optional<RefinerChoice>& refiner = std::nullopt);

}  // namespace hd::test
