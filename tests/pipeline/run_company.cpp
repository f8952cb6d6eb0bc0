#include "pipeline/run_company.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace hd::test {

namespace {

std::vector<double> alone(const StableDiffusion& sd, const GenerationParams& p) {
  TorchCpuGenerator generator(p.seed);
  StageTimes times;
  const OwnedTensor latents = sd.denoise(p, generator, &times);
  const std::vector<float> v = test::to_vector(latents);
  return {v.begin(), v.end()};
}

}  // namespace

GenerationParams company_params(const char* prompt, uint64_t seed, float cfg, SamplerKind sampler, int steps,
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

void check_company(const StableDiffusion& sd, const std::vector<GenerationParams>& requests,
                   double tolerance) {
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
    EXPECT_LT(test::relative_l2(together, alone(sd, requests[r])), tolerance);
    EXPECT_EQ(progress_calls[r], requests[r].steps);
    EXPECT_EQ(times.steps.size(), size_t(requests[r].steps));
  }
}

}  // namespace hd::test
