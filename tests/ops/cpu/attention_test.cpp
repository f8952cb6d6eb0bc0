#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

// Softmax attention per head in double, straight from the definition; where lse is given, each row's
// log-sum-exp of its scaled scores there too ([B, heads, Lq]).
std::vector<double> attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int heads,
                                        bool causal, double scale, std::vector<double>* lse = nullptr) {
  const int64_t batch = q.dim(0), lq = q.dim(1), lk = k.dim(1), width = q.dim(2), d = width / heads;
  std::vector<double> out(size_t(q.numel()));
  std::vector<double> s(static_cast<size_t>(lk));
  if (lse != nullptr) lse->assign(size_t(batch * heads * lq), 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < lq; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j < lk; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c)
            dot += double(q.ptr<float>()[(b * lq + i) * width + h * d + c]) * k.ptr<float>()[(b * lk + j) * width + h * d + c];
          s[size_t(j)] = causal && j > i ? -INFINITY : dot * scale;
          max = std::max(max, s[size_t(j)]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < lk; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - max));
        if (lse != nullptr) (*lse)[size_t((b * heads + h) * lq + i)] = max + std::log(sum);
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < lk; ++j) acc += s[size_t(j)] * v.ptr<float>()[(b * lk + j) * width + h * d + c];
          out[size_t((b * lq + i) * width + h * d + c)] = acc / sum;
        }
      }
  return out;
}

struct AttentionCase {
  int64_t batch, lq, lk;
  int heads;
  int64_t head_dim;
  bool causal;
  float scale;
};

TEST(Attention, MatchesDefinitionOnRandomData) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const AttentionCase cases[] = {
      {2, 37, 37, 3, 8, false, 0.0f},   // self-attention
      {1, 300, 77, 2, 16, false, 0.0f}, // cross-attention to 77 text tokens, more queries than one block
      {2, 20, 20, 4, 5, true, 0.0f},    // causal, as in the CLIP text encoder
      {1, 9, 13, 1, 12, false, 0.3f},   // explicit scale, one head
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "lq " << c.lq << " lk " << c.lk << " heads " << c.heads);
    const int64_t width = c.heads * c.head_dim;
    const auto q = test::random_tensor(rng, Shape{c.batch, c.lq, width});
    const auto k = test::random_tensor(rng, Shape{c.batch, c.lk, width});
    const auto v = test::random_tensor(rng, Shape{c.batch, c.lk, width});
    auto out = test::poisoned_tensor(Shape{c.batch, c.lq, width});
    auto lse = test::poisoned_tensor(Shape{c.batch, c.heads, c.lq});
    ops::attention(q, k, v, {c.heads, c.causal, c.scale}, out, &lse.view());
    const double scale = c.scale != 0.0f ? c.scale : 1.0 / std::sqrt(double(c.head_dim));
    std::vector<double> expected_lse;
    EXPECT_LT(test::relative_l2(out, attention_reference(q, k, v, c.heads, c.causal, scale, &expected_lse)),
              1e-5);
    EXPECT_LT(test::relative_l2(lse, expected_lse), 1e-6) << "log-sum-exp";
  }
}

// Query, key and value as column ranges of one stacked projection's output [B, L, 3W] (self-attention),
// or key and value of one [B, Lk, 2W] (cross-attention): the same numbers as from dense copies.
TEST(Attention, ReadsColumnRangesOfStackedRows) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t batch = 2, lq = 37, lk = 19, heads = 3, width = heads * 8;
  const auto qkv = test::random_tensor(rng, Shape{batch, lq, 3 * width});
  const auto q = qkv.view().slice(2, 0, width), k = qkv.view().slice(2, width, width);
  const auto v = qkv.view().slice(2, 2 * width, width);
  auto out = test::poisoned_tensor(Shape{batch, lq, width});
  ops::attention(q, k, v, {int(heads), false, 0.0f}, out);
  const double scale = 1.0 / std::sqrt(8.0);
  EXPECT_LT(test::relative_l2(out, attention_reference(OwnedTensor::copy_of(q), OwnedTensor::copy_of(k),
                                                       OwnedTensor::copy_of(v), int(heads), false, scale)),
            1e-5);
  const auto kv = test::random_tensor(rng, Shape{batch, lk, 2 * width});
  const auto cross_k = kv.view().slice(2, 0, width), cross_v = kv.view().slice(2, width, width);
  ops::attention(q, cross_k, cross_v, {int(heads), false, 0.0f}, out);
  EXPECT_LT(
      test::relative_l2(out, attention_reference(OwnedTensor::copy_of(q), OwnedTensor::copy_of(cross_k),
                                                 OwnedTensor::copy_of(cross_v), int(heads), false, scale)),
      1e-5);
  // Not rows: a token range of a batch of two (its samples are not L rows apart), and a strided output.
  const auto ten = test::poisoned_tensor(Shape{batch, 10, width});
  EXPECT_THROW(
      ops::attention(q.slice(1, 0, 10), k.slice(1, 0, 10), v.slice(1, 0, 10), {int(heads), false, 0.0f}, ten),
      Error);
  EXPECT_THROW(ops::attention(q, k, v, {int(heads), false, 0.0f}, qkv.view().slice(2, 0, width)), Error);
}

TEST(Attention, RejectsBadShapes) {
  OwnedTensor q(Shape{1, 4, 6}, DType::kF32), k(Shape{1, 5, 6}, DType::kF32), v(Shape{1, 5, 6}, DType::kF32),
      out(Shape{1, 4, 6}, DType::kF32), k_wide(Shape{1, 5, 8}, DType::kF32);
  EXPECT_THROW(ops::attention(q, k, v, {4, false, 0.0f}, out), Error);  // 6 is not divisible by 4
  EXPECT_THROW(ops::attention(q, k_wide, v, {2, false, 0.0f}, out), Error);
  EXPECT_THROW(ops::attention(q, k, v, {2, false, 0.0f}, k), Error);
  // The log-sum-exp is [B, heads, Lq] f32.
  OwnedTensor lse_short(Shape{1, 2, 3}, DType::kF32), lse_ok(Shape{1, 2, 4}, DType::kF32);
  EXPECT_THROW(ops::attention(q, k, v, {2, false, 0.0f}, out, &lse_short.view()), Error);
  EXPECT_NO_THROW(ops::attention(q, k, v, {2, false, 0.0f}, out, &lse_ok.view()));
}

}  // namespace
}  // namespace hd
