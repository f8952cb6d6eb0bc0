#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(Upsample, NearestRepeatsEachPixelTwoByTwo) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto x = test::random_tensor(rng, Shape{2, 3, 5, 4});
  auto out = test::poisoned_tensor(Shape{2, 6, 10, 4});
  ops::upsample_nearest_2x(x, out);
  std::vector<double> ref(size_t(out.view().numel()));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t xx = 0; xx < 10; ++xx)
        for (int64_t c = 0; c < 4; ++c)
          ref[size_t(((b * 6 + y) * 10 + xx) * 4 + c)] = x.ptr<float>()[((b * 3 + y / 2) * 5 + xx / 2) * 4 + c];
  EXPECT_EQ(test::max_abs_diff(out, ref), 0.0);
  OwnedTensor wrong(Shape{2, 6, 9, 4}, DType::kF32);
  EXPECT_THROW(ops::upsample_nearest_2x(x, wrong), Error);
}

TEST(Concat, JoinsChannels) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto a = test::random_tensor(rng, Shape{2, 3, 3, 5});
  const auto b = test::random_tensor(rng, Shape{2, 3, 3, 7});
  auto out = test::poisoned_tensor(Shape{2, 3, 3, 12});
  ops::concat_channels(a, b, out);
  std::vector<double> ref;
  for (int64_t p = 0; p < 18; ++p) {
    for (int64_t c = 0; c < 5; ++c) ref.push_back(a.ptr<float>()[p * 5 + c]);
    for (int64_t c = 0; c < 7; ++c) ref.push_back(b.ptr<float>()[p * 7 + c]);
  }
  EXPECT_EQ(test::max_abs_diff(out, ref), 0.0);
  OwnedTensor other(Shape{2, 4, 3, 7}, DType::kF32);
  EXPECT_THROW(ops::concat_channels(a, other, out), Error);
}

TEST(TimestepEmbedding, MatchesDiffusersFormula) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  OwnedTensor t(Shape{3}, DType::kF32);
  for (int i = 0; i < 3; ++i) t.ptr<float>()[i] = float(rng.integer(0, 999));
  for (bool flip : {true, false}) {
    for (int64_t dim : {320, 7}) {
      const ops::TimestepEmbeddingParams p{flip, flip ? 0.0f : 1.0f, 10000.0f, 1.0f};
      auto out = test::poisoned_tensor(Shape{3, dim});
      ops::timestep_embedding(t, p, out);
      const int64_t half = dim / 2;
      std::vector<double> ref;
      for (int i = 0; i < 3; ++i) {
        std::vector<double> s, c;
        for (int64_t j = 0; j < half; ++j) {
          const double arg = t.ptr<float>()[i] * std::exp(-std::log(10000.0) * j / (half - p.downscale_freq_shift));
          s.push_back(std::sin(arg));
          c.push_back(std::cos(arg));
        }
        const auto& first = flip ? c : s;
        const auto& second = flip ? s : c;
        ref.insert(ref.end(), first.begin(), first.end());
        ref.insert(ref.end(), second.begin(), second.end());
        if (dim % 2) ref.push_back(0.0);
      }
      // diffusers (and so the op) computes the phase t·exp(e) in f32: at t ~ 1000 the roundings of exp and
      // of the product move the phase, and so sin/cos, by up to ~2e-4; the double reference does not round.
      EXPECT_LT(test::max_abs_diff(out, ref), 5e-4) << "flip " << flip << " dim " << dim;
    }
  }
}

}  // namespace
}  // namespace hd

namespace hd {
namespace {

TEST(Embedding, GathersRowsAndRejectsOutOfRangeIds) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto table = test::random_tensor(rng, Shape{50, 6});
  OwnedTensor ids(Shape{2, 5}, DType::kI32);
  for (int i = 0; i < 10; ++i) ids.ptr<int32_t>()[i] = int32_t(rng.integer(0, 49));
  auto out = test::poisoned_tensor(Shape{2, 5, 6});
  ops::embedding(ids, table, out);
  std::vector<double> ref;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 6; ++j) ref.push_back(table.ptr<float>()[ids.ptr<int32_t>()[i] * 6 + j]);
  EXPECT_EQ(test::max_abs_diff(out, ref), 0.0);
  ids.ptr<int32_t>()[7] = 50;
  EXPECT_THROW(ops::embedding(ids, table, out), Error);
  ids.ptr<int32_t>()[7] = -1;
  EXPECT_THROW(ops::embedding(ids, table, out), Error);
}

}  // namespace
}  // namespace hd
