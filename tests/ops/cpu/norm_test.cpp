#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "fixture_util.h"
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

// A channel offset [N, C] is x + offset[n, c] normalised: the same as adding it first (what a ResNet
// block did before the offset was fused), with and without SiLU.
TEST(GroupNorm, WithAChannelOffsetEqualsAddingItFirst) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const Shape shape{2, 5, 6, 12};
  const auto x = test::random_tensor(rng, shape, 2.0f);
  const auto offset = test::random_tensor(rng, Shape{2, 12}, 3.0f);
  const auto gamma = test::random_tensor(rng, Shape{12});
  const auto beta = test::random_tensor(rng, Shape{12});
  OwnedTensor sum(shape, DType::kF32);
  ops::add(x, offset.view().reshape(Shape{2, 1, 1, 12}), sum);
  for (bool fuse : {false, true}) {
    auto fused = test::poisoned_tensor(shape), separate = test::poisoned_tensor(shape);
    ops::group_norm(x, gamma, beta, 4, 1e-5f, fuse, fused, &offset.view());
    ops::group_norm(sum, gamma, beta, 4, 1e-5f, fuse, separate);
    const std::vector<float> expected = test::to_vector(separate);
    EXPECT_LT(test::relative_l2(fused, std::vector<double>(expected.begin(), expected.end())), 1e-6)
        << "fuse_silu " << fuse;
  }
}

TEST(GroupNorm, RejectsAChannelOffsetOfAnotherShape) {
  OwnedTensor x(Shape{2, 2, 2, 8}, DType::kF32), g(Shape{8}, DType::kF32),
      out(Shape{2, 2, 2, 8}, DType::kF32);
  for (const Shape& wrong : {Shape{1, 8}, Shape{2, 4}, Shape{2, 1, 1, 8}}) {
    OwnedTensor offset(wrong, DType::kF32);
    EXPECT_THROW(ops::group_norm(x, g, g, 4, 1e-5f, false, out, &offset.view()), Error) << wrong.to_string();
  }
}

TEST(GroupNorm, RejectsGroupsThatDoNotDivideChannels) {
  OwnedTensor x(Shape{1, 2, 2, 10}, DType::kF32), g(Shape{10}, DType::kF32), out(Shape{1, 2, 2, 10}, DType::kF32);
  EXPECT_THROW(ops::group_norm(x, g, g, 3, 1e-5f, false, out), Error);
  EXPECT_THROW(ops::group_norm(x, g, g, 5, 0.0f, false, out), Error);
  OwnedTensor g_wrong(Shape{8}, DType::kF32);
  EXPECT_THROW(ops::group_norm(x, g_wrong, g, 5, 1e-5f, false, out), Error);
}

// The statistics of a strided view (a tile's core inside its halo) against a two-pass double reference.
TEST(GroupStatistics, OfAStridedViewMatchDoubleReference) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  auto x = test::random_tensor(rng, Shape{2, 9, 11, 12}, 2.0f);
  for (int64_t i = 0; i < x.view().numel(); ++i) x.ptr<float>()[i] += 50.0f;  // a mean far above the spread
  const Tensor core = x.view().slice(1, 2, 5).slice(2, 3, 6);
  const int groups = 4;
  OwnedTensor stats(Shape{2, groups, 2}, DType::kF32);
  ops::group_statistics(core, groups, stats);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      std::vector<double> values;
      for (int64_t y = 2; y < 7; ++y)
        for (int64_t xi = 3; xi < 9; ++xi)
          for (int64_t j = 0; j < 3; ++j) values.push_back(x.ptr<float>()[((b * 9 + y) * 11 + xi) * 12 + g * 3 + j]);
      double mean = 0, squares = 0;
      for (double v : values) mean += v / double(values.size());
      for (double v : values) squares += (v - mean) * (v - mean);
      EXPECT_NEAR(stats.ptr<float>()[(b * groups + g) * 2], mean, 1e-5 * std::abs(mean));
      EXPECT_NEAR(stats.ptr<float>()[(b * groups + g) * 2 + 1], squares, 1e-5 * squares);
    }
  }
}

// Cut into parts of unequal size, normalised from the parts' combined statistics: the same as the
// GroupNorm of the whole, with and without SiLU.
TEST(GroupStatistics, PartsCombineIntoTheWholeImagesGroupNorm) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t n = 2, h = 10, w = 7, c = 16;
  const int groups = 4;
  auto x = test::random_tensor(rng, Shape{n, h, w, c}, 1.5f);
  for (int64_t i = 0; i < x.view().numel(); ++i) x.ptr<float>()[i] += 20.0f;
  const auto gamma = test::random_tensor(rng, Shape{c}), beta = test::random_tensor(rng, Shape{c});
  const int64_t cuts[] = {0, 1, 4, 10};  // rows [0, 1), [1, 4), [4, 10)
  OwnedTensor parts(Shape{3, n, groups, 2}, DType::kF32);
  std::vector<int64_t> pixels;
  for (int64_t p = 0; p < 3; ++p) {
    ops::group_statistics(x.view().slice(1, cuts[p], cuts[p + 1] - cuts[p]), groups,
                          parts.view().slice(0, p, 1).reshape(Shape{n, groups, 2}));
    pixels.push_back((cuts[p + 1] - cuts[p]) * w);
  }
  const OwnedTensor affine = ops::group_norm_affine(parts, pixels, gamma, beta, 1e-5f);
  ASSERT_EQ(affine.view().shape, (Shape{n, c, 2}));
  for (bool silu : {false, true}) {
    auto out = test::poisoned_tensor(x.view().shape), whole = test::poisoned_tensor(x.view().shape);
    ops::group_norm_apply(x, affine, silu, out);
    ops::group_norm(x, gamma, beta, groups, 1e-5f, silu, whole);
    EXPECT_LT(test::relative_l2(out, test::as_reference(whole)), 1e-5) << "silu " << silu;
  }
}

TEST(GroupStatistics, RejectsBadArguments) {
  OwnedTensor x(Shape{1, 4, 4, 8}, DType::kF32), stats(Shape{1, 4, 2}, DType::kF32), g(Shape{8}, DType::kF32);
  EXPECT_THROW(ops::group_statistics(x, 3, stats), Error);  // 8 channels, 3 groups
  EXPECT_THROW(ops::group_statistics(x, 2, stats), Error);  // stats for 4 groups
  EXPECT_THROW(ops::group_statistics(x.view().slice(1, 0, 0), 4, stats), Error);  // no pixels
  Tensor strided_channels = x.view().reshape(Shape{1, 4, 8, 4});
  strided_channels.strides = Shape{128, 32, 1, 8};
  EXPECT_THROW(ops::group_statistics(strided_channels, 4, stats), Error);
  OwnedTensor parts(Shape{2, 1, 4, 2}, DType::kF32);
  EXPECT_THROW(ops::group_norm_affine(parts, {16}, g, g, 1e-5f), Error);      // a pixel count per part
  EXPECT_THROW(ops::group_norm_affine(parts, {16, 0}, g, g, 1e-5f), Error);   // an empty part
  EXPECT_THROW(ops::group_norm_affine(parts, {16, 16}, g, g, 0.0f), Error);   // eps
  OwnedTensor affine(Shape{1, 8, 2}, DType::kF32), wrong(Shape{1, 4, 2}, DType::kF32);
  std::fill(affine.ptr<float>(), affine.ptr<float>() + 16, 0.0f);
  std::fill(x.ptr<float>(), x.ptr<float>() + 128, 1.0f);
  EXPECT_THROW(ops::group_norm_apply(x, wrong, false, x), Error);
  EXPECT_NO_THROW(ops::group_norm_apply(x, affine, false, x));
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
