// Denoising runs stepped together (StableDiffusion::step over several runs, one UNet batch) give each run
// the latents it gets alone (StableDiffusion::denoise), whatever its company: other prompts, seeds,
// guidance scales, samplers and step counts, joining and leaving at different steps.
#include "pipeline/denoising_run.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/stable_diffusion.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

std::vector<double> alone(const StableDiffusion& sd, const GenerationParams& p) {
  TorchCpuGenerator generator(p.seed);
  StageTimes times;
  const OwnedTensor latents = sd.denoise(p, generator, &times);
  const std::vector<float> v = test::to_vector(latents);
  return {v.begin(), v.end()};
}

GenerationParams params(const char* prompt, uint64_t seed, float cfg, SamplerKind sampler, int steps,
                        int size) {
  GenerationParams p;
  p.prompt = prompt;
  p.negative_prompt = "blurry";
  p.seed = seed;
  p.cfg_scale = cfg;
  p.sampler = sampler;
  p.steps = steps;
  p.width = p.height = size;
  return p;
}

// Three runs of `sd` stepped as a server would: A alone for two steps, then B joins (A and B together),
// then C joins; each leaves when done and the rest go on. Each run's latents against the same request
// run alone: the batch's matrix products may sum in another order, nothing else differs.
void check_company(const StableDiffusion& sd, std::vector<GenerationParams> requests) {
  std::vector<TorchCpuGenerator> generators;
  for (const GenerationParams& p : requests) generators.emplace_back(p.seed);
  std::vector<DenoisingRun> runs;
  std::vector<int> progress_calls(requests.size(), 0);
  for (size_t r = 0; r < requests.size(); ++r)
    runs.push_back(sd.start_denoising(requests[r], generators[r], {}, [&, r](int done, int total) {
      ++progress_calls[r];
      EXPECT_EQ(done, progress_calls[r]);
      EXPECT_EQ(total, requests[r].steps);
    }));
  std::vector<DenoisingRun*> active = {&runs[0]};
  int batched_steps = 0;
  for (int step = 0; !active.empty(); ++step) {
    if (step == 2) active.push_back(&runs[1]);
    if (step == 3) active.push_back(&runs[2]);
    sd.step(active);
    batched_steps += active.size() > 1;
    std::erase_if(active, [](DenoisingRun* r) { return r->done(); });
  }
  EXPECT_GT(batched_steps, 2);
  for (size_t r = 0; r < runs.size(); ++r) {
    SCOPED_TRACE("run " + std::to_string(r));
    StageTimes times;
    const OwnedTensor together = runs[r].take_latents(&times);
    EXPECT_LT(test::relative_l2(together, alone(sd, requests[r])), 1e-5);
    EXPECT_EQ(progress_calls[r], requests[r].steps);
    EXPECT_EQ(times.steps.size(), size_t(requests[r].steps));
  }
}

TEST(DenoisingRun, SD1RunsSteppedTogetherGiveWhatEachGivesAlone) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  GenerationParams b = params("a blue circle", 2, 1.0f, SamplerKind::kDpmpp2m, 5, 64);  // unguided, multistep
  b.batch = 2;
  check_company(
      sd, {params("a red square", 1, 7.5f, SamplerKind::kEulerAncestral, 6, 64),  // draws noise each step
           b, params("", 3, 3.0f, SamplerKind::kDdim, 4, 64)});
}

TEST(DenoisingRun, SDXLRunsSteppedTogetherGiveWhatEachGivesAlone) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sdxl_pipeline", std::nullopt);
  GenerationParams b = params("a blue circle", 2, 5.0f, SamplerKind::kEuler, 5, 64);
  b.sizes.original_size = std::array<int, 2>{128, 96};  // other micro-conditioning ids in the same batch
  b.schedule = SigmaSchedule::kKarras;
  check_company(sd, {params("a red square", 1, 7.5f, SamplerKind::kEuler, 6, 64), b,
                     params("a green triangle", 3, 1.0f, SamplerKind::kEulerAncestral, 4, 64)});
}

TEST(DenoisingRun, StepRefusesRunsThatCannotShareABatch) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  const StableDiffusion other = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  TorchCpuGenerator g1(1), g2(2), g3(3);
  DenoisingRun small = sd.start_denoising(params("a", 1, 7.5f, SamplerKind::kEuler, 1, 64), g1);
  DenoisingRun large = sd.start_denoising(params("a", 2, 7.5f, SamplerKind::kEuler, 2, 128), g2);
  DenoisingRun foreign = other.start_denoising(params("a", 3, 7.5f, SamplerKind::kEuler, 2, 64), g3);
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
