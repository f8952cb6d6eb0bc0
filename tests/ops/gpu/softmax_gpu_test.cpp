// GPU softmax against the CPU on fresh random rows (short, long, and with large values that would
// overflow without the row maximum), in f32, f16 and bf16.
#include <gtest/gtest.h>

#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(GpuSoftmax, MatchesCpu) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const Shape& shape : {Shape{3, 7}, Shape{2, 8, 77}, Shape{5, 4096}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << shape.to_string());
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const auto x = test::random_tensor(rng, shape, 20.f);  // exp(20 sigma) overflows f32 unshifted
      const auto out = test::poisoned_gpu(shape, t);
      ops::softmax(test::to_gpu(x, t), out);
      OwnedTensor expected(shape, DType::kF32);
      ops::softmax(test::rounded_to(x, t), expected);
      const double tolerance = t == DType::kF32 ? 1e-6 : t == DType::kF16 ? 1e-3 : 8e-3;
      EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance);
    }
  }
}

}  // namespace
}  // namespace hd
