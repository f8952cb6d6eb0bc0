#include "pipeline/recorded_run.h"

#include <cstdio>
#include <string>

#include "pipeline/expert_ensemble.h"
#include "test_util.h"

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
  if (c.contains("spacing")) p.spacing = parse_timestep_spacing(c["spacing"].get<std::string>());
  const auto pair_of = [&](const char* key) -> std::optional<std::array<int, 2>> {
    if (!c.contains(key)) return std::nullopt;
    return std::array<int, 2>{c[key][0].get<int>(), c[key][1].get<int>()};
  };
  p.sizes = {pair_of("original_size"), pair_of("crops_coords_top_left"), pair_of("target_size")};
  p.negative_sizes = {pair_of("negative_original_size"), pair_of("negative_crops_coords_top_left"),
                      pair_of("negative_target_size")};
  if (c.contains("aesthetic_score")) p.aesthetic_score = c["aesthetic_score"].get<float>();
  if (c.contains("negative_aesthetic_score")) p.negative_aesthetic_score = c["negative_aesthetic_score"].get<float>();
  return p;
}

LoraChoice recorded_lora(const nlohmann::json& c) {
  LoraChoice lora{std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/" + c["lora"].get<std::string>(),
                  c["lora_scale"].get<float>()};
  if (c.contains("lora_unet_scale")) lora.unet_scale = c["lora_unet_scale"].get<float>();
  return lora;
}

GenerationResult run_refiner_case(const nlohmann::json& c, const StableDiffusion& base, const StableDiffusion& refiner,
                                  const Tensor& init_image) {
  GenerationParams p = recorded_run_params(c);
  if (c["kind"] == "refiner") {
    p.strength = c["strength"];
    return refiner.generate(p, {}, &init_image);
  }
  return generate_with_refiner(base, refiner, p, c["high_noise_frac"].get<double>());
}

RunDistance distance_to_recording(const GenerationResult& result, const Fixture& fixture, const std::string& name,
                                  const std::string& label) {
  const RunDistance d{relative_l2(result.latents, as_reference(fixture.nhwc(name + ".latents"))),
                      psnr(result.image, as_reference(fixture.nhwc(name + ".image")))};
  std::printf("%s %-38s latents rel. L2 %.2e, image PSNR %.1f dB\n", label.c_str(), name.c_str(), d.latents_relative_l2,
              d.image_psnr_db);
  return d;
}

}  // namespace hd::test
