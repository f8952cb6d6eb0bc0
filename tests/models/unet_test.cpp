// The UNet against diffusers' UNet2DConditionModel on tiny seeded models of both families
// (tests/fixtures/models/tiny_sd{1,2}/unet, f16 weights, recorded by tools/make_fixtures.py --only models).
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
