#include <gtest/gtest.h>

#include <utility>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(ConvertOp, CpuMatchesScalarConversions) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto src = test::random_tensor(rng, Shape{3, 100}, 50.0f);
  OwnedTensor half(Shape{3, 100}, DType::kF16), bf(Shape{3, 100}, DType::kBF16);
  ops::convert(src, half);
  ops::convert(half, bf);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(half.ptr<Half>()[i].bits, float_to_half(src.ptr<float>()[i]).bits);
    ASSERT_EQ(bf.ptr<BFloat16>()[i].bits, float_to_bf16(half_to_float(half.ptr<Half>()[i])).bits);
  }
  OwnedTensor wrong(Shape{300}, DType::kF16);
  EXPECT_THROW(ops::convert(src, wrong), Error);
  OwnedTensor ints(Shape{3, 100}, DType::kI32);
  EXPECT_THROW(ops::convert(src, ints), Error);
}

// Copies between views on the host: each element lands where its index says, whatever the strides;
// views without a dense last dimension, or overlapping themselves, are refused.
TEST(CopyOp, ViewsCopyElementByIndex) {
  OwnedTensor x(Shape{2, 4, 3, 2}, DType::kF32);
  for (int64_t i = 0; i < x.view().numel(); ++i) x.ptr<float>()[i] = float(i);
  OwnedTensor padded(Shape{2, 6, 5, 2}, DType::kF32);
  ops::fill_zeros(padded);
  ops::copy(x.view().slice(1, 1, 2), padded.view().slice(1, 2, 2).slice(2, 1, 3));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t k = 0; k < 2; ++k) {
          const bool inside = y >= 2 && y < 4 && c >= 1 && c < 4;
          const float expected = inside ? float(((n * 4 + y - 1) * 3 + c - 1) * 2 + k) : 0.f;
          EXPECT_EQ(padded.ptr<float>()[((n * 6 + y) * 5 + c) * 2 + k], expected) << n << " " << y << " " << c << " " << k;
        }
  Tensor channels_strided = x.view().reshape(Shape{24, 2});
  std::swap(channels_strided.shape[0], channels_strided.shape[1]);
  std::swap(channels_strided.strides[0], channels_strided.strides[1]);
  OwnedTensor out(Shape{2, 24}, DType::kF32);
  test::expect_error_containing([&] { ops::copy(channels_strided, out); }, "a dense last dimension");
  Tensor overlapping = out.view().slice(1, 0, 12);
  overlapping.shape[1] = 8;
  overlapping.strides[0] = 4;
  test::expect_error_containing([&] { ops::copy(x.view().reshape(Shape{6, 8}).slice(0, 0, 2), overlapping); },
                                "overlaps itself");
}

}  // namespace
}  // namespace hd
