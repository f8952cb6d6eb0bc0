#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(Linear, MatchesScalarReferenceWithAndWithoutBias) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (bool with_bias : {false, true}) {
    const auto x = test::random_tensor(rng, Shape{2, 7, 13});
    const auto w = test::random_tensor(rng, Shape{11, 13});
    const auto b = test::random_tensor(rng, Shape{11});
    auto out = test::poisoned_tensor(Shape{2, 7, 11});
    ops::linear(x, w, with_bias ? &b.view() : nullptr, out);
    std::vector<double> ref(2 * 7 * 11);
    for (int64_t r = 0; r < 14; ++r)
      for (int64_t o = 0; o < 11; ++o) {
        double acc = with_bias ? b.ptr<float>()[o] : 0.0;
        for (int64_t i = 0; i < 13; ++i) acc += double(x.ptr<float>()[r * 13 + i]) * w.ptr<float>()[o * 13 + i];
        ref[size_t(r * 11 + o)] = acc;
      }
    EXPECT_LT(test::relative_l2(out, ref), 1e-6);
  }
}

// The residual added in the product (a transformer's residual stream): in a tensor of its own, and in
// place, where the output is the residual.
TEST(Linear, AddsTheResidualSeparateOrInPlace) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto x = test::random_tensor(rng, Shape{2, 7, 13});
  const auto w = test::random_tensor(rng, Shape{11, 13});
  const auto b = test::random_tensor(rng, Shape{11});
  const auto residual = test::random_tensor(rng, Shape{2, 7, 11});
  std::vector<double> ref(2 * 7 * 11);
  for (int64_t r = 0; r < 14; ++r)
    for (int64_t o = 0; o < 11; ++o) {
      double acc = double(b.ptr<float>()[o]) + residual.ptr<float>()[r * 11 + o];
      for (int64_t i = 0; i < 13; ++i) acc += double(x.ptr<float>()[r * 13 + i]) * w.ptr<float>()[o * 13 + i];
      ref[size_t(r * 11 + o)] = acc;
    }
  auto separate = test::poisoned_tensor(Shape{2, 7, 11});
  ops::linear(x, w, &b.view(), &residual.view(), separate);
  EXPECT_LT(test::relative_l2(separate, ref), 1e-6);
  const OwnedTensor in_place = OwnedTensor::copy_of(residual);
  ops::linear(x, w, &b.view(), &in_place.view(), in_place);
  EXPECT_LT(test::relative_l2(in_place, ref), 1e-6);
  OwnedTensor wrong(Shape{2, 7, 12}, DType::kF32);
  EXPECT_THROW(ops::linear(x, w, &b.view(), &wrong.view(), separate), Error);
}

TEST(Linear, RejectsMismatchedFeatures) {
  OwnedTensor x(Shape{3, 5}, DType::kF32), w(Shape{4, 6}, DType::kF32), out(Shape{3, 4}, DType::kF32);
  EXPECT_THROW(ops::linear(x, w, nullptr, out), Error);
}

// The feed-forward's projection and GEGLU in one op: the projection's first half times the GELU of its
// second, against a scalar reference in double, in both GELU forms.
TEST(LinearGeglu, GatesTheFirstHalfByTheSecond) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t rows = 2 * 5, k = 9, half = 6;
  const auto x = test::random_tensor(rng, Shape{2, 5, k});
  const auto w = test::random_tensor(rng, Shape{2 * half, k});
  const auto b = test::random_tensor(rng, Shape{2 * half});
  for (const ops::GeluApproximation form : {ops::GeluApproximation::kNone, ops::GeluApproximation::kTanh}) {
    for (bool with_bias : {false, true}) {
      auto out = test::poisoned_tensor(Shape{2, 5, half});
      ops::linear_geglu(x, w, with_bias ? &b.view() : nullptr, form, out);
      const auto projected = [&](int64_t r, int64_t o) {
        double acc = with_bias ? b.ptr<float>()[o] : 0.0;
        for (int64_t i = 0; i < k; ++i) acc += double(x.ptr<float>()[r * k + i]) * w.ptr<float>()[o * k + i];
        return acc;
      };
      std::vector<double> ref(size_t(rows * half));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < half; ++o) {
          const double g = projected(r, half + o);
          const double gelu =
              form == ops::GeluApproximation::kTanh
                  ? 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)))
                  : 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
          ref[size_t(r * half + o)] = projected(r, o) * gelu;
        }
      EXPECT_LT(test::relative_l2(out, ref), 1e-5) << with_bias;
    }
  }
}

TEST(LinearGeglu, RejectsAnOddProjectionAndAWrongOutput) {
  test::Rng rng;
  const auto x = test::random_tensor(rng, Shape{3, 8});
  const auto odd = test::random_tensor(rng, Shape{7, 8}), w = test::random_tensor(rng, Shape{8, 8});
  EXPECT_THROW(
      ops::linear_geglu(x, odd, nullptr, ops::GeluApproximation::kNone, test::poisoned_tensor(Shape{3, 3})),
      Error);
  EXPECT_THROW(
      ops::linear_geglu(x, w, nullptr, ops::GeluApproximation::kNone, test::poisoned_tensor(Shape{3, 8})),
      Error);  // the output is half the projection
  const auto short_bias = test::random_tensor(rng, Shape{4});
  EXPECT_THROW(ops::linear_geglu(x, w, &short_bias.view(), ops::GeluApproximation::kNone,
                                 test::poisoned_tensor(Shape{3, 4})),
               Error);
}

TEST(BatchedMatmul, AllTransposeCombinations) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t batch = 3, m = 5, n = 6, k = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const auto a = test::random_tensor(rng, ta ? Shape{batch, k, m} : Shape{batch, m, k});
      const auto b = test::random_tensor(rng, tb ? Shape{batch, n, k} : Shape{batch, k, n});
      auto out = test::poisoned_tensor(Shape{batch, m, n});
      ops::batched_matmul(a, b, ta, tb, 0.5f, out);
      std::vector<double> ref(size_t(batch * m * n));
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < n; ++c) {
            double acc = 0.0;
            for (int64_t j = 0; j < k; ++j) {
              const float av = ta ? a.ptr<float>()[(i * k + j) * m + r] : a.ptr<float>()[(i * m + r) * k + j];
              const float bv = tb ? b.ptr<float>()[(i * n + c) * k + j] : b.ptr<float>()[(i * k + j) * n + c];
              acc += double(av) * bv;
            }
            ref[size_t((i * m + r) * n + c)] = 0.5 * acc;
          }
      EXPECT_LT(test::relative_l2(out, ref), 1e-6) << "ta " << ta << " tb " << tb;
    }
  }
  OwnedTensor a(Shape{2, 3, 4}, DType::kF32), b(Shape{2, 5, 6}, DType::kF32), out(Shape{2, 3, 6}, DType::kF32);
  EXPECT_THROW(ops::batched_matmul(a, b, false, false, 1.0f, out), Error);
}

}  // namespace
}  // namespace hd
