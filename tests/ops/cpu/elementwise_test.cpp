#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

// Value of `t` at the broadcast position `idx` of an output of rank `rank`.
double broadcast_at(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t offset = 0;
  const int shift = int(idx.size()) - t.rank();
  for (int d = 0; d < t.rank(); ++d) offset += (t.shape[d] == 1 ? 0 : idx[size_t(d + shift)]) * t.strides[d];
  return t.ptr<float>()[offset];
}

void check_binary(bool is_add, Shape a_shape, Shape b_shape, Shape out_shape) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto a = test::random_tensor(rng, a_shape);
  const auto b = test::random_tensor(rng, b_shape);
  auto out = test::poisoned_tensor(out_shape);
  (is_add ? ops::add : ops::mul)(a, b, out);
  std::vector<double> ref(size_t(out_shape.numel()));
  std::vector<int64_t> idx(size_t(out_shape.rank()), 0);
  for (size_t flat = 0; flat < ref.size(); ++flat) {
    int64_t rest = int64_t(flat);
    for (int d = out_shape.rank() - 1; d >= 0; --d) {
      idx[size_t(d)] = rest % out_shape[d];
      rest /= out_shape[d];
    }
    const double x = broadcast_at(a, idx), y = broadcast_at(b, idx);
    ref[flat] = is_add ? x + y : x * y;
  }
  EXPECT_LT(test::relative_l2(out, ref), 1e-7) << a_shape.to_string() << " op " << b_shape.to_string();
}

TEST(Elementwise, AddAndMulBroadcastLikeNumpy) {
  for (bool is_add : {true, false}) {
    check_binary(is_add, Shape{2, 3, 4, 5}, Shape{2, 3, 4, 5}, Shape{2, 3, 4, 5});
    check_binary(is_add, Shape{2, 3, 4, 5}, Shape{5}, Shape{2, 3, 4, 5});           // bias over channels
    check_binary(is_add, Shape{2, 3, 4, 5}, Shape{2, 1, 1, 5}, Shape{2, 3, 4, 5});  // time embedding per sample
    check_binary(is_add, Shape{3, 1}, Shape{1, 4}, Shape{3, 4});                     // both sides broadcast
    check_binary(is_add, Shape{1}, Shape{6, 2}, Shape{6, 2});
  }
}

TEST(Elementwise, ScaleAndInPlace) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  auto x = test::random_tensor(rng, Shape{1000});
  std::vector<double> ref(1000);
  for (size_t i = 0; i < 1000; ++i) ref[i] = 0.18215 * double(x.ptr<float>()[i]);
  ops::scale(x, 0.18215f, x);
  EXPECT_LT(test::relative_l2(x, ref), 1e-7);
  const auto b = test::random_tensor(rng, Shape{1000});
  for (size_t i = 0; i < 1000; ++i) ref[i] = double(x.ptr<float>()[i]) + b.ptr<float>()[i];
  ops::add(x, b, x);
  EXPECT_LT(test::relative_l2(x, ref), 1e-7);
}

TEST(Elementwise, IncompatibleShapesAreErrors) {
  OwnedTensor a(Shape{2, 3}, DType::kF32), b(Shape{4}, DType::kF32), out(Shape{2, 3}, DType::kF32);
  EXPECT_THROW(ops::add(a, b, out), Error);
  OwnedTensor c(Shape{3}, DType::kF32), wrong(Shape{3, 2}, DType::kF32);
  EXPECT_THROW(ops::add(a, c, wrong), Error);
}

}  // namespace
}  // namespace hd
