// Attention's gradient on Hopper's warpgroup instructions (attention_gradient_wgmma.cu): NVIDIA compute
// capability 9.0 only, built for sm_90a; attention_backward.cu calls it there and its fragment-layer
// kernel elsewhere.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hd::gpu {

struct GradientArgs;

// The widest head the warpgroup gradient takes: dK's and dV's accumulators of wider heads, beside the
// scores', do not fit a thread's registers (SD1.5's 160-wide heads run the fragment-layer kernel).
inline constexpr int kWgmmaGradientMaxHeadDim = 96;

// The floats dQ's f32 sums take. The kernel keeps them in tiles: for each (batch·head), ceil(Lq / 64) tiles
// of 64 queries x the tile's head width (head_dim rounded up as with_head_sizes rounds it), each in fragment
// order (dq_tile_index_of_columns), so that a step's dQ is added by one bulk reduction.
int64_t wgmma_gradient_dq_tiles_size(int64_t batch_heads, int lq, int head_dim);
// dQ (f16 or bf16, dense [B, Lq, heads·D]) from its tiled f32 sums, times the softmax scale.
void narrow_dq_tiles(const float* sums, const Tensor& grad_q, const GradientArgs& ga);

// dK and dV (stored into grad_k and grad_v) and dQ's f32 sums (added into grad_q_sums, in tiles as above,
// zeroed by the caller; without the softmax scale, which narrow_dq_tiles applies), from the forward's
// inputs, dO, each row's log-sum-exp (natural log, [B, heads, Lq]) and delta = rowsum(dO ∘ O) ([B, heads,
// Lq]). f16 or bf16 dense 16-byte-aligned tensors, heads of a multiple of 8 up to kWgmmaGradientMaxHeadDim,
// on a device with has_warpgroup_mma.
void attention_gradient_wgmma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad_out,
                              const float* lse, const float* delta, float* grad_q_sums, const Tensor& grad_k,
                              const Tensor& grad_v, const GradientArgs& ga);

}  // namespace hd::gpu
