// Flash attention forward on Hopper's warpgroup instructions (attention_wgmma.cu): NVIDIA compute
// capability 9.0 only, built for sm_90a; attention.cu calls it where it runs and the fragment-layer kernel
// elsewhere.
#pragma once

#include "core/tensor.h"

namespace hd::gpu {

struct AttentionArgs;

// The widest head the warpgroup kernel takes (wider heads run the fragment-layer kernel).
inline constexpr int kWgmmaAttentionMaxHeadDim = 160;

// out = softmax(q kᵀ · scale) v per head, as attention() (gpu_ops.h); heads of a multiple of 8 up to
// kWgmmaAttentionMaxHeadDim, 16-byte aligned tensors, on a device with has_warpgroup_mma.
void flash_attention_wgmma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a);

}  // namespace hd::gpu
