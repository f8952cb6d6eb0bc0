// Whole SDXL runs against diffusers on the tiny SDXL pipeline (tests/fixtures/models/tiny_sdxl_pipeline_*,
// from tools/make_fixtures.py --only sdxl_pipeline): StableDiffusionXLPipeline's txt2img over samplers and
// schedules, CFG on and off, no negative prompt (zeros, as force_zeros_for_empty_prompt says), given
// micro-conditioning, a 32x24 image, SDXL-Turbo's way (trailing spacing, 1-4 steps, guidance 0); and
// StableDiffusionXLImg2ImgPipeline's img2img with the base model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "fixture_util.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "pipeline/init_image.h"
#include "pipeline/recorded_run.h"
#include "pipeline/stable_diffusion.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kSdxl = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline";

// The folder, and the single file (conditioner.embedders.0 in transformers' names, .1 in OpenCLIP's,
// written by tools/make_fixtures.py and read back identically by diffusers' from_single_file) with the
// folder's configs and tokenizers, as from_single_file(config=) takes them.
void check_recorded_runs(bool single_file) {
  const StableDiffusion sd = single_file ? StableDiffusion::load(kSdxl + ".safetensors", std::nullopt, kSdxl)
                                         : StableDiffusion::load(kSdxl, std::nullopt);
  EXPECT_EQ(sd.family(), ModelFamily::kSDXL);
  const test::Fixture fixture("models/tiny_sdxl_pipeline_runs.safetensors");
  int runs = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const GenerationParams p = test::recorded_run_params(c);  // leading spacing, or Turbo's trailing
    const test::RunDistance d =
        test::distance_to_recording(sd.generate(p), fixture, name, single_file ? "sdxl single file" : "sdxl");
    EXPECT_LT(d.latents_relative_l2, 1e-3);
    EXPECT_GE(d.image_psnr_db, 40.0);
    ++runs;
  }
  EXPECT_EQ(runs, 13);
}

TEST(StableDiffusionXl, TinyPipelineMatchesDiffusers) { check_recorded_runs(false); }
TEST(StableDiffusionXl, TinySingleFileMatchesDiffusers) { check_recorded_runs(true); }

TEST(StableDiffusionXl, TinyImg2ImgMatchesDiffusers) {
  const StableDiffusion sd = StableDiffusion::load(kSdxl, std::nullopt);
  const RgbImage png = read_png(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/img2img_init.png");
  const OwnedTensor init = init_image_of(png);
  const test::Fixture fixture("models/tiny_sdxl_pipeline_img2img.safetensors");
  int runs = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    GenerationParams p = test::recorded_run_params(c);
    p.strength = c["strength"];
    p.width = png.width;
    p.height = png.height;
    const test::RunDistance d = test::distance_to_recording(sd.generate(p, {}, &init.view()), fixture, name, "sdxl img2img");
    EXPECT_LT(d.latents_relative_l2, 1e-3);
    EXPECT_GE(d.image_psnr_db, 40.0);
    ++runs;
  }
  EXPECT_EQ(runs, 3);
}

// --vocab gives both tokenizers one vocabulary; the second must still pad with "!" as SDXL's tokenizer_2
// does (given the first tokenizer's folder, which pads with <|endoftext|>, the runs still match).
TEST(StableDiffusionXl, VocabFolderPadsTheSecondTokenizerWithExclamationMarks) {
  const StableDiffusion sd = StableDiffusion::load(kSdxl + ".safetensors", kSdxl + "/tokenizer", kSdxl);
  const test::Fixture fixture("models/tiny_sdxl_pipeline_runs.safetensors");
  const auto& c = fixture.cases()[0];
  const GenerationParams p = test::recorded_run_params(c);
  const test::RunDistance d = test::distance_to_recording(sd.generate(p), fixture, c["name"], "sdxl --vocab");
  EXPECT_LT(d.latents_relative_l2, 1e-3);
}

// Converters write OpenCLIP's text_projection (applied as x · P) or transformers' text_projection.weight
// (Pᵀ): ComfyUI reads both. A file with the second form generates the same runs; with both, OpenCLIP's is
// taken (here the other is made wrong, so that taking it would show).
TEST(StableDiffusionXl, SingleFileWithEitherTextProjectionFormMatchesDiffusers) {
  const SafetensorsFile original = SafetensorsFile::open(kSdxl + ".safetensors");
  const std::string projection = "conditioner.embedders.1.model.text_projection";
  for (const bool both : {false, true}) {
    SCOPED_TRACE(both ? "both forms" : "transformers' form");
    std::vector<SafetensorsWriteItem> items;
    for (const auto& e : original.entries()) {
      const auto raw = original.raw(e);
      std::vector<uint8_t> bytes(raw.begin(), raw.end());
      if (e.name != projection) {
        items.push_back({e.name, e.dtype_name, e.shape, std::move(bytes)});
        continue;
      }
      ASSERT_EQ(e.dtype_name, "F32");
      ASSERT_EQ(e.shape.size(), 2u);
      const int64_t rows = e.shape[0], cols = e.shape[1];
      std::vector<float> p(size_t(rows * cols)), pt(p.size());
      std::memcpy(p.data(), bytes.data(), bytes.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) pt[size_t(c * rows + r)] = both ? 0.0f : p[size_t(r * cols + c)];
      std::vector<uint8_t> transposed(bytes.size());
      std::memcpy(transposed.data(), pt.data(), transposed.size());
      items.push_back({projection + ".weight", "F32", {cols, rows}, std::move(transposed)});
      if (both) items.push_back({projection, "F32", e.shape, std::move(bytes)});
    }
    test::TempDir dir;
    const auto path = dir.write("variant.safetensors", serialize_safetensors(std::move(items)));
    const StableDiffusion sd = StableDiffusion::load(path.string(), std::nullopt, kSdxl);
    const test::Fixture fixture("models/tiny_sdxl_pipeline_runs.safetensors");
    const auto& c = fixture.cases()[0];
    const test::RunDistance d =
        test::distance_to_recording(sd.generate(test::recorded_run_params(c)), fixture, c["name"], "sdxl variant");
    EXPECT_LT(d.latents_relative_l2, 1e-3);
  }
}

// A single file alone has no tokenizers: the error says which one is missing and what to pass.
TEST(StableDiffusionXl, SingleFileWithoutTokenizersIsAClearError) {
  test::TempDir dir;
  std::filesystem::copy_file(kSdxl + ".safetensors", dir.path() / "model.safetensors");
  try {
    StableDiffusion::load((dir.path() / "model.safetensors").string(), std::nullopt);
    FAIL() << "loaded without tokenizers";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no tokenizer"), std::string::npos) << what;
    EXPECT_NE(what.find("--vocab"), std::string::npos) << what;
  }
}

// A single file whose config folder lacks vae/config.json gets SDXL's VAE settings (diffusers'
// from_single_file infers the same), not SD1.x's scaling factor 0.18215, which would decode another picture.
TEST(StableDiffusionXl, SingleFileWithoutVaeConfigTakesSdxlDefaults) {
  test::TempDir dir;
  std::filesystem::copy(kSdxl, dir.path(), std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir.path() / "vae" / "config.json");
  const StableDiffusion sd = StableDiffusion::load(kSdxl + ".safetensors", std::nullopt, dir.path().string());
  EXPECT_FLOAT_EQ(sd.vae_config().scaling_factor, 0.13025f);
  EXPECT_EQ(sd.vae_config().sample_size, 1024);
  EXPECT_TRUE(sd.vae_config().force_upcast);
}

// --vae: a VAE folder, a lone VAE file in the original names, or a whole checkpoint's VAE, decoding as
// diffusers does with that VAE (the tiny refiner's, whose decodes the ensemble runs recorded).
TEST(StableDiffusionXl, VaeGivenApartDecodesAsDiffusers) {
  const std::string refiner = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_refiner";
  const test::Fixture fixture("models/tiny_sdxl_refiner_runs.safetensors");
  const std::string name = "euler_discrete_f0.8";
  OwnedTensor latents = fixture.nhwc(name + ".latents");
  for (int64_t i = 0; i < latents.view().numel(); ++i) latents.ptr<float>()[i] /= 0.13025f;
  for (const std::string& path : {refiner + "/vae", refiner + "_vae.safetensors", refiner + ".safetensors"}) {
    SCOPED_TRACE(path);
    StableDiffusion sd = StableDiffusion::load(kSdxl, std::nullopt);
    sd.use_vae(path);
    EXPECT_FALSE(sd.vae_upcast());  // on the CPU everything is f32
    DecodeReport report;
    OwnedTensor image = sd.decode(latents, &report);
    float* v = image.ptr<float>();
    for (int64_t i = 0; i < image.view().numel(); ++i) v[i] = std::clamp(v[i] / 2.0f + 0.5f, 0.0f, 1.0f);
    EXPECT_GE(test::psnr(image, test::as_reference(fixture.nhwc(name + ".image"))), 40.0);
  }
  StableDiffusion sd = StableDiffusion::load(kSdxl, std::nullopt);
  try {
    sd.use_vae(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1/vae");  // SD1.x's scaling factor
    FAIL() << "a VAE of another latent space was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("are not the model's"), std::string::npos) << e.what();
  }
  for (const std::string& not_a_vae : {kSdxl + "/unet", kSdxl + "/text_encoder/model.safetensors"}) {
    try {
      sd.use_vae(not_a_vae);
      FAIL() << not_a_vae << " was taken for a VAE";
    } catch (const Error& e) {
      EXPECT_TRUE(std::string(e.what()).find("not a VAE's") != std::string::npos ||
                  std::string(e.what()).find("holds no VAE") != std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(sd.use_vae(kSdxl + "/no-such-vae"), Error);
}

TEST(StableDiffusionXl, BadSizeConditioningIsAClearError) {
  const StableDiffusion sdxl = StableDiffusion::load(kSdxl, std::nullopt);
  GenerationParams p;
  p.negative_sizes.crop_top_left = std::array<int, 2>{4, 4};  // diffusers would ignore it
  EXPECT_THROW(sdxl.validate(p, false), Error);
  p = GenerationParams{};
  p.negative_sizes.original_size = std::array<int, 2>{64, 64};  // without the negative target size
  EXPECT_THROW(sdxl.validate(p, false), Error);
  p.negative_sizes.target_size = std::array<int, 2>{64, 64};
  EXPECT_NO_THROW(sdxl.validate(p, false));
  p.aesthetic_score = 6.0f;  // the refiner's
  EXPECT_THROW(sdxl.validate(p, false), Error);
  p = GenerationParams{};
  p.sizes.original_size = std::array<int, 2>{0, 64};
  EXPECT_THROW(validate(p, 8), Error);
  p = GenerationParams{};
  p.sizes.crop_top_left = std::array<int, 2>{-1, 0};
  EXPECT_THROW(validate(p, 8), Error);
  // An SD1.x model has no size conditioning.
  const StableDiffusion sd1 = StableDiffusion::load(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1", std::nullopt);
  p = GenerationParams{};
  p.width = p.height = 32;
  p.steps = 1;
  p.sizes.target_size = std::array<int, 2>{32, 32};
  try {
    sd1.generate(p);
    FAIL() << "size conditioning accepted by an SD1.x model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SDXL"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hd
