// The generation parameters of a run recorded in a pipeline fixture's case list (tools/make_fixtures.py,
// tools/train_tiny/reference.py): prompt, negative prompt, steps, CFG, sampler, schedule, seed, and the
// size when the case gives one.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeline/stable_diffusion.h"

namespace hd::test {

GenerationParams recorded_run_params(const nlohmann::json& c);

}  // namespace hd::test
