// The generation parameters of a run recorded in a pipeline fixture's case list (tools/make_fixtures.py,
// tools/train_tiny/reference.py): prompt, negative prompt, steps, CFG, sampler, schedule, seed, the
// size, the timestep spacing, SDXL's size conditioning and the refiner's aesthetic scores when the case gives
// them; and how far a run is
// from its recording.
#pragma once

#include <nlohmann/json.hpp>

#include "fixture_util.h"
#include "pipeline/stable_diffusion.h"

namespace hd::test {

GenerationParams recorded_run_params(const nlohmann::json& c);
// The LoRA of a case of tiny_*_lora_runs.safetensors (tools/lora_fixtures.py): its file among the fixture
// models, its scale and, where the case has one, the UNet's own ("lora_unet_scale").
LoraChoice recorded_lora(const nlohmann::json& c);

// One case of tiny_sdxl_refiner_runs.safetensors: the refiner alone on `init_image` ("kind": "refiner",
// img2img with the case's strength), or the base then the refiner ("ensemble", its high_noise_frac).
GenerationResult run_refiner_case(const nlohmann::json& c, const StableDiffusion& base, const StableDiffusion& refiner,
                                  const Tensor& init_image);

struct RunDistance {
  double latents_relative_l2;
  double image_psnr_db;
};

// `result` against the recording's "<name>.latents" and "<name>.image" (NCHW), printed with `label`.
RunDistance distance_to_recording(const GenerationResult& result, const Fixture& fixture, const std::string& name,
                                  const std::string& label);

}  // namespace hd::test
