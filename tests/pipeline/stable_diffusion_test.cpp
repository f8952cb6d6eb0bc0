// Whole txt2img runs against diffusers' StableDiffusionPipeline on the tiny SD1.x and SD2.x pipelines
// (tests/fixtures/models/tiny_sd{1,2}_pipeline.safetensors, from tools/make_fixtures.py --only models):
// every sampler and schedule, with and without classifier-free guidance, same seed, same prompts.
#include "pipeline/stable_diffusion.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "fixture_util.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "pipeline/init_image.h"
#include "pipeline/recorded_run.h"
#include "test_util.h"

namespace hd {
namespace {

// The parameters of a recorded run (the runs were recorded with leading spacing).
GenerationParams params_of(const nlohmann::json& c) {
  GenerationParams p = test::recorded_run_params(c);
  p.spacing = TimestepSpacing::kLeading;
  return p;
}

// Runs `generate` and compares latents (relative L2 <= 1e-3) and image (>= 40 dB PSNR) with the fixture.
void check_run(const StableDiffusion& sd, const test::Fixture& fixture, const std::string& label, const std::string& name,
               const GenerationParams& p, const Tensor* init_image) {
  const test::RunDistance d = test::distance_to_recording(sd.generate(p, {}, init_image), fixture, name, label);
  EXPECT_LT(d.latents_relative_l2, 1e-3);
  EXPECT_GE(d.image_psnr_db, 40.0);
}


void check_family(const std::string& family, bool single_file = false) {
  const std::string base = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family;
  // The single file needs the folder's configs for what tiny weights cannot tell (heads, groups), as
  // diffusers' from_single_file(config=...) does.
  const StableDiffusion sd = single_file ? StableDiffusion::load(base + ".safetensors", std::nullopt, base)
                                         : StableDiffusion::load(base, std::nullopt);
  const test::Fixture fixture("models/tiny_" + family + "_pipeline.safetensors");
  int runs = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(family + " " + name);
    GenerationParams p = params_of(c);
    p.width = c["width"];
    p.height = c["height"];
    check_run(sd, fixture, family, name, p, nullptr);
    ++runs;
  }
  EXPECT_EQ(runs, 12);
}

// img2img: diffusers' StableDiffusionImg2ImgPipeline from the fixture's init PNG.
void check_img2img(const std::string& family) {
  const StableDiffusion sd = StableDiffusion::load(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family, std::nullopt);
  const RgbImage png = read_png(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/img2img_init.png");
  const OwnedTensor init = init_image_of(png);
  const test::Fixture fixture("models/tiny_" + family + "_img2img.safetensors");
  int runs = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(family + " img2img " + name);
    GenerationParams p = params_of(c);
    p.strength = c["strength"];
    p.width = png.width;
    p.height = png.height;
    check_run(sd, fixture, family + " img2img", name, p, &init.view());
    ++runs;
  }
  EXPECT_EQ(runs, 5);
}

// LoRAs merged as the weights load, against diffusers' load_lora_weights + fuse_lora(lora_scale) on the
// same tiny pipeline (tools/lora_fixtures.py): kohya's and PEFT's forms, the UNet's blocks and the text
// encoders, and (SD1.x) the UNet at a scale of its own (fuse_lora per component). Each LoRA must also move
// the picture well away from the run without it (the "none" recording), so that a LoRA left out could not
// pass. With `single_file`, the model's single-file checkpoint too (its names mapped from the original ones;
// SDXL's second text encoder's q/k/v rows of fused tensors).
void check_lora_runs(const std::string& family, const std::string& folder, bool single_file = false) {
  const std::string models = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";
  const test::Fixture fixture("models/tiny_" + family + "_lora_runs.safetensors");
  int runs = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(family + " " + name);
    const LoraChoice lora = test::recorded_lora(c);
    for (const bool single : {false, true}) {
      if (single && !single_file) continue;
      const StableDiffusion sd =
          single ? StableDiffusion::load(models + folder + ".safetensors", std::nullopt, models + folder, {},
                                         {&lora, 1})
                 : StableDiffusion::load(models + folder, std::nullopt, std::nullopt, {}, {&lora, 1});
      ASSERT_EQ(sd.loras().size(), 1u);
      const GenerationResult result = sd.generate(params_of(c));
      const std::string label = family + (single ? " single-file" : "") + " LoRA";
      const test::RunDistance d = test::distance_to_recording(result, fixture, name, label);
      EXPECT_LT(d.latents_relative_l2, 1e-3);
      EXPECT_GE(d.image_psnr_db, 40.0);
      const test::RunDistance without =
          test::distance_to_recording(result, fixture, "none", label + " (none)");
      EXPECT_GT(without.latents_relative_l2, 0.05);
    }
    ++runs;
  }
  EXPECT_EQ(runs, family == "sd1" ? 3 : 1);  // SD1.x: kohya's, PEFT's, kohya's with a UNet scale of its own
}

TEST(StableDiffusion, Sd1TinyWithLorasMatchesDiffusers) {
  check_lora_runs("sd1", "tiny_sd1");
}
TEST(StableDiffusion, SdxlTinyWithLoraMatchesDiffusers) {
  check_lora_runs("sdxl", "tiny_sdxl_pipeline", true);
}
// SD2.x: v-prediction, linear projections, and in the single file an OpenCLIP text encoder whose q/k/v
// the LoRA changes as rows of fused tensors.
TEST(StableDiffusion, Sd2TinyWithLoraMatchesDiffusers) {
  check_lora_runs("sd2", "tiny_sd2", true);
}

TEST(StableDiffusion, Sd1TinyImg2ImgMatchesDiffusers) { check_img2img("sd1"); }
TEST(StableDiffusion, Sd2TinyImg2ImgMatchesDiffusers) { check_img2img("sd2"); }

TEST(StableDiffusion, Sd1TinyPipelineMatchesDiffusers) { check_family("sd1"); }
TEST(StableDiffusion, Sd2TinyPipelineMatchesDiffusers) { check_family("sd2"); }

TEST(StableDiffusion, Sd1TinySingleFileMatchesDiffusers) { check_family("sd1", true); }

// Converters differ in the CLIP names they write: diffusers' own conversion script and others leave
// "text_model." out (cond_stage_model.transformer.embeddings...). Such a file generates the same runs.
// A tiny single file with the names under `from` moved under `to`, run against the family's first
// recorded diffusers run.
void check_renamed_single_file(const std::string& family, const std::string& from, const std::string& to) {
  const std::string base = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family;
  const SafetensorsFile original = SafetensorsFile::open(base + ".safetensors");
  std::vector<SafetensorsWriteItem> items;
  int renamed = 0;
  for (const auto& e : original.entries()) {
    std::string name = e.name;
    if (name.starts_with(from)) {
      name = to + name.substr(from.size());
      ++renamed;
    }
    const auto raw = original.raw(e);
    items.push_back({name, e.dtype_name, e.shape, std::vector<uint8_t>(raw.begin(), raw.end())});
  }
  EXPECT_GT(renamed, 10);
  test::TempDir dir;
  const auto path = dir.write("variant.safetensors", serialize_safetensors(std::move(items)));
  const StableDiffusion sd = StableDiffusion::load(path.string(), std::nullopt, base);
  const test::Fixture fixture("models/tiny_" + family + "_pipeline.safetensors");
  const auto& c = fixture.cases()[0];
  GenerationParams p = params_of(c);
  check_run(sd, fixture, family + " variant", c["name"], p, nullptr);
}

TEST(StableDiffusion, Sd1SingleFileWithoutTextModelInItsClipNamesMatchesDiffusers) {
  check_renamed_single_file("sd1", "cond_stage_model.transformer.text_model.", "cond_stage_model.transformer.");
}

// SD-Turbo's files (SD2.1's UNet, saved by Stability's sgm code) keep the one OpenCLIP ViT-H encoder under
// conditioner.embedders.0.model.*, which A1111 renames to cond_stage_model.model.*: SD2.x's text encoder.
TEST(StableDiffusion, Sd2SingleFileWithItsEncoderUnderConditionerMatchesDiffusers) {
  check_renamed_single_file("sd2", "cond_stage_model.", "conditioner.embedders.0.");
}
TEST(StableDiffusion, Sd2TinyOpenClipSingleFileMatchesDiffusers) { check_family("sd2", true); }

// No picture of NaN leaves the engine: a decode that gives one, with nothing wider to retry in (f32 on
// the CPU), is an error.
TEST(StableDiffusion, NonFiniteDecodeIsAnError) {
  const StableDiffusion sd = StableDiffusion::load(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1", std::nullopt);
  OwnedTensor latents(Shape{1, 4, 4, 4}, DType::kF32);
  for (int64_t i = 0; i < latents.view().numel(); ++i) latents.ptr<float>()[i] = i == 5 ? NAN : 0.1f;
  DecodeReport report;
  try {
    sd.decode(latents, &report);
    FAIL() << "a NaN picture was returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
  }
}

TEST(StableDiffusion, BadParametersAreClearErrors) {
  GenerationParams p;
  p.width = 100;  // not a multiple of 8
  EXPECT_THROW(validate(p, 8), Error);
  p = GenerationParams{};
  p.steps = 0;
  EXPECT_THROW(validate(p, 8), Error);
  p = GenerationParams{};
  p.cfg_scale = NAN;
  EXPECT_THROW(validate(p, 8), Error);
  p = GenerationParams{};
  p.cfg_scale = -1.0f;
  EXPECT_THROW(validate(p, 8), Error);
  p = GenerationParams{};
  p.strength = 1.5f;
  EXPECT_THROW(validate(p, 8), Error);
  EXPECT_NO_THROW(validate(GenerationParams{}, 8));
}

}  // namespace
}  // namespace hd
