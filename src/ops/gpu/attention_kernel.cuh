// What the flash attention kernels share: their arguments, the exponential and the tile loads.
// attention.cu holds the kernel on NVIDIA's 32-lane fragment layout (tensor cores, or the portable
// shuffles); attention_amd.cuh the one on AMD's 16x16 layouts (MFMA, WMMA); nvidia/attention_wgmma.cu
// Hopper's warpgroup kernel.
#pragma once

#include "core/tensor.h"
#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

inline constexpr int kAttentionPad = 8;  // shared-memory row padding (16 bytes): spreads banks
inline constexpr float kLog2e = 1.4426950408889634f;  // the softmax's exponentials are exp2

struct AttentionArgs {
  int heads, lq, lk, head_dim;
  int64_t q_row, kv_row, out_row;  // elements between consecutive tokens
  float scale_log2;                // softmax scale · log2(e): exponentials are exp2
  bool causal;
  // Where not null, the forward also writes each row's log-sum-exp of the scaled scores (natural log,
  // as SDPA's; +inf for a row with no key), [batch, heads, lq] f32: what the gradient would otherwise
  // recompute from Q and K.
  float* lse = nullptr;
};

// A row's log-sum-exp (natural log) from the online softmax's raw maximum m and its sum l of
// 2^(s·scale_log2 − m·scale_log2).
__device__ inline float row_log_sum_exp(float m, float l, float scale_log2) {
  return l > 0.f ? (m * scale_log2 + log2f(l)) * 0.6931471805599453f : INFINITY;
}

// The head sizes the NVIDIA-layout flash kernels (forward, backward, Hopper's) are built for: a head of
// width d (a multiple of 8, at most 160) runs as f.template operator()<kD, kDV>(), kD its width rounded up
// to 16 for Q·Kᵀ (zeros padding it), kDV to 8 for P·V and the output (40 for SD1.5's heads, where kD is 48).
template <class F>
void with_head_sizes(int d, F&& f) {
  if (d <= 32) return f.template operator()<32, 32>();
  if (d <= 40) return f.template operator()<48, 40>();  // SD1.5's heads
  if (d <= 48) return f.template operator()<48, 48>();
  if (d <= 64) return f.template operator()<64, 64>();
  if (d <= 80) return f.template operator()<80, 80>();
  if (d <= 96) return f.template operator()<96, 96>();
  if (d <= 128) return f.template operator()<128, 128>();
  f.template operator()<160, 160>();
}

// 2^x: on NVIDIA's tensor-core paths the special-function unit's approximation (relative error below
// 2^-22, far inside f16/bf16 rounding), without the range handling exp2f adds; elsewhere exp2f.
template <bool kPortable = false>
__device__ inline float fast_exp2(float x) {
#if defined(__CUDA_ARCH__) && !defined(HD_GPU_HIP)
  if constexpr (!kPortable) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
#endif
  return exp2f(x);
}

// One step of the online softmax for the two rows a lane holds (rows r and r + 8 of a 16-row fragment,
// each spread over 4 lanes of kLanes), given the lane's maximum of this tile's raw scores per row: the new
// running maxima m, the factor alpha that rescales what was summed before (l here, O by the caller), and
// the maxima already scaled for the exponent (m_scaled). A row that has seen only masked keys keeps
// m = -inf: its weights stay 0 and nothing rescales (m is finite after an unmasked tile, and 2^-inf = 0
// for the first one).
template <int kLanes, bool kPortable = false>
__device__ inline void online_softmax_step(float (&tile_max)[2], float (&m)[2], float (&l)[2],
                                           float scale_log2, float (&alpha)[2], float (&m_scaled)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    tile_max[i] = fmaxf(tile_max[i], shuffle_xor(tile_max[i], 1, kLanes));
    tile_max[i] = fmaxf(tile_max[i], shuffle_xor(tile_max[i], 2, kLanes));
    const float m_new = fmaxf(m[i], tile_max[i]);
    alpha[i] = m_new == -INFINITY ? 1.f : fast_exp2<kPortable>((m[i] - m_new) * scale_log2);
    m[i] = m_new;
    m_scaled[i] = m_new == -INFINITY ? 0.f : m_new * scale_log2;
    l[i] *= alpha[i];
  }
}

// The end of the online softmax: each row's sum gathered from its 4 lanes, then the two rows this lane
// holds (query and query + 8) divided by it and stored, two columns (8n + 2t, + 1) of each 8-column group
// n a store; o(n, e) is the lane's accumulator e of group n (e / 2: the row, e % 2: the column). m: the
// rows' raw maxima, for the log-sum-exp into a.lse where kWithLse and a.lse is set. NVIDIA's tensor-core
// kernels are built with and without it (the launch picks by a.lse): with the pointer tested at run time
// only, ptxas allocated the inference kernels' registers differently and they took 1-36% longer on an
// H200 (2026-11-27). The portable kernel, which AMD builds for seven targets, keeps one build and the
// run-time test.
template <int kDV, int kLanes, bool kWithLse, class T, class Accumulator>
__device__ inline void store_attention_rows(T* out, const AttentionArgs& a, int b, int h, int query, int t,
                                            const float (&m)[2], float (&l)[2], Accumulator o) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += shuffle_xor(l[i], 1, kLanes);
    l[i] += shuffle_xor(l[i], 2, kLanes);
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (query + 8 * half >= a.lq) continue;
    if (kWithLse && a.lse != nullptr && t == 0)
      a.lse[(int64_t(b) * a.heads + h) * a.lq + query + 8 * half] =
          row_log_sum_exp(m[half], l[half], a.scale_log2);
    const float inv = l[half] > 0.f ? 1.f / l[half] : 0.f;
    T* dst = out + (int64_t(b) * a.lq + query + 8 * half) * a.out_row + int64_t(h) * a.head_dim;
#pragma unroll
    for (int n = 0; n < kDV / 8; ++n) {
      const int col = n * 8 + 2 * t;
      if (col >= a.head_dim) continue;  // head_dim is a multiple of 8, so col + 1 is in range too
      *reinterpret_cast<uint32_t*>(dst + col) = pack2<T>(o(n, 2 * half) * inv, o(n, 2 * half + 1) * inv);
    }
  }
}

// Calls copy(r, c) for each 16-byte vector (row r < kRows, vector c < kD / 8) of a tile that this thread
// copies; every thread of the block takes part. Where kD / 8 rounded up to a power of two (kLanes) divides
// the threads, each thread has one fixed vector of every (threads / kLanes)-th row, so that its addresses
// are one computation plus constant steps. As a loop over i = thread, thread + threads, ... (its count
// unknown to the compiler) the index and bounds arithmetic took more instructions than the softmax in
// Hopper's attention kernel (SASS, 2026-11-27), which copies its tiles the same way now. On an H100 the
// fragment-layer kernel (attention.cu) went from 0.240 to 0.222 ms on SD1.5's 64x64 self-attention, 0.042
// to 0.033 at 32x32 (D80), 0.426 to 0.377 on SDXL's 64x64 (D64). kFixed false keeps the loop: the
// gradient kernel, whose dK and dV accumulators fill the registers, spilled 72 bytes holding the fixed
// addresses. AMD targets keep the loop too: with the fixed addresses clang 22 gave some of their attention
// kernels up to 29 more VGPRs and one wave less occupancy (tools/rocm/amd_kernel_report.py), and no AMD GPU
// was there to tell whether it pays.
template <int kD, int kThreads, int kRows, bool kFixed = true, class Copy>
__device__ __forceinline__ void for_each_tile_vector(Copy copy) {
  constexpr int kVectors = kD / 8;
  constexpr int kLanes = kVectors <= 4 ? 4 : kVectors <= 8 ? 8 : 16;
#if defined(HD_GPU_HIP)
  constexpr bool kFixedHere = false;
#else
  constexpr bool kFixedHere = kFixed;
#endif
  // Not for heads of 160 (20 vectors in 32 lanes): on an H100 their kernel slowed from 0.014 to 0.018 ms.
  if constexpr (kFixedHere && kVectors <= 16 && kThreads % kLanes == 0 && kRows % (kThreads / kLanes) == 0) {
    constexpr int kStep = kThreads / kLanes;
    const int c = int(threadIdx.x) % kLanes, r = int(threadIdx.x) / kLanes;
    if (c >= kVectors) return;
#pragma unroll
    for (int j = 0; j < kRows / kStep; ++j) copy(r + j * kStep, c);
  } else {
    for (int i = int(threadIdx.x); i < kRows * kVectors; i += kThreads) copy(i / kVectors, i % kVectors);
  }
}

// Rows [row0, row0 + kRows) of a [tokens, head_dim] slice into a shared tile with rows of kD + kAttentionPad
// 16-bit elements; zeros past the data (rows at or past `limit`, columns past head_dim). Every thread of
// the block takes part.
template <int kD, int kThreads, int kRows, bool kFixed = true, class T>
__device__ inline void load_attention_rows(uint16_t* dst, const T* src, int64_t row_stride, int row0,
                                           int limit, int head_dim) {
  constexpr int kStride = kD + kAttentionPad;
  const int vectors = head_dim / 8;  // 16-byte vectors of a row that hold data
  for_each_tile_vector<kD, kThreads, kRows, kFixed>([&](int r, int c) HD_INLINE {
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row0 + r < limit && c < vectors)
      value = *reinterpret_cast<const uint4*>(src + int64_t(row0 + r) * row_stride + c * 8);
    *reinterpret_cast<uint4*>(dst + r * kStride + c * 8) = value;
  });
}

// The same rows copied in the background (async_copy.cuh): they are there after async_commit, async_wait
// and a barrier.
template <int kD, int kThreads, int kRows, bool kFixed = true, class T>
__device__ inline void load_attention_rows_async(uint16_t* dst, const T* src, int64_t row_stride, int row0,
                                                 int limit, int head_dim) {
  constexpr int kStride = kD + kAttentionPad;
  const int vectors = head_dim / 8;
  for_each_tile_vector<kD, kThreads, kRows, kFixed>([&](int r, int c) HD_INLINE {
    const bool valid = row0 + r < limit && c < vectors;
    copy_16_async(dst + r * kStride + c * 8, valid ? src + int64_t(row0 + r) * row_stride + c * 8 : src,
                  valid);
  });
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
// attention() on copies whose heads are widened by zeros to a multiple of 8 (the zeros change no score,
// so lse, where not null, is written as it is).
void attention_padded(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal, float scale,
                      const Tensor& out, KernelPath path, const Tensor* lse);

void flash_attention_wmma12(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const AttentionArgs& a);

}  // namespace hd::gpu
