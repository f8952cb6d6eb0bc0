// The GPU gradients of GroupNorm(+SiLU), LayerNorm and GEGLU against the CPU's (ops/cpu/*_backward.cpp,
// themselves checked against finite differences) on fresh random data, in f32, f16 and bf16, the inputs
// rounded to the dtype for the reference; and attention's gradient, which has no GPU kernel yet, refused
// with a clear error.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

// The gradients are sums over whole groups and channels: bf16's rounding of the result dominates.
double tolerance(DType t) { return t == DType::kF32 ? 1e-5 : t == DType::kF16 ? 3e-3 : 2e-2; }

void expect_close(const char* what, const Tensor& gpu, const Tensor& cpu_f32, DType t) {
  EXPECT_LE(test::relative_l2(test::to_host_f32(gpu), test::reference_of(cpu_f32)), tolerance(t)) << what;
}

TEST(GpuGroupNormBackward, MatchesCpu) {
  struct Case {
    Shape shape;
    int groups;
  };
  const Case cases[] = {{Shape{2, 16, 16, 320}, 32}, {Shape{1, 7, 5, 30}, 3}, {Shape{2, 77, 40}, 8},
                        {Shape{3, 300, 64}, 2}};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& c : cases) {
      for (bool silu : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << c.shape.to_string() << (silu ? " +silu" : ""));
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const int64_t channels = c.shape[c.shape.rank() - 1];
        const Shape vec{channels};
        const auto x = test::random_tensor(rng, c.shape, 2.f), dz = test::random_tensor(rng, c.shape);
        const auto gamma = test::random_tensor(rng, vec), beta = test::random_tensor(rng, vec);
        const auto dx = test::poisoned_gpu(c.shape, t), dg = test::poisoned_gpu(vec, t), db = test::poisoned_gpu(vec, t);
        ops::group_norm_backward(test::to_gpu(dz, t), test::to_gpu(x, t), test::to_gpu(gamma, t), test::to_gpu(beta, t),
                                 c.groups, 1e-5f, silu, dx, dg, db);
        OwnedTensor ex(c.shape, DType::kF32), eg(vec, DType::kF32), eb(vec, DType::kF32);
        ops::group_norm_backward(test::rounded_to(dz, t), test::rounded_to(x, t), test::rounded_to(gamma, t),
                                 test::rounded_to(beta, t), c.groups, 1e-5f, silu, ex, eg, eb);
        expect_close("dx", dx, ex, t);
        expect_close("dgamma", dg, eg, t);
        expect_close("dbeta", db, eb, t);
      }
    }
  }
}

TEST(GpuLayerNormBackward, MatchesCpu) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const Shape& shape : {Shape{2, 1024, 320}, Shape{3, 77, 768}, Shape{5, 30}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << shape.to_string());
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const Shape vec{shape[shape.rank() - 1]};
      const auto x = test::random_tensor(rng, shape), dz = test::random_tensor(rng, shape);
      const auto gamma = test::random_tensor(rng, vec);
      const auto dx = test::poisoned_gpu(shape, t), dg = test::poisoned_gpu(vec, t), db = test::poisoned_gpu(vec, t);
      ops::layer_norm_backward(test::to_gpu(dz, t), test::to_gpu(x, t), test::to_gpu(gamma, t), 1e-5f, dx, dg, db);
      OwnedTensor ex(shape, DType::kF32), eg(vec, DType::kF32), eb(vec, DType::kF32);
      ops::layer_norm_backward(test::rounded_to(dz, t), test::rounded_to(x, t), test::rounded_to(gamma, t), 1e-5f, ex,
                               eg, eb);
      expect_close("dx", dx, ex, t);
      expect_close("dgamma", dg, eg, t);
      expect_close("dbeta", db, eb, t);
    }
  }
}

TEST(GpuGegluBackward, MatchesCpuForBothGelus) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto approximation : {ops::GeluApproximation::kNone, ops::GeluApproximation::kTanh}) {
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const auto x = test::random_tensor(rng, Shape{2, 300, 2 * 72}, 2.f);
      const auto dz = test::random_tensor(rng, Shape{2, 300, 72});
      const auto dx = test::poisoned_gpu(x.view().shape, t);
      ops::geglu_backward(test::to_gpu(dz, t), test::to_gpu(x, t), approximation, dx);
      OwnedTensor expected(x.view().shape, DType::kF32);
      ops::geglu_backward(test::rounded_to(dz, t), test::rounded_to(x, t), approximation, expected);
      expect_close("dx", dx, expected, t);
    }
  }
}

TEST(GpuAttentionBackward, IsRefusedClearly) {
  const auto q = test::poisoned_gpu(Shape{1, 4, 8}, DType::kF16);
  try {
    ops::attention_backward(q, q, q, q, q, {2, false, 0.f}, q, q, q);
    ADD_FAILURE() << "attention_backward ran on the GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("runs on the CPU only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hd
