// The VAE against diffusers' AutoencoderKL on a tiny seeded model (tests/fixtures/models/tiny_sd1/vae,
// f16 weights, recorded by tools/make_fixtures.py --only models). Fixtures are NCHW, the engine NHWC. The
// decode split into strips against the whole decode.
#include "models/vae.h"

#include <gtest/gtest.h>

#include "comm/strip_ranks.h"
#include "core/error.h"
#include "fixture_util.h"
#include "test_util.h"

namespace hd {
namespace {

class TinyVae : public ::testing::Test {
 protected:
  TinyVae()
      : model_(ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1")),
        vae_(Vae::load(*model_.component("vae"))),
        fixture_("models/tiny_sd1_components.safetensors") {}

  ModelSource model_;
  Vae vae_;
  test::Fixture fixture_;
};

TEST_F(TinyVae, ConfigIsDetectedFromWeightsAndConfigJson) {
  EXPECT_EQ(vae_.config().block_out_channels, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(vae_.config().layers_per_block, 1);
  EXPECT_EQ(vae_.config().norm_groups, 16);
  EXPECT_FLOAT_EQ(vae_.config().scaling_factor, 0.18215f);
  EXPECT_TRUE(vae_.config().mid_attention);
}

// force_upcast: diffusers' default (true) when config.json does not say; what it says otherwise.
TEST(VaeConfig, ForceUpcastComesFromConfigJson) {
  ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1");
  ModelComponent vae = *model.component("vae");
  EXPECT_TRUE(VaeConfig::detect(vae).force_upcast);  // the tiny SD1.x config says so
  vae.config_json.reset();
  EXPECT_TRUE(VaeConfig::detect(vae).force_upcast);  // diffusers' default
  vae.config_json = R"({"force_upcast": false, "scaling_factor": 0.13025})";
  EXPECT_FALSE(VaeConfig::detect(vae).force_upcast);
  EXPECT_FLOAT_EQ(VaeConfig::detect(vae).scaling_factor, 0.13025f);
  vae.config_json = R"({"force_upcast": "no"})";
  EXPECT_THROW(VaeConfig::detect(vae), Error);
}

TEST_F(TinyVae, DecodeMatchesDiffusers) {
  const OwnedTensor latents = fixture_.nhwc("latents");
  const OwnedTensor image = vae_.decode(latents);
  const OwnedTensor expected = fixture_.nhwc("decoded");
  ASSERT_EQ(image.view().shape, expected.view().shape);
  const double err = test::relative_l2(image, test::as_reference(expected));
  std::printf("VAE decode: relative L2 error %.3g against diffusers\n", err);
  EXPECT_LT(err, 1e-4);
}

// The decode split into strips of latent rows (ranks of an in-process group): each strip's image rows
// equal the same rows of the whole decode, at 2 and 4 strips, for a batch of two (the strips' halos,
// GroupNorm statistics and the mid-block attention's keys and values exchanged).
TEST_F(TinyVae, ImageSplitDecodeGivesTheWholeDecodesRows) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t n = 2, h = 8, w = 6, scale = 2;  // the tiny VAE has two levels: 2 pixels per latent
  const OwnedTensor latents = test::random_tensor(rng, Shape{n, h, w, 4});
  const OwnedTensor whole = vae_.decode(latents);
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(testing::Message() << ranks << " strips");
    const int64_t rows = h / ranks;
    test::on_strips(ranks, [&](int rank, comm::ImageSplit& split) {
      const OwnedTensor part = vae_.decode(test::rows_of(latents, rank * rows, rows), &split);
      const OwnedTensor expected = test::rows_of(whole, rank * rows * scale, rows * scale);
      ASSERT_EQ(part.view().shape, (Shape{n, rows * scale, w * scale, 3}));
      const double err = test::relative_l2(part, test::as_reference(expected));
      std::printf("VAE decode, strip %d of %d: relative L2 %.3g against the whole decode\n", rank, ranks, err);
      // f32 rounding only: the strips' GroupNorm statistics are combined by Chan's formula, the whole
      // decode's summed at once (measured 0.9e-6 to 1.1e-6 on the development machine).
      EXPECT_LE(err, 3e-6);
    });
  }
}

TEST_F(TinyVae, EncodeMatchesDiffusers) {
  const OwnedTensor image = fixture_.nhwc("image");
  const OwnedTensor moments = vae_.encode(image);
  const OwnedTensor expected = fixture_.nhwc("moments");
  ASSERT_EQ(moments.view().shape, expected.view().shape);
  const double err = test::relative_l2(moments, test::as_reference(expected));
  std::printf("VAE encode: relative L2 error %.3g against diffusers\n", err);
  EXPECT_LT(err, 1e-4);
}

TEST_F(TinyVae, WrongLatentChannelsAreAnError) {
  OwnedTensor wrong(Shape{1, 4, 4, 3}, DType::kF32);
  EXPECT_THROW(vae_.decode(wrong), Error);
}

}  // namespace
}  // namespace hd
