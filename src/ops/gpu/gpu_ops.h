// The GPU kernels' launchers as seen from plain C++: the op API dispatches to these.
// Arguments arrive validated by src/ops/*.cpp.
#pragma once

#include <initializer_list>

#include "core/tensor.h"
#include "ops/gpu/matrix_unit.h"
#include "ops/op_kinds.h"
#include "ops/ops.h"

namespace hd::gpu {

// dst = src converted between f32, f16 and bf16, rounding to nearest even (bit-identical to hd::convert).
void convert(const Tensor& src, const Tensor& dst);
// f32 sums of up to three tensors of `count` elements each, one after another in `sums`, narrowed into
// `outs` (f16 or bf16 alike, dense, 16-byte aligned; count a multiple of 8) in one launch: the attention
// gradient's sums of dQ, dK and dV where its query steps are split.
void narrow_stacked(const float* sums, int64_t count, std::initializer_list<const Tensor*> outs);

// Attention for f16/bf16, any head dimension. Heads up to kMaxFlashHeadDim run the flash kernel; wider
// heads (the VAE's single 512-wide head) take the materialised path: scores in scratch memory, softmax,
// then P·V, all on the GEMM kernels, the queries in chunks whose scores fit max_scores_bytes. Both read whole
// 16-byte vectors: a head dimension that is not a multiple of 8 (or a tensor off a 16-byte boundary) runs on
// copies widened by zeros. A forced path (matrix_unit.h) runs the kernel written for that layout: the
// portable shuffles (AMD GPUs without matrix cores), or AMD's 16x16 layouts (CDNA's MFMA, RDNA3's and RDNA4's
// WMMA), the instruction on the AMD GPU that has it, emulated elsewhere. Where lse is not null (dense
// [B, heads, Lq] f32), the flash kernels also write each row's log-sum-exp (ops::attention's), which
// attention_backward then reads instead of recomputing it; the materialised path refuses it (kUnsupported).
inline constexpr int kMaxFlashHeadDim = 160;
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal, float scale,
               const Tensor& out, KernelPath path = KernelPath::kTuned, const Tensor* lse = nullptr);
// The materialised path by itself, its queries in chunks whose scores fit max_scores_bytes but of at least
// min_rows queries: with fewer, P·V's product (rows x head outputs) has too few tiles to fill the GPU. On
// an H100 (2026-11-27) chunks of 4096 queries took the VAE's 16384-token attention from 1.60 to 1.75 ms,
// chunks of 1024 its 65536-token one from 25 to 53 ms. The defaults keep a 1024x1024 picture's scores
// whole (512 MiB) and bound a 2048x2048 one's to 1 GiB (8 GiB whole).
struct MaterialisedChunks {
  size_t max_scores_bytes = size_t(512) << 20;
  int64_t min_rows = 8192;
};
void attention_materialised(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal,
                            float scale, const Tensor& out, MaterialisedChunks chunks = {});

// Matrix products (f16/bf16, f32 accumulation) on the implicit-GEMM kernels, tile shapes autotuned.
void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, ops::Conv2dParams p,
            const Tensor& out);
// The 3x3 convolution of x upsampled 2x (nearest): with phases, its four output phases (gemm.h,
// upsample_conv_gemm) raced against upsampling into scratch and convolving; without, the latter.
void upsample_conv2d(const Tensor& x, const Tensor& w, const Tensor* phases, const Tensor* bias,
                     const Tensor& out);
void upsample_conv2d_phases(const Tensor& w, const Tensor& out);
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, const Tensor& out);
// linear, then GEGLU, as one GEMM problem (gemm.h, GemmGate).
void linear_geglu(const Tensor& x, const Tensor& w, const Tensor* bias, ops::GeluApproximation approximation,
                  const Tensor& out);
void batched_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, float alpha,
                    const Tensor& out);

// Token embedding rows (ids i32 on the device; an id outside the table is an error naming it) and the
// sinusoidal timestep embedding (timesteps f32, output any float dtype).
void embedding(const Tensor& ids, const Tensor& table, const Tensor& out);
void timestep_embedding(const Tensor& timesteps, ops::TimestepEmbeddingParams p, const Tensor& out);

// f32, f16 or bf16 (x, gamma, beta, out and the channel offset [N, C] of one dtype); statistics in f32.
// kAuto chooses among two passes (norm.cu) and the register-held kernels (group_norm_resident.h: one
// kernel, or slices); the others force one (tests, benchmarks), refusing (kUnsupported) a tensor it does
// not take.
enum class GroupNormPath { kAuto, kTwoPass, kResident, kSlices };
void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                bool fuse_silu, const Tensor& out, const Tensor* channel_offset = nullptr,
                GroupNormPath path = GroupNormPath::kAuto);
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out);
// x f32, f16 or bf16; statistics and the affine map f32.
void group_statistics(const Tensor& x, int groups, const Tensor& stats);
void group_norm_apply(const Tensor& x, const Tensor& affine, bool fuse_silu, const Tensor& out);
// parts [P <= 64, N, groups, 2] f32 -> affine [N, C, 2] f32; gamma and beta f32, f16 or bf16.
void group_norm_combine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                        const Tensor& beta, float eps, const Tensor& affine);

// Elementwise, f32/f16/bf16, every operand of one dtype; out may alias an input of its shape.
void activation(const Tensor& x, ops::Activation kind, const Tensor& out);
// out [..., N] = x[..., :N] · gelu(x[..., N:]).
void geglu(const Tensor& x, ops::GeluApproximation approximation, const Tensor& out);

// Attention's gradient (attention_backward.cu, FlashAttention-2's recomputation): f16/bf16 heads of a
// multiple of 8 up to kMaxFlashHeadDim (96 on AMD's 32-lane RDNA GPUs) on dense 16-byte-aligned tensors;
// anything else is kUnsupported (the PyTorch extension then runs PyTorch's gradient, counted). lse: the
// forward's log-sum-exp (attention's), or null to recompute it from Q and K.
bool attention_backward_supported(const Tensor& q, int heads);
void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, int heads, bool causal, float scale, const Tensor& grad_q,
                        const Tensor& grad_k, const Tensor& grad_v, KernelPath path = KernelPath::kTuned,
                        const Tensor* lse = nullptr);

// Gradients (the PyTorch extension's autograd), f32 arithmetic: norm_backward.cu, geglu_backward.cu.
void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                         float eps, bool fuse_silu, const Tensor& grad_x, const Tensor& grad_gamma,
                         const Tensor& grad_beta);
void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, float eps,
                         const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta);
void geglu_backward(const Tensor& grad_out, const Tensor& x, ops::GeluApproximation approximation,
                    const Tensor& grad_x);
// out = a + b or a · b with numpy broadcasting (rank up to 8).
void binary(const Tensor& a, const Tensor& b, ops::BinaryOp op, const Tensor& out);
void scale(const Tensor& x, float factor, const Tensor& out);
// Softmax over the last dimension (out may alias x). With causal_queries > 0, rows are queries
// 0..causal_queries-1 over and over, and column j of query i counts only where j <= i (the rest are 0).
void softmax(const Tensor& x, const Tensor& out, int64_t causal_queries = 0);

// Layout, any dtype (bits are moved, not converted): [N, H, W, C] -> [N, 2H, 2W, C], and
// [..., Ca] ++ [..., Cb] -> [..., Ca + Cb].
void upsample_nearest_2x(const Tensor& x, const Tensor& out);
void concat_channels(const Tensor& a, const Tensor& b, const Tensor& out);
void surround_strip(const Tensor& x, const Tensor* above, const Tensor* below, const Tensor& out);
// dst = src as dense runs of `run` bytes at up to three levels of byte strides (innermost first), in one
// kernel: ops::copy between views on one device.
struct StridedRuns {
  int64_t run = 0;
  int levels = 0;
  int64_t size[3] = {1, 1, 1}, src_stride[3] = {}, dst_stride[3] = {};
};
void copy_runs(const void* src, void* dst, const StridedRuns& runs, const Device& device);

// The sampler ops (arguments checked by ops::sampler_input / ops::sampler_step; null where unused).
void sampler_input(const Tensor& sample, float divisor, const Tensor& out);
void sampler_step(const ops::SamplerUpdate& u, const Tensor& prediction, const Tensor& sample, const Tensor* noise,
                  const Tensor* previous_x0, const Tensor* x0);

}  // namespace hd::gpu
