// The gradient ops against central finite differences of their forward ops. For a loss L = Σ g ∘ f(x)
// with a random upstream gradient g, the derivative of L along a random direction u of one input is
// measured as (L(x + εu) − L(x − εu)) / 2ε and compared with Σ u ∘ (the op's gradient for that input).
// The forward computes in f32, so the comparison is to 1% (a wrong formula is off by far more; the
// Python tests compare the same kernels with PyTorch's autograd element by element).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

double dot(const Tensor& a, const Tensor& b) {
  double sum = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += double(a.ptr<float>()[i]) * b.ptr<float>()[i];
  return sum;
}

// dL/dε along u for the input `x` of `forward` (which writes its output into `out`).
double finite_difference(const std::function<void(const Tensor& out)>& forward, OwnedTensor& x, const Tensor& u,
                         const Tensor& upstream, double eps) {
  OwnedTensor out(upstream.shape, DType::kF32);
  const std::vector<float> saved = test::to_vector(x);
  double loss[2];
  for (int side = 0; side < 2; ++side) {
    const double step = side == 0 ? eps : -eps;
    for (int64_t i = 0; i < x.view().numel(); ++i) x.ptr<float>()[i] = float(saved[size_t(i)] + step * u.ptr<float>()[i]);
    forward(out);
    loss[side] = dot(out, upstream);
  }
  for (int64_t i = 0; i < x.view().numel(); ++i) x.ptr<float>()[i] = saved[size_t(i)];
  return (loss[0] - loss[1]) / (2.0 * eps);
}

void expect_directional(const char* what, double numeric, const Tensor& gradient, const Tensor& u) {
  const double analytic = dot(gradient, u);
  EXPECT_NEAR(analytic, numeric, 1e-2 * std::max(1.0, std::abs(numeric))) << what;
}

TEST(AttentionBackward, MatchesFiniteDifferences) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (bool causal : {false, true}) {
    const int64_t b = 2, lq = 7, lk = causal ? 7 : 11, heads = 2, d = 6;
    auto q = test::random_tensor(rng, Shape{b, lq, heads * d});
    auto k = test::random_tensor(rng, Shape{b, lk, heads * d});
    auto v = test::random_tensor(rng, Shape{b, lk, heads * d});
    const auto g = test::random_tensor(rng, Shape{b, lq, heads * d});
    const ops::AttentionParams p{int(heads), causal, 0.0f};
    OwnedTensor out(q.view().shape, DType::kF32);
    ops::attention(q, k, v, p, out);
    auto dq = test::poisoned_tensor(q.view().shape), dk = test::poisoned_tensor(k.view().shape),
         dv = test::poisoned_tensor(v.view().shape);
    ops::attention_backward(g, q, k, v, out, p, dq, dk, dv);
    const auto forward = [&](const Tensor& o) { ops::attention(q, k, v, p, o); };
    for (auto [name, x, grad] : {std::tuple{"q", &q, &dq}, {"k", &k, &dk}, {"v", &v, &dv}}) {
      const auto u = test::random_tensor(rng, x->view().shape);
      expect_directional(name, finite_difference(forward, *x, u, g, 1e-2), *grad, u);
    }
  }
}

TEST(GroupNormBackward, MatchesFiniteDifferencesWithAndWithoutSilu) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (bool silu : {false, true}) {
    auto x = test::random_tensor(rng, Shape{2, 3, 4, 8}, 2.0f);
    auto gamma = test::random_tensor(rng, Shape{8});
    auto beta = test::random_tensor(rng, Shape{8});
    const auto g = test::random_tensor(rng, x.view().shape);
    auto dx = test::poisoned_tensor(x.view().shape), dg = test::poisoned_tensor(Shape{8}),
         db = test::poisoned_tensor(Shape{8});
    ops::group_norm_backward(g, x, gamma, beta, 4, 1e-5f, silu, dx, dg, db);
    const auto forward = [&](const Tensor& o) { ops::group_norm(x, gamma, beta, 4, 1e-5f, silu, o); };
    for (auto [name, t, grad] : {std::tuple{"x", &x, &dx}, {"gamma", &gamma, &dg}, {"beta", &beta, &db}}) {
      const auto u = test::random_tensor(rng, t->view().shape);
      expect_directional(name, finite_difference(forward, *t, u, g, 1e-2), *grad, u);
    }
  }
}

TEST(LayerNormBackward, MatchesFiniteDifferences) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  auto x = test::random_tensor(rng, Shape{3, 5, 16});
  auto gamma = test::random_tensor(rng, Shape{16});
  auto beta = test::random_tensor(rng, Shape{16});
  const auto g = test::random_tensor(rng, x.view().shape);
  auto dx = test::poisoned_tensor(x.view().shape), dg = test::poisoned_tensor(Shape{16}),
       db = test::poisoned_tensor(Shape{16});
  ops::layer_norm_backward(g, x, gamma, 1e-5f, dx, dg, db);
  const auto forward = [&](const Tensor& o) { ops::layer_norm(x, gamma, beta, 1e-5f, o); };
  for (auto [name, t, grad] : {std::tuple{"x", &x, &dx}, {"gamma", &gamma, &dg}, {"beta", &beta, &db}}) {
    const auto u = test::random_tensor(rng, t->view().shape);
    expect_directional(name, finite_difference(forward, *t, u, g, 1e-2), *grad, u);
  }
}

TEST(GegluBackward, MatchesFiniteDifferencesForBothGelus) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (auto approximation : {ops::GeluApproximation::kNone, ops::GeluApproximation::kTanh}) {
    auto x = test::random_tensor(rng, Shape{4, 3, 20}, 2.0f);
    const auto g = test::random_tensor(rng, Shape{4, 3, 10});
    auto dx = test::poisoned_tensor(x.view().shape);
    ops::geglu_backward(g, x, approximation, dx);
    const auto u = test::random_tensor(rng, x.view().shape);
    const auto forward = [&](const Tensor& o) { ops::geglu(x, approximation, o); };
    expect_directional("x", finite_difference(forward, x, u, g, 1e-2), dx, u);
  }
}

TEST(GradientOps, RejectWrongShapesAndDevices) {
  OwnedTensor x(Shape{1, 4, 8}, DType::kF32), k(Shape{1, 5, 8}, DType::kF32), wrong(Shape{1, 4, 6}, DType::kF32);
  EXPECT_THROW(ops::attention_backward(x, x, k, k, x, {2, false, 0.0f}, x, k, wrong), Error);
  EXPECT_THROW(ops::attention_backward(x, x, k, k, x, {3, false, 0.0f}, x, k, k), Error);
  OwnedTensor c(Shape{8}, DType::kF32), c_wrong(Shape{6}, DType::kF32);
  EXPECT_THROW(ops::group_norm_backward(x, x, c, c, 3, 1e-5f, false, x, c, c), Error);
  EXPECT_THROW(ops::layer_norm_backward(x, x, c_wrong, 1e-5f, x, c, c), Error);
  EXPECT_THROW(ops::layer_norm_backward(x, x, c, 0.0f, x, c, c), Error);
  OwnedTensor half(Shape{1, 4, 4}, DType::kF32), dx(Shape{1, 4, 8}, DType::kF32);
  EXPECT_THROW(ops::geglu_backward(x, x, ops::GeluApproximation::kNone, dx), Error);
  EXPECT_NO_THROW(ops::geglu_backward(half, x, ops::GeluApproximation::kNone, dx));
  OwnedTensor f16(Shape{1, 4, 8}, DType::kF16);
  EXPECT_THROW(ops::geglu_backward(half, f16, ops::GeluApproximation::kNone, f16), Error);
}

}  // namespace
}  // namespace hd
