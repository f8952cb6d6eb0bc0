// A1111's words: the infotext web UIs read back, and its sampler and schedule names.
#include "pipeline/infotext.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(Infotext, WritesA1111sParametersBlock) {
  GenerationParams p;
  p.prompt = "a red square";
  p.negative_prompt = "blurry";
  p.steps = 20;
  p.sampler = SamplerKind::kEulerAncestral;
  p.schedule = SigmaSchedule::kKarras;
  p.cfg_scale = 7.0f;
  p.seed = 1234;
  p.width = 768;
  p.height = 512;
  EXPECT_EQ(infotext(p, "v1-5.safetensors"),
            "a red square\nNegative prompt: blurry\nSteps: 20, Sampler: Euler a, Schedule type: Karras, CFG "
            "scale: 7, "
            "Seed: 1234, Size: 768x512, Model: v1-5.safetensors");
  p.negative_prompt.clear();
  p.strength = 0.5f;
  p.schedule = SigmaSchedule::kDiscrete;
  EXPECT_EQ(
      infotext(p, "m", InfotextRefiner{"refiner.safetensors", 0.8}),
      "a red square\nSteps: 20, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7, Seed: 1234, Size: "
      "768x512, Model: m, Denoising strength: 0.5, Refiner: refiner.safetensors, Refiner switch at: 0.8");
  // LoRAs follow the prompt as A1111's tags, named by the file's stem.
  const std::vector<LoraChoice> loras = {{"/loras/detail.safetensors", 0.8f}, {"style.v2.safetensors", 1.0f}};
  const std::string with_loras = infotext(p, "m", std::nullopt, loras);
  EXPECT_EQ(lora_tag("x", 0.1234561f), "<lora:x:0.1234561>");  // two scales never share a tag
  EXPECT_EQ(lora_tag("x", 0.1234564f), "<lora:x:0.1234564>");
  EXPECT_EQ(lora_tag("x", 0.5f, 0.7f), "<lora:x:0.5:0.7>");  // the UNet's own scale, as A1111 writes it
  EXPECT_EQ(lora_tag("x", 0.5f, 0.5f), "<lora:x:0.5>");
  EXPECT_EQ(lora_tag(LoraChoice{"d/y.safetensors", 1.0f, 0.0f}), "<lora:y:1:0>");
  EXPECT_EQ(with_loras.rfind("a red square <lora:detail:0.8> <lora:style.v2:1>\nSteps: 20, ", 0), 0u)
      << with_loras;
}

TEST(Infotext, ReadsA1111sSamplerAndScheduleNames) {
  EXPECT_EQ(parse_a1111_sampler("Euler a").kind, SamplerKind::kEulerAncestral);
  EXPECT_EQ(parse_a1111_sampler("k_euler").kind, SamplerKind::kEuler);
  EXPECT_EQ(parse_a1111_sampler("ddim").kind, SamplerKind::kDdim);
  const A1111Sampler karras = parse_a1111_sampler("DPM++ 2M Karras");
  EXPECT_EQ(karras.kind, SamplerKind::kDpmpp2m);
  EXPECT_EQ(karras.schedule, SigmaSchedule::kKarras);
  EXPECT_FALSE(parse_a1111_sampler("DPM++ 2M").schedule.has_value());
  for (const std::string& name : a1111_sampler_names())
    EXPECT_EQ(a1111_sampler_name(parse_a1111_sampler(name).kind), name);
  test::expect_error_containing([] { parse_a1111_sampler("UniPC"); },
                                "unknown sampler \"UniPC\" (this engine has: Euler, Euler a, DPM++ 2M, DDIM");
  EXPECT_EQ(parse_a1111_schedule("Karras"), SigmaSchedule::kKarras);
  EXPECT_EQ(parse_a1111_schedule("automatic"), SigmaSchedule::kDiscrete);
  test::expect_error_containing([] { parse_a1111_schedule("Exponential"); },
                                "unknown scheduler \"Exponential\"");
}

}  // namespace
}  // namespace hd
