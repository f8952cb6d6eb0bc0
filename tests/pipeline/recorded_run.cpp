#include "pipeline/recorded_run.h"

#include <string>

namespace hd::test {

GenerationParams recorded_run_params(const nlohmann::json& c) {
  GenerationParams p;
  p.prompt = c["prompt"];
  p.negative_prompt = c["negative_prompt"];
  p.steps = c["steps"];
  p.cfg_scale = c["cfg"];
  p.sampler = parse_sampler(c["sampler"].get<std::string>());
  p.schedule = parse_sigma_schedule(c["schedule"].get<std::string>());
  p.seed = c["seed"];
  if (c.contains("width")) p.width = c["width"];
  if (c.contains("height")) p.height = c["height"];
  return p;
}

}  // namespace hd::test
