#include "models/weights.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace hd {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WeightReader, MissingAndMisshapenTensorsNameTheTensorAndBothShapes) {
  test::TempDir dir;
  std::vector<uint8_t> bf16(6 * 2);  // bf16 weights load too (converted exactly to f32)
  for (size_t i = 0; i < 6; ++i) {
    const uint16_t b = float_to_bf16(float(i) - 2.5f).bits;
    bf16[2 * i] = uint8_t(b);
    bf16[2 * i + 1] = uint8_t(b >> 8);
  }
  dir.write("m/unet/diffusion_pytorch_model.safetensors",
            serialize_safetensors({{"conv_in.weight", "BF16", {2, 3}, bf16}}));
  const ModelSource m = ModelSource::open((dir.path() / "m").string());
  const WeightReader w(*m.component("unet"), "");
  const OwnedTensor ok = w.load("conv_in.weight", Shape{2, 3});
  EXPECT_EQ(ok.ptr<float>()[5], 2.5f);
  const std::string missing = error_of([&] { w.load("conv_out.weight", Shape{4}); });
  EXPECT_NE(missing.find("unet: missing tensor 'conv_out.weight'"), std::string::npos) << missing;
  const std::string wrong = error_of([&] { w.load("conv_in.weight", Shape{3, 2}); });
  EXPECT_NE(wrong.find("'conv_in.weight' has shape [2, 3], expected [3, 2]"), std::string::npos) << wrong;
}

}  // namespace
}  // namespace hd
