// GPU activations, GEGLU, broadcasting add/mul and scale against the CPU reference on fresh random data,
// in f32, f16 and bf16, through the op API.
#include <gtest/gtest.h>

#include <functional>

#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

// f32: the GPU's erff/tanhf/expf against the C library's; f16/bf16: one rounding of the output.
double tolerance(DType t) { return t == DType::kF32 ? 1e-6 : t == DType::kF16 ? 1e-3 : 8e-3; }
const DType kTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

using UnaryOp = std::function<void(const Tensor&, const Tensor&)>;

void check_unary(const char* name, const UnaryOp& op, Shape in_shape, Shape out_shape) {
  for (DType t : kTypes) {
    SCOPED_TRACE(testing::Message() << name << " " << dtype_name(t) << " " << in_shape.to_string());
    test::Rng rng;
    HD_SEED_TRACE(rng);
    const auto x = test::random_tensor(rng, in_shape, 2.f);
    const auto out = test::poisoned_gpu(out_shape, t);
    op(test::to_gpu(x, t), out);
    OwnedTensor expected(out_shape, DType::kF32);
    op(test::rounded_to(x, t), expected);
    EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance(t));
  }
}

TEST(GpuPointwise, ActivationsMatchCpu) {
  const Shape s{2, 33, 77};
  check_unary("silu", [](const Tensor& x, const Tensor& y) { ops::silu(x, y); }, s, s);
  check_unary("quick_gelu", [](const Tensor& x, const Tensor& y) { ops::quick_gelu(x, y); }, s, s);
  check_unary("gelu", [](const Tensor& x, const Tensor& y) { ops::gelu(x, ops::GeluApproximation::kNone, y); }, s, s);
  check_unary("gelu tanh", [](const Tensor& x, const Tensor& y) { ops::gelu(x, ops::GeluApproximation::kTanh, y); }, s, s);
  check_unary("scale", [](const Tensor& x, const Tensor& y) { ops::scale(x, -0.37f, y); }, s, s);
  check_unary("geglu", [](const Tensor& x, const Tensor& y) { ops::geglu(x, ops::GeluApproximation::kNone, y); },
              Shape{2, 50, 2 * 96}, Shape{2, 50, 96});  // 16-bit types: eight outputs a thread
  check_unary("geglu, odd width", [](const Tensor& x, const Tensor& y) { ops::geglu(x, ops::GeluApproximation::kNone, y); },
              Shape{3, 7, 2 * 13}, Shape{3, 7, 13});
}

TEST(GpuPointwise, BroadcastingAddAndMulMatchCpu) {
  const std::pair<Shape, Shape> pairs[] = {
      {Shape{2, 5, 7, 8}, Shape{2, 5, 7, 8}},  // same shape
      {Shape{2, 5, 7, 8}, Shape{8}},           // a bias over channels
      {Shape{2, 5, 7, 8}, Shape{2, 1, 1, 8}},  // the time embedding over positions
      {Shape{3, 1}, Shape{1, 4}},              // both sides broadcast
      {Shape{2, 77, 768}, Shape{77, 768}},     // CLIP's position embedding over the batch
      {Shape{2, 3, 5, 7}, Shape{2, 1, 1, 7}},  // channels not a multiple of 8: one element a thread
  };
  for (const auto& [sa, sb] : pairs) {
    for (bool multiply : {false, true}) {
      for (DType t : kTypes) {
        SCOPED_TRACE(testing::Message() << (multiply ? "mul " : "add ") << dtype_name(t) << " " << sa.to_string() << " "
                                        << sb.to_string());
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const auto a = test::random_tensor(rng, sa), b = test::random_tensor(rng, sb);
        Shape so = Shape::of_rank(std::max(sa.rank(), sb.rank()));
        for (int i = 0; i < so.rank(); ++i) {
          const int ia = i - (so.rank() - sa.rank()), ib = i - (so.rank() - sb.rank());
          so[i] = std::max(ia < 0 ? 1 : sa[ia], ib < 0 ? 1 : sb[ib]);
        }
        const auto op = multiply ? ops::mul : ops::add;
        const auto out = test::poisoned_gpu(so, t);
        op(test::to_gpu(a, t), test::to_gpu(b, t), out);
        OwnedTensor expected(so, DType::kF32);
        op(test::rounded_to(a, t), test::rounded_to(b, t), expected);
        EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance(t));
        if (so == sa) {  // in place, as the models update a tensor: out is a
          const auto in_place = test::to_gpu(a, t);
          op(in_place, test::to_gpu(b, t), in_place);
          EXPECT_LE(test::relative_l2(test::to_host_f32(in_place), test::reference_of(expected)), tolerance(t));
        }
      }
    }
  }
}

}  // namespace
}  // namespace hd
