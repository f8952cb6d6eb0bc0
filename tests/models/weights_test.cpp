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

// LoRA layers are added as the weights load: W + Σ (user scale · alpha / rank) · up · down, a matrix
// as it is and a 3x3 convolution kernel before its relayout, two LoRAs on one weight in order, a layer
// without alpha at scale 1 · user scale; each against the sum written out here in double precision.
TEST(WeightReader, AddsLoraLayersAsItLoads) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto f32_values = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = rng.normal(0.0f, 1.0f);
    return v;
  };
  const int64_t out = 3, in = 5, c_out = 2, c_in = 3, k = 3;
  const std::vector<float> a = f32_values(out * in), conv = f32_values(c_out * c_in * k * k);
  // First LoRA: "a" at rank 4 with alpha 2, the kernel at rank 2 without alpha; second: "a" at rank 1,
  // alpha 3.
  const std::vector<float> down1 = f32_values(4 * in), up1 = f32_values(out * 4);
  const std::vector<float> conv_down = f32_values(2 * c_in * k * k), conv_up = f32_values(c_out * 2);
  const std::vector<float> down2 = f32_values(in), up2 = f32_values(out);
  test::TempDir dir;
  dir.write("m/unet/diffusion_pytorch_model.safetensors",
            serialize_safetensors({{"a.weight", "F32", {out, in}, test::f32_bytes(a)},
                                   {"c.weight", "F32", {c_out, c_in, k, k}, test::f32_bytes(conv)}}));
  const auto first =
      dir.write("first.safetensors",
                serialize_safetensors(
                    {{"lora_unet_a.alpha", "F32", {}, test::f32_bytes({2.0f})},
                     {"lora_unet_a.lora_down.weight", "F32", {4, in}, test::f32_bytes(down1)},
                     {"lora_unet_a.lora_up.weight", "F32", {out, 4}, test::f32_bytes(up1)},
                     {"lora_unet_c.lora_down.weight", "F32", {2, c_in, k, k}, test::f32_bytes(conv_down)},
                     {"lora_unet_c.lora_up.weight", "F32", {c_out, 2, 1, 1}, test::f32_bytes(conv_up)}}));
  const auto second =
      dir.write("second.safetensors",
                serialize_safetensors({{"unet.a.alpha", "F32", {1}, test::f32_bytes({3.0f})},
                                       {"unet.a.lora_A.weight", "F32", {1, in}, test::f32_bytes(down2)},
                                       {"unet.a.lora_B.weight", "F32", {out, 1}, test::f32_bytes(up2)}}));
  ModelSource m = ModelSource::open((dir.path() / "m").string());
  m.add_lora({first.string(), 0.5f});
  m.add_lora({second.string(), -2.0f});
  ASSERT_EQ(m.loras().size(), 2u);
  const WeightReader w(*m.component("unet"), "");

  const OwnedTensor merged_a = w.load("a.weight", Shape{out, in});
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double expected = a[size_t(o * in + i)];
      for (int64_t r = 0; r < 4; ++r)
        expected += 0.5 * (2.0 / 4.0) * up1[size_t(o * 4 + r)] * down1[size_t(r * in + i)];
      expected += -2.0 * (3.0 / 1.0) * up2[size_t(o)] * down2[size_t(i)];
      EXPECT_NEAR(merged_a.ptr<float>()[o * in + i], expected, 1e-5) << o << "," << i;
    }
  }
  const OwnedTensor merged_c = w.load_conv("c.weight", c_out, c_in, k, k);  // [Cout, kh, kw, Cin]
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t c = 0; c < c_in; ++c)
      for (int64_t y = 0; y < k; ++y)
        for (int64_t x = 0; x < k; ++x) {
          const int64_t at = ((c * k + y) * k + x);
          double expected = conv[size_t(o * c_in * k * k + at)];
          for (int64_t r = 0; r < 2; ++r)
            expected += 0.5 * conv_up[size_t(o * 2 + r)] * conv_down[size_t(r * c_in * k * k + at)];
          EXPECT_NEAR(merged_c.ptr<float>()[((o * k + y) * k + x) * c_in + c], expected, 1e-5);
        }
}

}  // namespace
}  // namespace hd
