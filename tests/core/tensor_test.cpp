#include "core/tensor.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"

namespace hd {
namespace {

TEST(Tensor, ContiguousStridesAndViews) {
  OwnedTensor t(Shape{2, 3, 4}, DType::kF32);
  const Tensor& v = t.view();
  EXPECT_EQ(v.strides, (Shape{12, 4, 1}));
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.nbytes(), 96u);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 64, 0u);

  const Tensor s = v.slice(1, 1, 2);  // [2, 2, 4], a view with a gap between samples
  EXPECT_EQ(s.shape, (Shape{2, 2, 4}));
  EXPECT_EQ(static_cast<float*>(s.data), t.ptr<float>() + 4);
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_TRUE(v.slice(0, 1, 1).is_contiguous());
  EXPECT_THROW(s.reshape(Shape{16}), Error);
  EXPECT_EQ(v.reshape(Shape{6, 4}).shape, (Shape{6, 4}));
  EXPECT_THROW(v.reshape(Shape{5, 5}), Error);
  EXPECT_THROW(v.slice(2, 3, 2), Error);
  EXPECT_EQ(v.describe(), "f32[2, 3, 4] on cpu");
}

TEST(Tensor, TypedAccessChecksTheDtype) {
  OwnedTensor t(Shape{4}, DType::kF16);
  EXPECT_NO_THROW(t.ptr<Half>());
  EXPECT_THROW(t.ptr<float>(), Error);
}

TEST(Tensor, ShapeOverflowAndNegativeDimsAreErrors) {
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THROW((Shape{big, 3}).numel(), Error);
  EXPECT_THROW((Shape{4, -1}).numel(), Error);
  EXPECT_THROW((Shape{1, 2, 3, 4, 5, 6, 7}), Error);
  EXPECT_EQ((Shape{0, big, big}).numel(), 0);
}

TEST(Tensor, ImpossibleHostAllocationIsAnOutOfMemoryError) {
  try {
    OwnedTensor t(Shape{int64_t(1) << 60}, DType::kF32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
  }
}

}  // namespace
}  // namespace hd
