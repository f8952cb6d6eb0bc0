#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(GroupNorm, MatchesTwoPassDoubleReferenceWithAndWithoutSilu) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t n = 2, h = 5, w = 6, c = 12;
  const int groups = 4;
  for (bool fuse : {false, true}) {
    // An offset mean checks that the statistics do not cancel catastrophically.
    auto x = test::random_tensor(rng, Shape{n, h, w, c}, 2.0f);
    for (int64_t i = 0; i < x.view().numel(); ++i) x.ptr<float>()[i] += 3.0f;
    const auto gamma = test::random_tensor(rng, Shape{c});
    const auto beta = test::random_tensor(rng, Shape{c});
    auto out = test::poisoned_tensor(x.view().shape);
    ops::group_norm(x, gamma, beta, groups, 1e-5f, fuse, out);

    std::vector<double> ref(size_t(x.view().numel()));
    const int64_t gs = c / groups;
    for (int64_t b = 0; b < n; ++b)
      for (int g = 0; g < groups; ++g) {
        double mean = 0.0, var = 0.0;
        const auto at = [&](int64_t pos, int64_t ch) { return double(x.ptr<float>()[(b * h * w + pos) * c + ch]); };
        for (int64_t pos = 0; pos < h * w; ++pos)
          for (int64_t j = 0; j < gs; ++j) mean += at(pos, g * gs + j);
        mean /= double(h * w * gs);
        for (int64_t pos = 0; pos < h * w; ++pos)
          for (int64_t j = 0; j < gs; ++j) var += (at(pos, g * gs + j) - mean) * (at(pos, g * gs + j) - mean);
        var /= double(h * w * gs);
        for (int64_t pos = 0; pos < h * w; ++pos)
          for (int64_t j = 0; j < gs; ++j) {
            const int64_t ch = g * gs + j;
            double y = (at(pos, ch) - mean) / std::sqrt(var + 1e-5) * gamma.ptr<float>()[ch] + beta.ptr<float>()[ch];
            if (fuse) y = y / (1.0 + std::exp(-y));
            ref[size_t((b * h * w + pos) * c + ch)] = y;
          }
      }
    EXPECT_LT(test::relative_l2(out, ref), 1e-6) << "fuse_silu " << fuse;
  }
}

TEST(GroupNorm, RejectsGroupsThatDoNotDivideChannels) {
  OwnedTensor x(Shape{1, 2, 2, 10}, DType::kF32), g(Shape{10}, DType::kF32), out(Shape{1, 2, 2, 10}, DType::kF32);
  EXPECT_THROW(ops::group_norm(x, g, g, 3, 1e-5f, false, out), Error);
  EXPECT_THROW(ops::group_norm(x, g, g, 5, 0.0f, false, out), Error);
  OwnedTensor g_wrong(Shape{8}, DType::kF32);
  EXPECT_THROW(ops::group_norm(x, g_wrong, g, 5, 1e-5f, false, out), Error);
}

TEST(LayerNorm, MatchesDoubleReference) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t rows = 2 * 9, c = 33;
  const auto x = test::random_tensor(rng, Shape{2, 9, c}, 3.0f);
  const auto gamma = test::random_tensor(rng, Shape{c});
  const auto beta = test::random_tensor(rng, Shape{c});
  auto out = test::poisoned_tensor(x.view().shape);
  ops::layer_norm(x, gamma, beta, 1e-5f, out);
  std::vector<double> ref(size_t(rows * c));
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) mean += x.ptr<float>()[r * c + j];
    mean /= double(c);
    for (int64_t j = 0; j < c; ++j) var += (x.ptr<float>()[r * c + j] - mean) * (x.ptr<float>()[r * c + j] - mean);
    var /= double(c);
    for (int64_t j = 0; j < c; ++j)
      ref[size_t(r * c + j)] = (x.ptr<float>()[r * c + j] - mean) / std::sqrt(var + 1e-5) * gamma.ptr<float>()[j] +
                               beta.ptr<float>()[j];
  }
  EXPECT_LT(test::relative_l2(out, ref), 1e-6);
}

}  // namespace
}  // namespace hd
