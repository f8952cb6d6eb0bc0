// The UNet against diffusers' UNet2DConditionModel on tiny seeded models of both families
// (tests/fixtures/models/tiny_sd{1,2}/unet, f16 weights, recorded by tools/make_fixtures.py --only models)
// and of SDXL's structure (tiny_sdxl/unet, --only sdxl).
#include "models/unet.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fixture_util.h"
#include "test_util.h"

namespace hd {
namespace {

void check_family(const std::string& family, bool linear_projection, std::vector<int> heads) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family);
  const Unet unet = Unet::load(*model.component("unet"));
  EXPECT_EQ(unet.config().linear_projection, linear_projection);
  EXPECT_EQ(unet.config().heads, heads);
  EXPECT_EQ(unet.config().context_dim, 32);

  const test::Fixture fixture("models/tiny_" + family + "_components.safetensors");
  const OwnedTensor sample = fixture.nhwc("sample");
  const std::vector<float> ctx = fixture.floats("context");
  OwnedTensor context(Shape{2, 77, 32}, DType::kF32);
  std::copy(ctx.begin(), ctx.end(), context.ptr<float>());
  // An integer timestep, and a fractional one as Karras sigmas give.
  for (const auto& [name, timestep] : {std::pair{"unet_t537", 537.0f}, {"unet_t12.25", 12.25f}}) {
    const OwnedTensor out = unet.forward(sample, timestep, context);
    const double err = test::relative_l2(out, test::as_reference(fixture.nhwc(name)));
    std::printf("%s UNet at t=%g: relative L2 error %.3g against diffusers\n", family.c_str(), timestep, err);
    EXPECT_LT(err, 1e-4);
  }
}

TEST(Unet, Sd1MatchesDiffusers) { check_family("sd1", false, {4, 4}); }
TEST(Unet, Sd2MatchesDiffusers) { check_family("sd2", true, {2, 4}); }

// SDXL's structure: a first level without attention, 1/2/3 transformer blocks per attention (3 in the mid
// block), and the text-time embedding of a pooled text embedding and six size ids added to the time
// embedding.
TEST(Unet, SdxlMatchesDiffusers) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl");
  const Unet unet = Unet::load(*model.component("unet"));
  const UnetConfig& c = unet.config();
  EXPECT_EQ(c.block_out_channels, (std::vector<int64_t>{16, 32, 32}));
  EXPECT_EQ(c.cross_attention, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.transformer_depth, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(c.heads, (std::vector<int>{2, 2, 4}));
  EXPECT_TRUE(c.linear_projection);
  EXPECT_EQ(c.context_dim, 24);
  EXPECT_EQ(c.addition_time_embed_dim, 8);
  EXPECT_EQ(c.addition_embed_input_dim, 72);

  const test::Fixture fixture("models/tiny_sdxl_components.safetensors");
  const OwnedTensor sample = fixture.nhwc("sample");
  const OwnedTensor context = fixture.tensor("context");
  const OwnedTensor text_embeds = fixture.tensor("text_embeds");
  const OwnedTensor time_ids = fixture.tensor("time_ids");
  const TextTimeConditioning added{text_embeds, time_ids};
  for (const auto& [name, timestep] : {std::pair{"unet_t537", 537.0f}, {"unet_t12.25", 12.25f}}) {
    const OwnedTensor out = unet.forward(sample, timestep, context, &added);
    const double err = test::relative_l2(out, test::as_reference(fixture.nhwc(name)));
    std::printf("SDXL-like UNet at t=%g: relative L2 error %.3g against diffusers\n", timestep, err);
    EXPECT_LT(err, 1e-4);
  }
  // The conditioning is the model's input: required, and of the widths add_embedding takes.
  EXPECT_THROW(unet.forward(sample, 10.0f, context), Error);
  const OwnedTensor five_ids(Shape{2, 5}, DType::kF32);
  const TextTimeConditioning short_ids{text_embeds, five_ids};
  EXPECT_THROW(unet.forward(sample, 10.0f, context, &short_ids), Error);
}

TEST(Unet, RefusesTextTimeConditioningWithoutAddEmbedding) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd2");
  const Unet unet = Unet::load(*model.component("unet"));
  EXPECT_FALSE(unet.config().text_time());
  const OwnedTensor sample(Shape{1, 4, 4, 4}, DType::kF32), context(Shape{1, 77, 32}, DType::kF32);
  const OwnedTensor text(Shape{1, 24}, DType::kF32), ids(Shape{1, 6}, DType::kF32);
  const TextTimeConditioning added{text, ids};
  EXPECT_THROW(unet.forward(sample, 10.0f, context, &added), Error);
}

TEST(Unet, RejectsBadShapes) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1");
  const Unet unet = Unet::load(*model.component("unet"));
  OwnedTensor odd(Shape{1, 5, 6, 4}, DType::kF32), context(Shape{1, 77, 32}, DType::kF32), wrong_ctx(Shape{1, 77, 7}, DType::kF32);
  EXPECT_THROW(unet.forward(odd, 10.0f, context), Error);  // 5 is not a multiple of 2
  OwnedTensor ok(Shape{1, 4, 6, 4}, DType::kF32);
  EXPECT_THROW(unet.forward(ok, 10.0f, wrong_ctx), Error);
}

}  // namespace
}  // namespace hd
