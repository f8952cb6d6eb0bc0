// GPU nearest 2x upsampling and channel concatenation against the CPU: exact, in every dtype (the
// kernels move bits).
#include <gtest/gtest.h>

#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(GpuLayout, UpsampleAndConcatAreExact) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(t));
    test::Rng rng;
    HD_SEED_TRACE(rng);
    const auto x = test::random_tensor(rng, Shape{2, 5, 3, 12});
    const auto up = test::poisoned_gpu(Shape{2, 10, 6, 12}, t);
    ops::upsample_nearest_2x(test::to_gpu(x, t), up);
    OwnedTensor expected_up(Shape{2, 10, 6, 12}, DType::kF32);
    ops::upsample_nearest_2x(test::rounded_to(x, t), expected_up);
    EXPECT_EQ(test::relative_l2(test::to_host_f32(up), test::reference_of(expected_up)), 0.0);

    const auto b = test::random_tensor(rng, Shape{2, 5, 3, 7});
    const auto cat = test::poisoned_gpu(Shape{2, 5, 3, 19}, t);
    ops::concat_channels(test::to_gpu(x, t), test::to_gpu(b, t), cat);
    OwnedTensor expected_cat(Shape{2, 5, 3, 19}, DType::kF32);
    ops::concat_channels(test::rounded_to(x, t), test::rounded_to(b, t), expected_cat);
    EXPECT_EQ(test::relative_l2(test::to_host_f32(cat), test::reference_of(expected_cat)), 0.0);
  }
}

}  // namespace
}  // namespace hd
