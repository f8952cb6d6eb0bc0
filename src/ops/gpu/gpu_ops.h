// The GPU kernels' launchers as seen from plain C++: the op API dispatches to these.
// Arguments arrive validated by src/ops/*.cpp.
#pragma once

#include "core/tensor.h"
#include "ops/op_kinds.h"
#include "ops/ops.h"

namespace hd::gpu {

// dst = src converted between f32, f16 and bf16, rounding to nearest even (bit-identical to hd::convert).
void convert(const Tensor& src, const Tensor& dst);

// Flash attention forward for f16/bf16, head dimension a multiple of 8 up to kMaxAttentionHeadDim.
// `kPortable` forces the matrix-fragment layer's portable path (the one AMD targets use), so that it
// can be tested on NVIDIA too.
inline constexpr int kMaxAttentionHeadDim = 160;
enum class AttentionPath { kFastest, kPortable };
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal, float scale,
               const Tensor& out, AttentionPath path = AttentionPath::kFastest);

// f32, f16 or bf16 (x, gamma, beta and out of one dtype); statistics in f32.
void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps, bool fuse_silu,
                const Tensor& out);
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out);

// Elementwise, f32/f16/bf16, every operand of one dtype; out may alias an input of its shape.
void activation(const Tensor& x, ops::Activation kind, const Tensor& out);
// out [..., N] = x[..., :N] · gelu(x[..., N:]).
void geglu(const Tensor& x, ops::GeluApproximation approximation, const Tensor& out);
// out = a + b or a · b with numpy broadcasting (rank up to 8).
void binary(const Tensor& a, const Tensor& b, ops::BinaryOp op, const Tensor& out);
void scale(const Tensor& x, float factor, const Tensor& out);
// Softmax over the last dimension (out may alias x).
void softmax(const Tensor& x, const Tensor& out);

// Layout, any dtype (bits are moved, not converted): [N, H, W, C] -> [N, 2H, 2W, C], and
// [..., Ca] ++ [..., Cb] -> [..., Ca + Cb].
void upsample_nearest_2x(const Tensor& x, const Tensor& out);
void concat_channels(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace hd::gpu
