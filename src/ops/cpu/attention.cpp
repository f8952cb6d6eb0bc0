// Attention on the CPU, one (batch, head, block of queries) at a time: S = scale · Q Kᵀ, softmax, S V.
// Blocking the queries bounds the score matrix to kQueryBlock x Lk floats; the full Lq x Lk matrix of a
// 4096-token self-attention never exists.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

namespace {

constexpr int64_t kQueryBlock = 256;

// Each row's log-sum-exp of its scaled scores (natural log; +inf for a row with every key masked).
void row_log_sum_exp(const float* scores, int64_t rows, int64_t cols, float* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = scores + r * cols;
    const float max = *std::max_element(row, row + cols);
    if (max == -std::numeric_limits<float>::infinity()) {
      lse[r] = std::numeric_limits<float>::infinity();
      continue;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(double(row[j]) - max);
    lse[r] = float(max + std::log(sum));
  }
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionParams p, const Tensor& out,
               const Tensor* lse) {
  const int64_t batch = q.dim(0), lq = q.dim(1), lk = k.dim(1), width = q.dim(2);
  const int64_t heads = p.heads, d = width / heads;
  // Tokens are rows: q, k and v may be column ranges of wider ones (ops::attention's check_rows).
  const int64_t q_row = q.strides[1], k_row = k.strides[1], v_row = v.strides[1];
  const float scale = p.scale != 0.0f ? p.scale : 1.0f / std::sqrt(float(d));
  std::vector<float> scores(size_t(std::min(kQueryBlock, lq) * lk));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q.ptr<float>() + b * lq * q_row + h * d;
      const float* kh = k.ptr<float>() + b * lk * k_row + h * d;
      const float* vh = v.ptr<float>() + b * lk * v_row + h * d;
      float* oh = out.ptr<float>() + b * lq * width + h * d;
      for (int64_t q0 = 0; q0 < lq; q0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, lq - q0);
        sgemm(false, true, rows, lk, d, scale, qh + q0 * q_row, q_row, kh, k_row, 0.0f, scores.data(), lk);
        if (p.causal) {
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = q0 + r + 1; j < lk; ++j) scores[r * lk + j] = -std::numeric_limits<float>::infinity();
        }
        if (lse != nullptr)
          row_log_sum_exp(scores.data(), rows, lk, lse->ptr<float>() + (b * heads + h) * lq + q0);
        softmax_rows(scores.data(), scores.data(), rows, lk);
        sgemm(false, false, rows, d, lk, 1.0f, scores.data(), lk, vh, v_row, 0.0f, oh + q0 * width, width);
      }
    }
  }
}

}  // namespace hd::ops::cpu
