// Denoising runs stepped together (StableDiffusion::step over several runs, one UNet batch) give each run
// the latents it gets alone (StableDiffusion::denoise), whatever its company: other prompts, seeds,
// guidance scales, samplers and step counts, joining and leaving at different steps.
#include "pipeline/denoising_run.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/run_company.h"
#include "pipeline/stable_diffusion.h"
#include "test_util.h"

namespace hd {
namespace {

using test::company_params;

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";
// The pictures' size: what the tests check does not depend on it, and their time does.
constexpr int kSize = 32;

TEST(DenoisingRun, SD1RunsSteppedTogetherGiveWhatEachGivesAlone) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  GenerationParams b =
      company_params("a blue circle", 2, 1.0f, SamplerKind::kDpmpp2m, 5, kSize);  // unguided, multistep
  b.batch = 2;
  test::check_company(sd,
                      {company_params("a red square", 1, 7.5f, SamplerKind::kEulerAncestral, 6,
                                      kSize),  // draws noise each step
                       b, company_params("", 3, 3.0f, SamplerKind::kDdim, 4, kSize)},
                      1e-5);
}

TEST(DenoisingRun, SDXLRunsSteppedTogetherGiveWhatEachGivesAlone) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sdxl_pipeline", std::nullopt);
  GenerationParams b = company_params("a blue circle", 2, 5.0f, SamplerKind::kEuler, 5, kSize);
  b.sizes.original_size = std::array<int, 2>{128, 96};  // other micro-conditioning ids in the same batch
  b.schedule = SigmaSchedule::kKarras;
  test::check_company(sd,
                      {company_params("a red square", 1, 7.5f, SamplerKind::kEuler, 6, kSize), b,
                       company_params("a green triangle", 3, 1.0f, SamplerKind::kEulerAncestral, 4, kSize)},
                      1e-5);
}

TEST(DenoisingRun, StepRefusesRunsThatCannotShareABatch) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  const StableDiffusion other = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  TorchCpuGenerator g1(1), g2(2), g3(3);
  DenoisingRun small = sd.start_denoising(company_params("a", 1, 7.5f, SamplerKind::kEuler, 1, kSize), g1);
  DenoisingRun large =
      sd.start_denoising(company_params("a", 2, 7.5f, SamplerKind::kEuler, 2, 2 * kSize), g2);
  DenoisingRun foreign =
      other.start_denoising(company_params("a", 3, 7.5f, SamplerKind::kEuler, 2, kSize), g3);
  DenoisingRun* const sizes[] = {&small, &large};
  test::expect_error_containing([&] { sd.step(sizes); }, "do not share a UNet batch");
  DenoisingRun* const models[] = {&small, &foreign};
  test::expect_error_containing([&] { sd.step(models); }, "steps with the model that started it");
  DenoisingRun* const one[] = {&small};
  sd.step(one);
  test::expect_error_containing([&] { sd.step(one); }, "has no step left");
  StageTimes times;
  test::expect_error_containing([&] { large.take_latents(&times); }, "has 2 steps left");
}

}  // namespace
}  // namespace hd
