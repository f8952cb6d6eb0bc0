#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hd
