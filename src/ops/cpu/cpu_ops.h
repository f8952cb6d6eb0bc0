// The CPU reference kernels (f32, dense, channels last). Arguments arrive validated by the op API in
// src/ops/*.cpp; these functions only compute. BLAS calls run on the caller's thread and use
// OpenBLAS's own threads; other loops use hd::ThreadPool::global().
#pragma once

#include <cstdint>

#include "ops/op_kinds.h"
#include "ops/ops.h"

namespace hd::ops::cpu {

// C[m, n] = alpha · op(A) · op(B) + beta · C, row-major; lda/ldb/ldc in elements.
void sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, Conv2dParams p,
            const Tensor& out);
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, const Tensor& out);
void upsample_conv2d_phases(const Tensor& w, const Tensor& out);
void batched_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, float alpha,
                    const Tensor& out);
void attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionParams p, const Tensor& out,
               const Tensor* lse);
void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                bool fuse_silu, const Tensor& out, const Tensor* channel_offset);
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out);
void group_statistics(const Tensor& x, int groups, const Tensor& stats);
// parts [P, N, groups, 2], gamma and beta [C] f32 -> affine [N, C, 2] (ops::group_norm_combine).
void group_norm_combine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                        const Tensor& beta, float eps, const Tensor& affine);
void group_norm_apply(const Tensor& x, const Tensor& affine, bool fuse_silu, const Tensor& out);

void activation(const Tensor& x, Activation kind, const Tensor& out);
void geglu(const Tensor& x, GeluApproximation approximation, const Tensor& out);
void softmax_rows(const float* x, float* out, int64_t rows, int64_t cols);

void binary(const Tensor& a, const Tensor& b, BinaryOp op, const Tensor& out);
void scale(const Tensor& x, float factor, const Tensor& out);

void upsample_nearest_2x(const Tensor& x, const Tensor& out);
void concat_channels(const Tensor& a, const Tensor& b, const Tensor& out);
void surround_strip(const Tensor& x, const Tensor* above, const Tensor* below, const Tensor& out);
void timestep_embedding(const Tensor& timesteps, TimestepEmbeddingParams p, const Tensor& out);
void embedding(const Tensor& ids, const Tensor& table, const Tensor& out);

void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, AttentionParams p, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v);
void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         int groups, float eps, bool fuse_silu, const Tensor& grad_x, const Tensor& grad_gamma,
                         const Tensor& grad_beta);
void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, float eps,
                         const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta);
void geglu_backward(const Tensor& grad_out, const Tensor& x, GeluApproximation approximation,
                    const Tensor& grad_x);

// Scalar forms shared by the kernels and the tests' references.
float gelu_erf(float x);
float gelu_tanh(float x);
float silu(float x);

}  // namespace hd::ops::cpu
