#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

// Direct convolution in double, NHWC input, [Cout, kh, kw, Cin] weight.
std::vector<double> conv_reference(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                                   int stride, int pad, const Shape& out) {
  const float* xp = x.ptr<float>();
  const float* wp = w.ptr<float>();
  const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), cin = x.dim(3);
  const int64_t cout = w.dim(0), kh = w.dim(1), kw = w.dim(2), ho = out[1], wo = out[2];
  std::vector<double> y(size_t(out.numel()));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox)
        for (int64_t co = 0; co < cout; ++co) {
          double acc = bias ? bias->ptr<float>()[co] : 0.0;
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
              for (int64_t ci = 0; ci < cin; ++ci)
                acc += double(xp[((b * h + iy) * wd + ix) * cin + ci]) * wp[((co * kh + ky) * kw + kx) * cin + ci];
            }
          const int64_t i = ((b * ho + oy) * wo + ox) * cout + co;
          if (residual) acc += residual->ptr<float>()[i];
          y[size_t(i)] = acc;
        }
  return y;
}

struct ConvCase {
  int64_t n, h, w, cin, cout, kh, kw;
  int stride, pad;
  bool bias, residual;
  int extra_end = 0;
};

TEST(Conv2d, MatchesDirectConvolutionOnRandomData) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const ConvCase cases[] = {
      {2, 9, 7, 5, 6, 3, 3, 1, 1, true, false},   // the UNet's 3x3 "same" conv
      {1, 8, 8, 4, 3, 3, 3, 2, 1, true, true},    // stride-2 downsample, with residual
      {2, 5, 6, 7, 9, 1, 1, 1, 0, true, true},    // 1x1 projection: the pure GEMM path
      {1, 6, 5, 3, 2, 2, 3, 1, 2, false, false},  // uneven kernel, wider padding
      {1, 7, 7, 2, 4, 5, 5, 3, 0, false, true},   // large kernel, stride 3
      {3, 4, 4, 8, 8, 1, 1, 2, 0, false, false},  // strided 1x1
      {2, 8, 6, 5, 4, 3, 3, 2, 0, true, false, 1},  // the VAE encoder's downsample: pad (0, 1, 0, 1), stride 2
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "case " << c.h << "x" << c.w << " k" << c.kh << "x" << c.kw << " s" << c.stride);
    const auto x = test::random_tensor(rng, Shape{c.n, c.h, c.w, c.cin});
    const auto w = test::random_tensor(rng, Shape{c.cout, c.kh, c.kw, c.cin}, 0.3f);
    const auto b = test::random_tensor(rng, Shape{c.cout});
    const ops::Conv2dParams p{c.stride, c.pad, c.extra_end};
    const Shape out_shape = ops::conv2d_output_shape(x.view().shape, w.view().shape, p);
    const auto r = test::random_tensor(rng, out_shape);
    auto out = test::poisoned_tensor(out_shape);
    ops::conv2d(x, w, c.bias ? &b.view() : nullptr, c.residual ? &r.view() : nullptr, p, out);
    const auto ref = conv_reference(x, w, c.bias ? &b.view() : nullptr, c.residual ? &r.view() : nullptr, c.stride,
                                    c.pad, out_shape);
    EXPECT_LT(test::relative_l2(out, ref), 1e-5);
  }
}

TEST(Conv2d, ResidualMayAliasTheOutput) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto x = test::random_tensor(rng, Shape{1, 6, 6, 3});
  const auto w = test::random_tensor(rng, Shape{4, 3, 3, 3});
  auto acc = test::random_tensor(rng, Shape{1, 6, 6, 4});
  const auto ref = conv_reference(x, w, nullptr, &acc.view(), 1, 1, acc.view().shape);
  ops::conv2d(x, w, nullptr, &acc.view(), {1, 1}, acc);
  EXPECT_LT(test::relative_l2(acc, ref), 1e-5);
}

TEST(Conv2d, LargeInputUsesSeveralIm2colChunks) {
  // 32 MiB of im2col scratch holds ~29k rows of a 3x3x32 kernel; 2x128x128 pixels need two chunks.
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto x = test::random_tensor(rng, Shape{2, 128, 128, 32});
  const auto w = test::random_tensor(rng, Shape{4, 3, 3, 32}, 0.2f);
  auto out = test::poisoned_tensor(Shape{2, 128, 128, 4});
  ops::conv2d(x, w, nullptr, nullptr, {1, 1}, out);
  EXPECT_LT(test::relative_l2(out, conv_reference(x, w, nullptr, nullptr, 1, 1, out.view().shape)), 1e-5);
}

TEST(Conv2d, ShapeErrorsNameBothShapes) {
  OwnedTensor x(Shape{1, 4, 4, 3}, DType::kF32), w(Shape{8, 3, 3, 5}, DType::kF32), out(Shape{1, 4, 4, 8}, DType::kF32);
  try {
    ops::conv2d(x, w, nullptr, nullptr, {1, 1}, out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[8, 3, 3, 5]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[1, 4, 4, 3]"), std::string::npos) << e.what();
  }
  OwnedTensor w3(Shape{8, 3, 3, 3}, DType::kF32), wrong(Shape{1, 2, 2, 8}, DType::kF32);
  EXPECT_THROW(ops::conv2d(x, w3, nullptr, nullptr, {1, 1}, wrong), Error);
  OwnedTensor big_kernel(Shape{8, 7, 7, 3}, DType::kF32);
  EXPECT_THROW(ops::conv2d_output_shape(x.view().shape, big_kernel.view().shape, {1, 1}), Error);
  EXPECT_THROW(ops::conv2d_output_shape(x.view().shape, w3.view().shape, {0, 1}), Error);
  OwnedTensor half(Shape{1, 4, 4, 3}, DType::kF16);
  EXPECT_THROW(ops::conv2d(half, w3, nullptr, nullptr, {1, 1}, out), Error);
}

// x [N, H, W, C] upsampled 2x (nearest) by indexing, as the reference's input.
OwnedTensor upsampled_by_hand(const Tensor& x) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  OwnedTensor up(Shape{n, 2 * h, 2 * w, c}, DType::kF32);
  float* out = up.view().ptr<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < 2 * h; ++y)
      for (int64_t xx = 0; xx < 2 * w; ++xx)
        for (int64_t ch = 0; ch < c; ++ch) *out++ = x.ptr<float>()[((b * h + y / 2) * w + xx / 2) * c + ch];
  return up;
}

// upsample_conv2d: the 3x3 convolution (padding 1) of the upsampled image, bias added; and the four
// phases' 2x2 kernels (upsample_conv2d_phases), each run as a convolution of the image itself padded by
// one all round, give the same output pixels (2y + dy, 2x + dx): the weight transform the GPU computes
// from, checked here without a GPU. Odd sizes, so that the phases' edges differ.
TEST(UpsampleConv2d, IsTheConvolutionOfTheUpsampledImageAndItsPhasesGiveTheSame) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t n = 2, h = 3, w = 5, cin = 4, cout = 6;
  const auto x = test::random_tensor(rng, Shape{n, h, w, cin});
  const auto weight = test::random_tensor(rng, Shape{cout, 3, 3, cin}, 0.3f);
  const auto b = test::random_tensor(rng, Shape{cout});
  const Shape out_shape{n, 2 * h, 2 * w, cout};
  const OwnedTensor up = upsampled_by_hand(x);
  const std::vector<double> ref = conv_reference(up, weight, &b.view(), nullptr, 1, 1, out_shape);
  auto out = test::poisoned_tensor(out_shape);
  ops::upsample_conv2d(x, weight, nullptr, &b.view(), out);
  EXPECT_LT(test::relative_l2(out, ref), 1e-5);

  auto phases = test::poisoned_tensor(Shape{2, 2, cout, 2, 2, cin});
  ops::upsample_conv2d_phases(weight, phases);
  auto from_phases = test::poisoned_tensor(out_shape);
  float* const assembled = from_phases.view().ptr<float>();
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const Tensor kernel = Tensor::contiguous(phases.view().ptr<float>() + (dy * 2 + dx) * cout * 4 * cin,
                                               DType::kF32, Shape{cout, 2, 2, cin});
      OwnedTensor padded(Shape{n, h + 1, w + 1, cout}, DType::kF32);  // rows y - 1 + r for r = 0, 1
      ops::conv2d(x, kernel, &b.view(), nullptr, {1, 1}, padded);
      // Phase (dy, dx) pads 1 - dy rows above: its pixel (y, x) is row y + dy of the all-round padding's.
      for (int64_t bi = 0; bi < n; ++bi)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t xx = 0; xx < w; ++xx)
            for (int64_t co = 0; co < cout; ++co)
              assembled[((bi * 2 * h + 2 * y + dy) * 2 * w + 2 * xx + dx) * cout + co] =
                  padded.view().ptr<float>()[((bi * (h + 1) + y + dy) * (w + 1) + xx + dx) * cout + co];
    }
  EXPECT_LT(test::relative_l2(from_phases, ref), 1e-5);
}

TEST(UpsampleConv2d, RefusesOtherKernelsAndShapes) {
  OwnedTensor x(Shape{1, 4, 4, 3}, DType::kF32), w(Shape{8, 3, 3, 3}, DType::kF32);
  OwnedTensor out(Shape{1, 8, 8, 8}, DType::kF32);
  OwnedTensor five(Shape{8, 5, 5, 3}, DType::kF32);
  test::expect_error_containing([&] { ops::upsample_conv2d(x, five, nullptr, nullptr, out); }, "weight");
  OwnedTensor same_size(Shape{1, 4, 4, 8}, DType::kF32);
  test::expect_error_containing([&] { ops::upsample_conv2d(x, w, nullptr, nullptr, same_size); }, "output");
  OwnedTensor wrong_phases(Shape{2, 2, 8, 3, 3, 3}, DType::kF32);
  test::expect_error_containing([&] { ops::upsample_conv2d(x, w, &wrong_phases.view(), nullptr, out); },
                                "phases");
  test::expect_error_containing([&] { ops::upsample_conv2d_phases(five, wrong_phases); }, "weight");
}

}  // namespace
}  // namespace hd
