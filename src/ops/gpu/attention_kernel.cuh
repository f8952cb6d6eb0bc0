// What the two flash attention kernels share: their arguments and the tile loads. attention.cu holds
// the kernel on NVIDIA's 32-lane fragment layout (tensor cores, or the portable shuffles);
// attention_mfma.cu the one on AMD's 64-lane MFMA layout.
#pragma once

#include "core/tensor.h"
#include "ops/gpu/common.cuh"

namespace hd::gpu {

inline constexpr int kAttentionPad = 8;  // shared-memory row padding (16 bytes): spreads banks

struct AttentionArgs {
  int heads, lq, lk, head_dim;
  int64_t q_row, kv_row, out_row;  // elements between consecutive tokens
  float scale_log2;                // softmax scale · log2(e): exponentials are exp2
  bool causal;
};

// Rows [row0, row0 + rows) of a [tokens, head_dim] slice into a shared tile with rows of kD + kAttentionPad
// 16-bit elements; zeros past the data (rows at or past `limit`, columns past head_dim). Every thread of
// the block takes part.
template <int kD, int kThreads, class T>
__device__ inline void load_attention_rows(uint16_t* dst, const T* src, int64_t row_stride, int row0, int rows,
                                           int limit, int head_dim) {
  constexpr int kStride = kD + kAttentionPad, kVectors = kD / 8;
  const int vectors = head_dim / 8;  // 16-byte vectors of a row that hold data
  for (int i = int(threadIdx.x); i < rows * kVectors; i += kThreads) {
    const int r = i / kVectors, c = i % kVectors;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row0 + r < limit && c < vectors) value = *reinterpret_cast<const uint4*>(src + int64_t(row0 + r) * row_stride + c * 8);
    *reinterpret_cast<uint4*>(dst + r * kStride + c * 8) = value;
  }
}

// The flash kernel on the MFMA layout (attention_mfma.cu): the instruction on gfx90a; in CUDA builds the
// layout's emulation, which lets NVIDIA GPUs test the AMD kernel's indexing.
void flash_attention_mfma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a);

}  // namespace hd::gpu
