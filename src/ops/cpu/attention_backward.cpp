// Attention's gradient on the CPU, one (batch, head, block of queries) at a time, the probabilities
// recomputed as the forward made them (ops/cpu/attention.cpp). With P = softmax(scale · Q Kᵀ):
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ∘ (dP − rowsum(dO ∘ O)),  dQ = scale · dS K,  dK = scale · dSᵀ Q.
// rowsum(dO ∘ O) equals rowsum(P ∘ dP) and costs d, not Lk, per query: why the forward's output is kept.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

namespace {
constexpr int64_t kQueryBlock = 256;
}

void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, AttentionParams p, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v) {
  const int64_t batch = q.dim(0), lq = q.dim(1), lk = k.dim(1), width = q.dim(2);
  const int64_t heads = p.heads, d = width / heads;
  const float scale = p.scale != 0.0f ? p.scale : 1.0f / std::sqrt(float(d));
  const size_t block = size_t(std::min(kQueryBlock, lq) * lk);
  std::vector<float> probabilities(block), grad_scores(block), row_dot(size_t(std::min(kQueryBlock, lq)));
  // Keys and values accumulate over query blocks (beta = 1 below): start from zero.
  std::fill_n(grad_k.ptr<float>(), grad_k.numel(), 0.0f);
  std::fill_n(grad_v.ptr<float>(), grad_v.numel(), 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t q_base = b * lq * width + h * d, k_base = b * lk * width + h * d;
      const float* qh = q.ptr<float>() + q_base;
      const float* kh = k.ptr<float>() + k_base;
      const float* vh = v.ptr<float>() + k_base;
      const float* oh = out.ptr<float>() + q_base;
      const float* doh = grad_out.ptr<float>() + q_base;
      float* dqh = grad_q.ptr<float>() + q_base;
      float* dkh = grad_k.ptr<float>() + k_base;
      float* dvh = grad_v.ptr<float>() + k_base;
      for (int64_t q0 = 0; q0 < lq; q0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, lq - q0);
        float* pr = probabilities.data();
        float* ds = grad_scores.data();
        sgemm(false, true, rows, lk, d, scale, qh + q0 * width, width, kh, width, 0.0f, pr, lk);
        if (p.causal) {
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = q0 + r + 1; j < lk; ++j) pr[r * lk + j] = -std::numeric_limits<float>::infinity();
        }
        softmax_rows(pr, pr, rows, lk);
        sgemm(true, false, lk, d, rows, 1.0f, pr, lk, doh + q0 * width, width, 1.0f, dvh, width);
        sgemm(false, true, rows, lk, d, 1.0f, doh + q0 * width, width, vh, width, 0.0f, ds, lk);
        for (int64_t r = 0; r < rows; ++r) {
          double dot = 0.0;
          for (int64_t j = 0; j < d; ++j) dot += double(doh[(q0 + r) * width + j]) * oh[(q0 + r) * width + j];
          row_dot[size_t(r)] = float(dot);
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < lk; ++j) ds[r * lk + j] = pr[r * lk + j] * (ds[r * lk + j] - row_dot[size_t(r)]);
        sgemm(false, false, rows, d, lk, scale, ds, lk, kh, width, 0.0f, dqh + q0 * width, width);
        sgemm(true, false, lk, d, rows, scale, ds, lk, qh + q0 * width, width, 1.0f, dkh, width);
      }
    }
  }
}

}  // namespace hd::ops::cpu
