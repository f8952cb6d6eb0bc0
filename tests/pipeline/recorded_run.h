// The generation parameters of a run recorded in a pipeline fixture's case list (tools/make_fixtures.py,
// tools/train_tiny/reference.py): prompt, negative prompt, steps, CFG, sampler, schedule, seed, the
// size, the timestep spacing and SDXL's size conditioning when the case gives them; and how far a run is
// from its recording.
#pragma once

#include <nlohmann/json.hpp>

#include "fixture_util.h"
#include "pipeline/stable_diffusion.h"

namespace hd::test {

GenerationParams recorded_run_params(const nlohmann::json& c);

struct RunDistance {
  double latents_relative_l2;
  double image_psnr_db;
};

// `result` against the recording's "<name>.latents" and "<name>.image" (NCHW), printed with `label`.
RunDistance distance_to_recording(const GenerationResult& result, const Fixture& fixture, const std::string& name,
                                  const std::string& label);

}  // namespace hd::test
