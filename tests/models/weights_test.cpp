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

// Loading goes from the mapped file straight into the compute dtype and layout, in parallel chunks:
// f16 weights at an offset a file need not align, a convolution kernel re-laid-out to [Cout, kh, kw, Cin],
// and a tensor long enough to be split among the pool's threads, each against the element-by-element
// conversion and relayout.
TEST(WeightReader, ConvertsAndRelaysStraightFromTheFile) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto f16_bytes = [&](int64_t n, std::vector<float>* values) {
    std::vector<uint8_t> bytes(size_t(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
      const Half h = float_to_half(rng.normal(0.0f, 1.0f));
      values->push_back(half_to_float(h));
      bytes[size_t(2 * i)] = uint8_t(h.bits);
      bytes[size_t(2 * i + 1)] = uint8_t(h.bits >> 8);
    }
    return bytes;
  };
  const int64_t out = 7, in = 5, kh = 3, kw = 2, long_count = 600'001;
  std::vector<float> kernel, long_values, odd;
  test::TempDir dir;
  // "a" sorts first and holds one element, so the kernel after it starts 2 bytes into the data.
  dir.write("m/unet/diffusion_pytorch_model.safetensors",
            serialize_safetensors({{"a", "F16", {1}, f16_bytes(1, &odd)},
                                   {"conv.weight", "F16", {out, in, kh, kw}, f16_bytes(out * in * kh * kw, &kernel)},
                                   {"long", "F16", {long_count}, f16_bytes(long_count, &long_values)}}));
  const ModelSource m = ModelSource::open((dir.path() / "m").string());
  const WeightReader w(*m.component("unet"), "");
  const OwnedTensor nhwc = w.load_conv("conv.weight", out, in, kh, kw);
  ASSERT_EQ(nhwc.view().shape, (Shape{out, kh, kw, in}));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < in; ++c)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          ASSERT_EQ(nhwc.ptr<float>()[((o * kh + y) * kw + x) * in + c], kernel[size_t(((o * in + c) * kh + y) * kw + x)]);
  const OwnedTensor flat = w.load("long", Shape{long_count});
  for (int64_t i = 0; i < long_count; ++i) ASSERT_EQ(flat.ptr<float>()[i], long_values[size_t(i)]) << i;
}

// A held component (the caller's memory, already in the engine's layout) is read in place: the loaded
// tensors are views of it, a kernel's shape is reported as diffusers holds it, and what cannot be used
// as it is (another dtype or device than the placement's, a repeated name, a strided view) is refused
// with the tensor named.
TEST(WeightReader, HeldComponentIsReadInPlace) {
  OwnedTensor kernel(Shape{4, 3, 3, 2}, DType::kF32), bias(Shape{4}, DType::kF32),
      half(Shape{4}, DType::kF16);
  const ModelComponent held = held_component(
      "unet", {{"conv.weight", kernel.view()}, {"conv.bias", bias.view()}, {"norm.weight", half.view()}},
      std::nullopt);
  const WeightReader w(held, "");
  EXPECT_EQ(w.shape("conv.weight"), (std::vector<int64_t>{4, 2, 3, 3}));
  const OwnedTensor k = w.load_conv("conv.weight", 4, 2, 3, 3);
  EXPECT_EQ(k.view().data, kernel.view().data);
  EXPECT_EQ(k.view().shape, (Shape{4, 3, 3, 2}));
  EXPECT_EQ(w.load("conv.bias", Shape{4}).view().data, bias.view().data);
  const std::string wrong = error_of([&] { w.load("conv.bias", Shape{2, 2}); });
  EXPECT_NE(wrong.find("'conv.bias' has shape [4], expected [2, 2]"), std::string::npos) << wrong;
  const std::string dtype = error_of([&] { w.load("norm.weight", Shape{4}); });
  EXPECT_NE(dtype.find("'norm.weight' is f16[4] on cpu but the model computes in cpu f32"), std::string::npos)
      << dtype;

  const std::string twice = error_of([&] {
    held_component("vae", {{"a", bias.view()}, {"a", bias.view()}}, std::nullopt);
  });
  EXPECT_NE(twice.find("vae: tensor 'a' given twice"), std::string::npos) << twice;
  const std::string strided = error_of([&] {
    held_component("vae", {{"b", kernel.view().slice(1, 0, 2)}}, std::nullopt);
  });
  EXPECT_NE(strided.find("vae: tensor 'b'"), std::string::npos) << strided;
  EXPECT_NE(strided.find("is not dense"), std::string::npos) << strided;
}

}  // namespace
}  // namespace hd
