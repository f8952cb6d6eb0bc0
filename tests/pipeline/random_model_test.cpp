// The random-weight models the benchmarks time: the full-size shape lists add up to the published
// parameter counts of SD1.5's and SD2.1's components, and a model written at a reduced width loads
// through the real loaders (every tensor present, every shape as the loaders expect), is recognised as
// what it claims to be, and generates finite pictures.
#include "pipeline/random_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "io/model_source.h"
#include "models/clip_text_encoder.h"
#include "models/unet.h"
#include "models/vae.h"
#include "pipeline/stable_diffusion.h"
#include "test_util.h"
#include "text/clip_tokenizer.h"

namespace hd {
namespace {

int64_t parameters(const TensorShapes& shapes) {
  int64_t n = 0;
  for (const auto& [name, shape] : shapes) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    n += count;
  }
  return n;
}

// Published sizes: UNet2DConditionModel of SD1.5 859,520,964 and of SD2.1 865,910,724 parameters;
// CLIPTextModel ViT-L/14 (SD1.x, SDXL's text_encoder) 123,060,480; SD2.x's text encoder (OpenCLIP
// ViT-H/14, 23 layers as transformers stores it) 340,387,840; AutoencoderKL's decoder 49,490,179 plus
// post_quant_conv's 20; SDXL base's UNet 2,567,463,684 and its text_encoder_2 (CLIPTextModelWithProjection,
// OpenCLIP ViT-bigG/14) 694,659,840.
TEST(RandomModel, FullSizeShapesHaveThePublishedParameterCounts) {
  const RandomModelSpec sd15{RandomModelArch::kSD15}, sd21{RandomModelArch::kSD21}, sdxl{RandomModelArch::kSDXL};
  EXPECT_EQ(parameters(random_unet_shapes(sd15)), 859520964);
  EXPECT_EQ(parameters(random_unet_shapes(sd21)), 865910724);
  EXPECT_EQ(parameters(random_unet_shapes(sdxl)), 2567463684);
  ASSERT_EQ(random_text_encoders(sd15).size(), 1u);
  ASSERT_EQ(random_text_encoders(sd21).size(), 1u);
  ASSERT_EQ(random_text_encoders(sdxl).size(), 2u);
  EXPECT_EQ(parameters(random_text_encoders(sd15)[0].shapes), 123060480);
  EXPECT_EQ(parameters(random_text_encoders(sd21)[0].shapes), 340387840);
  EXPECT_EQ(parameters(random_text_encoders(sdxl)[0].shapes), 123060480);
  EXPECT_EQ(parameters(random_text_encoders(sdxl)[1].shapes), 694659840);
  EXPECT_EQ(random_text_encoders(sdxl)[1].name, "text_encoder_2");
  EXPECT_EQ(parameters(random_vae_decoder_shapes(sd15)), 49490179 + 20);
}

TEST(RandomModel, ReducedWidthModelsLoadAndGenerate) {
  for (const RandomModelArch arch : {RandomModelArch::kSD15, RandomModelArch::kSD21}) {
    SCOPED_TRACE(std::string(random_model_arch_name(arch)));
    test::TempDir dir;
    const RandomModelSpec spec{arch, 8, 8};
    const std::string folder = (dir.path() / "model").string();
    const int64_t params = write_random_model(spec, folder);
    EXPECT_EQ(params, parameters(random_unet_shapes(spec)) + parameters(random_vae_decoder_shapes(spec)) +
                          parameters(random_text_encoders(spec)[0].shapes));
    EXPECT_EQ(write_random_model(spec, folder), params);  // found in place, not written again

    const ModelSource source = ModelSource::open(folder);
    const UnetConfig unet = UnetConfig::detect(*source.component("unet"));
    EXPECT_EQ(unet.block_out_channels, (std::vector<int64_t>{40, 80, 160, 160}));
    EXPECT_EQ(unet.cross_attention, (std::vector<bool>{true, true, true, false}));
    EXPECT_EQ(unet.layers_per_block, 2);
    const bool sd21 = arch == RandomModelArch::kSD21;
    EXPECT_EQ(unet.context_dim, sd21 ? 128 : 96);
    EXPECT_EQ(unet.linear_projection, sd21);
    EXPECT_EQ(unet.heads, sd21 ? (std::vector<int>{5, 10, 20, 20}) : (std::vector<int>{8, 8, 8, 8}));
    const ClipTextConfig text = ClipTextConfig::detect(*source.component("text_encoder"));
    EXPECT_EQ(text.layers, sd21 ? 23 : 12);
    EXPECT_EQ(text.quick_gelu, !sd21);
    const VaeConfig vae = VaeConfig::detect(*source.component("vae"));
    EXPECT_EQ(vae.block_out_channels, (std::vector<int64_t>{16, 32, 64, 64}));
    EXPECT_FALSE(vae.has_encoder);

    const StableDiffusion sd = StableDiffusion::load(folder, std::nullopt);
    EXPECT_EQ(sd.description(), sd21 ? "unknown (v_prediction)" : "unknown (epsilon)");  // widths of no real family
    EXPECT_EQ(sd.default_image_size(), 512);
    GenerationParams p;
    p.prompt = "a red circle";
    p.steps = 2;
    p.width = p.height = 64;
    p.time_each_step = true;
    const GenerationResult r = sd.generate(p);
    ASSERT_EQ(r.image.view().shape, (Shape{1, 64, 64, 3}));
    const float* px = r.image.ptr<float>();
    for (int64_t i = 0; i < r.image.view().numel(); ++i) ASSERT_TRUE(std::isfinite(px[i])) << i;
    // The stage times: two steps timed, each within the loop, the loop and the other stages within the total.
    ASSERT_EQ(r.times.steps.size(), 2u);
    EXPECT_GT(r.times.steps[0], 0.0);
    EXPECT_LE(r.times.steps[0] + r.times.steps[1], r.times.denoising);
    EXPECT_LE(r.times.text_encoding + r.times.denoising + r.times.decoding, r.times.total);
  }
}

// SDXL's random model loads through the real loaders with the structure SDXL has (levels, attention
// depths, text-time conditioning, two text encoders, the second with its projection and "!" padding)
// and generates a finite picture.
TEST(RandomModel, ReducedWidthSdxlLoadsAndGenerates) {
  test::TempDir dir;
  const RandomModelSpec spec{RandomModelArch::kSDXL, 8, 8};
  const std::string folder = (dir.path() / "model").string();
  const int64_t params = write_random_model(spec, folder);
  EXPECT_EQ(params, parameters(random_unet_shapes(spec)) + parameters(random_vae_decoder_shapes(spec)) +
                        parameters(random_text_encoders(spec)[0].shapes) + parameters(random_text_encoders(spec)[1].shapes));
  const ModelSource source = ModelSource::open(folder);
  const Unet unet = Unet::load(*source.component("unet"));
  const UnetConfig& c = unet.config();
  EXPECT_EQ(c.block_out_channels, (std::vector<int64_t>{40, 80, 160}));
  EXPECT_EQ(c.cross_attention, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.transformer_depth, (std::vector<int>{0, 2, 10}));
  EXPECT_EQ(c.heads, (std::vector<int>{5, 10, 20}));
  EXPECT_EQ(c.context_dim, 256);
  EXPECT_EQ(c.addition_time_embed_dim, 32);
  EXPECT_EQ(c.addition_embed_input_dim, 160 + 6 * 32);
  EXPECT_EQ(c.sample_size, 128);
  const VaeConfig vae = VaeConfig::detect(*source.component("vae"));
  EXPECT_FLOAT_EQ(vae.scaling_factor, 0.13025f);
  EXPECT_EQ(vae.sample_size, 1024);
  const ClipTextConfig second = ClipTextConfig::detect(*source.component("text_encoder_2"));
  EXPECT_EQ(second.layers, 32);
  EXPECT_EQ(second.projection_dim, 160);
  EXPECT_FALSE(second.quick_gelu);
  EXPECT_EQ(ClipTokenizer::load(folder + "/tokenizer_2").pad_id(), 0);  // "!"

  const StableDiffusion sd = StableDiffusion::load(folder, std::nullopt);
  EXPECT_EQ(sd.family(), ModelFamily::kSDXL);
  GenerationParams p;
  p.prompt = "a red circle";
  p.steps = 1;
  p.width = p.height = 64;
  const GenerationResult r = sd.generate(p);
  ASSERT_EQ(r.image.view().shape, (Shape{1, 64, 64, 3}));
  const float* px = r.image.ptr<float>();
  for (int64_t i = 0; i < r.image.view().numel(); ++i) ASSERT_TRUE(std::isfinite(px[i])) << i;
}

TEST(RandomModel, ArchitectureNamesAreChecked) {
  EXPECT_EQ(parse_random_model_arch("sd15"), RandomModelArch::kSD15);
  EXPECT_EQ(parse_random_model_arch("sd21"), RandomModelArch::kSD21);
  EXPECT_EQ(parse_random_model_arch("sdxl"), RandomModelArch::kSDXL);
  try {
    parse_random_model_arch("sd3");
    FAIL() << "sd3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sd15, sd21 or sdxl"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hd
