#include "pipeline/parallel_check.h"

#include <gtest/gtest.h>

#include "fixture_util.h"
#include "test_util.h"

namespace hd::test {

ParallelOutcome compare_with_one_device(const std::string& model, const std::vector<Device>& devices, DType dtype,
                                        const GenerationParams& p, ParallelMode mode, const Tensor* init_image,
                                        const std::optional<RefinerChoice>& refiner) {
  const ops::Placement one{devices[0], devices[0].is_cpu() ? DType::kF32 : dtype};
  const StableDiffusion alone = StableDiffusion::load(model, std::nullopt, std::nullopt, one);
  std::optional<StableDiffusion> refiner_alone;
  if (refiner) refiner_alone = StableDiffusion::load(refiner->path, std::nullopt, std::nullopt, one);
  const GenerationResult reference =
      refiner ? generate_with_refiner(alone, *refiner_alone, p, refiner->high_noise_frac, {}, init_image)
              : alone.generate(p, {}, init_image);
  ParallelStableDiffusion several = ParallelStableDiffusion::load(model, std::nullopt, std::nullopt, devices, dtype);
  if (refiner) several.load_refiner(refiner->path, std::nullopt);
  const comm::ExchangeCounts before = several.counts();
  int progress_calls = 0, last_total = 0;
  const auto heard = [&](int, int total) { ++progress_calls, last_total = total; };
  const GenerationResult result =
      refiner ? several.generate_with_refiner(p, refiner->high_noise_frac, mode, heard, init_image)
              : several.generate(p, mode, heard, init_image);
  int steps = 0;
  if (refiner) {
    const RefinerShares shares =
        refiner_shares(alone, *refiner_alone, p, refiner->high_noise_frac, init_image != nullptr);
    steps = shares.base_steps + shares.refiner_steps;
  } else {
    const StepRange range = alone.steps_of(p, init_image != nullptr);
    steps = range.end - range.first;
  }
  EXPECT_EQ(progress_calls, steps) << "rank 0's steps, each once";
  EXPECT_EQ(last_total, steps);
  EXPECT_EQ(result.latents.view().shape, reference.latents.view().shape);
  EXPECT_EQ(result.image.view().shape, reference.image.view().shape);
  ParallelOutcome out;
  out.latents_relative_l2 = relative_l2(result.latents, as_reference(reference.latents));
  out.image_psnr = psnr(result.image, as_reference(reference.image));
  out.latents_bytes = reference.latents.view().nbytes();
  out.decode_counts = several.decode_counts();
  out.counts = several.counts();
  out.counts.bytes_sent -= before.bytes_sent + out.decode_counts.bytes_sent;
  out.counts.bytes_received -= before.bytes_received + out.decode_counts.bytes_received;
  out.counts.collectives -= before.collectives + out.decode_counts.collectives;
  return out;
}

}  // namespace hd::test
