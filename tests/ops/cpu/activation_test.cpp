#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

template <typename Op, typename Ref>
void check_unary(Op op, Ref ref) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto x = test::random_tensor(rng, Shape{3, 17, 40}, 3.0f);
  auto out = test::poisoned_tensor(x.view().shape);
  op(x.view(), out.view());
  std::vector<double> expected(size_t(x.view().numel()));
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = ref(double(x.ptr<float>()[i]));
  EXPECT_LT(test::relative_l2(out, expected), 1e-6);
  // In place: out aliases x.
  auto y = test::random_tensor(rng, Shape{100});
  std::vector<double> expected_y(100);
  for (size_t i = 0; i < 100; ++i) expected_y[i] = ref(double(y.ptr<float>()[i]));
  op(y.view(), y.view());
  EXPECT_LT(test::relative_l2(y, expected_y), 1e-6);
}

TEST(Activations, GeluErf) {
  check_unary([](const Tensor& x, const Tensor& o) { ops::gelu(x, ops::GeluApproximation::kNone, o); }, gelu_erf);
}
TEST(Activations, GeluTanh) {
  check_unary([](const Tensor& x, const Tensor& o) { ops::gelu(x, ops::GeluApproximation::kTanh, o); }, gelu_tanh);
}
TEST(Activations, QuickGelu) {
  check_unary([](const Tensor& x, const Tensor& o) { ops::quick_gelu(x, o); },
              [](double x) { return x * sigmoid(1.702 * x); });
}
TEST(Activations, Silu) {
  check_unary([](const Tensor& x, const Tensor& o) { ops::silu(x, o); }, [](double x) { return x * sigmoid(x); });
}

TEST(Activations, GegluSplitsValueAndGate) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (auto approx : {ops::GeluApproximation::kNone, ops::GeluApproximation::kTanh}) {
    const auto x = test::random_tensor(rng, Shape{2, 5, 2 * 24}, 2.0f);
    auto out = test::poisoned_tensor(Shape{2, 5, 24});
    ops::geglu(x, approx, out);
    std::vector<double> ref(2 * 5 * 24);
    for (int64_t r = 0; r < 10; ++r)
      for (int64_t j = 0; j < 24; ++j) {
        const double value = x.ptr<float>()[r * 48 + j], gate = x.ptr<float>()[r * 48 + 24 + j];
        ref[size_t(r * 24 + j)] = value * (approx == ops::GeluApproximation::kTanh ? gelu_tanh(gate) : gelu_erf(gate));
      }
    EXPECT_LT(test::relative_l2(out, ref), 1e-6);
  }
  OwnedTensor odd(Shape{2, 5}, DType::kF32), out(Shape{2, 2}, DType::kF32);
  EXPECT_THROW(ops::geglu(odd, ops::GeluApproximation::kNone, out), Error);
}

TEST(Softmax, RowsSumToOneAndMatchReference) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  auto x = test::random_tensor(rng, Shape{4, 7, 50}, 5.0f);
  x.ptr<float>()[3] = 80.0f;  // large logits must not overflow
  auto out = test::poisoned_tensor(x.view().shape);
  ops::softmax(x, out);
  std::vector<double> ref(size_t(x.view().numel()));
  for (int64_t r = 0; r < 28; ++r) {
    double max = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < 50; ++j) max = std::max(max, double(x.ptr<float>()[r * 50 + j]));
    for (int64_t j = 0; j < 50; ++j) sum += std::exp(x.ptr<float>()[r * 50 + j] - max);
    for (int64_t j = 0; j < 50; ++j) ref[size_t(r * 50 + j)] = std::exp(x.ptr<float>()[r * 50 + j] - max) / sum;
  }
  EXPECT_LT(test::relative_l2(out, ref), 1e-6);
}

}  // namespace
}  // namespace hd
