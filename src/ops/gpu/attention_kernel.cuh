// What the two flash attention kernels share: their arguments and the tile loads. attention.cu holds
// the kernel on NVIDIA's 32-lane fragment layout (tensor cores, or the portable shuffles);
// attention_amd.cuh the one on AMD's 16x16 layouts (MFMA, WMMA).
#pragma once

#include "core/tensor.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gpu_runtime.h"

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

// The widest head the AMD kernel takes on `layout` without spilling registers (the resource gate,
// tools/rocm/amd_kernel_report.py): gfx11's operands hold 16 values per lane, and at head sizes 128 and
// 160 the output accumulators, Qᵀ and Vᵀ did not fit 256 registers. Wider heads there run the portable
// kernel (attention.cu).
__host__ __device__ constexpr int amd_flash_max_head_dim(MatrixUnit layout) { return layout == MatrixUnit::kAmdWmma11 ? 96 : 160; }

// The flash kernel on AMD's 16x16 layouts (attention_amd.cuh): CDNA's MFMA, RDNA3's and RDNA4's WMMA.
// The instruction on the AMD targets that have it; in CUDA builds the layout's emulation, which lets
// NVIDIA GPUs test the AMD kernel's indexing. Heads up to amd_flash_max_head_dim of the layout.
void flash_attention_mfma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a);
void flash_attention_wmma11(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const AttentionArgs& a);
// Heads whose width is not a multiple of 8, or tensors off a 16-byte boundary (attention_padded.cu):
// attention() on copies whose heads are widened by zeros to a multiple of 8.
void attention_padded(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal, float scale,
                      const Tensor& out, KernelPath path);

void flash_attention_wmma12(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const AttentionArgs& a);

}  // namespace hd::gpu
