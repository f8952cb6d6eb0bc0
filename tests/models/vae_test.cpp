// The VAE against diffusers' AutoencoderKL on a tiny seeded model (tests/fixtures/models/tiny_sd1/vae,
// f16 weights, recorded by tools/make_fixtures.py --only models). Fixtures are NCHW, the engine NHWC.
#include "models/vae.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fixture_util.h"
#include "test_util.h"

namespace hd {
namespace {

OwnedTensor nchw_to_nhwc(const std::vector<float>& v, const std::vector<int64_t>& s) {
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  OwnedTensor t(Shape{n, h, w, c}, DType::kF32);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) t.ptr<float>()[((b * h + y) * w + x) * c + ch] = v[size_t(((b * c + ch) * h + y) * w + x)];
  return t;
}

std::vector<double> as_reference(const OwnedTensor& t) {
  const float* p = t.ptr<float>();
  return std::vector<double>(p, p + t.view().numel());
}

class TinyVae : public ::testing::Test {
 protected:
  TinyVae()
      : model_(ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1")),
        vae_(Vae::load(*model_.component("vae"))),
        fixture_("models/tiny_sd1_components.safetensors") {}

  OwnedTensor fixture_nhwc(const std::string& name) const {
    return nchw_to_nhwc(fixture_.floats(name), fixture_.shape(name));
  }

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

TEST_F(TinyVae, DecodeMatchesDiffusers) {
  const OwnedTensor latents = fixture_nhwc("latents");
  const OwnedTensor image = vae_.decode(latents);
  const OwnedTensor expected = fixture_nhwc("decoded");
  ASSERT_EQ(image.view().shape, expected.view().shape);
  const double err = test::relative_l2(image, as_reference(expected));
  std::printf("VAE decode: relative L2 error %.3g against diffusers\n", err);
  EXPECT_LT(err, 1e-4);
}

TEST_F(TinyVae, EncodeMatchesDiffusers) {
  const OwnedTensor image = fixture_nhwc("image");
  const OwnedTensor moments = vae_.encode(image);
  const OwnedTensor expected = fixture_nhwc("moments");
  ASSERT_EQ(moments.view().shape, expected.view().shape);
  const double err = test::relative_l2(moments, as_reference(expected));
  std::printf("VAE encode: relative L2 error %.3g against diffusers\n", err);
  EXPECT_LT(err, 1e-4);
}

TEST_F(TinyVae, WrongLatentChannelsAreAnError) {
  OwnedTensor wrong(Shape{1, 4, 4, 3}, DType::kF32);
  EXPECT_THROW(vae_.decode(wrong), Error);
}

}  // namespace
}  // namespace hd
