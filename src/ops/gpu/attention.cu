// Flash attention forward (FlashAttention-2's scheme) on NVIDIA's fragment layout: each block takes 64
// queries of one (batch, head) and streams the keys and values through shared memory in tiles, keeping a
// running row maximum and sum (online softmax), so that no Lq x Lk matrix exists anywhere. Scores and the
// output accumulate in f32 on the matrix-fragment layer (mma.cuh); inputs and output are f16 or bf16. On
// NVIDIA sm_80+ the next key/value tile is copied in the background (async_copy.cuh) while the current
// one is used. attention() below picks among this kernel, the one for AMD's MFMA and WMMA layouts
// (attention_amd.cuh) and Hopper's warpgroup kernel (nvidia/attention_wgmma.cu).
#include <algorithm>
#include <cmath>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/mma.cuh"
#include "ops/gpu/nvidia/attention_wgmma.h"
#include "ops/tuning/autotuner.h"

namespace hd::gpu {

namespace {

// Every loop over a register array below is unrolled: left as loops, clang kept the arrays (the running
// maxima and sums, the scores) in scratch memory on AMD targets, which the resource gate refuses
// (tools/rocm/amd_kernel_report.py); nvcc unrolled them already.
//
// kD: head dimension rounded up to a multiple of 16 (the padding is zero) for Q·Kᵀ; kDV: rounded up to
// a multiple of 8 for P·V and the output (40 for SD1.5's heads, where kD is 48: the product skips the
// padding's columns). kKeyTile keys per step. kStages: 1 loads each key/value tile and then works on
// it; 2 (NVIDIA sm_80+) copies the next tile into a second buffer asynchronously while the tensor units
// work on the current one. kGroups fragment groups of 32 lanes, 16 queries each: every key/value tile a
// block loads serves 16 · kGroups queries.
template <class T, int kD, int kDV, int kKeyTile, bool kPortable, int kStages, int kGroups, bool kWithLse>
__global__ void __launch_bounds__(kGroups* kFragmentLanes)
    flash_attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           T* __restrict__ out, AttentionArgs a) {
  constexpr int kStride = kD + kAttentionPad;  // in 16-bit elements
  constexpr int kQueryTile = 16 * kGroups, kThreads = kGroups * kFragmentLanes;
  extern __shared__ uint4 smem_raw[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem_raw);
  const auto k_tile = [&](int stage) { return q_s + (kQueryTile + 2 * stage * kKeyTile) * kStride; };
  const auto v_tile = [&](int stage) { return q_s + (kQueryTile + (2 * stage + 1) * kKeyTile) * kStride; };

  const int group = int(threadIdx.x) / kFragmentLanes, lane = int(threadIdx.x) % kFragmentLanes;
  const int g = lane / 4, t = lane % 4;
  const int b = int(blockIdx.y) / a.heads, h = int(blockIdx.y) % a.heads;
  const int q0 = int(blockIdx.x) * kQueryTile;
  const T* q_base = q + int64_t(b) * a.lq * a.q_row + int64_t(h) * a.head_dim;
  const T* k_base = k + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;
  const T* v_base = v + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;

  const auto load_tile = [&](uint16_t* dst, const T* src, int64_t row_stride, int row0, int limit) {
    load_attention_rows<kD, kThreads, kKeyTile>(dst, src, row_stride, row0, limit, a.head_dim);
  };
  const auto load_tile_async = [&](uint16_t* dst, const T* src, int64_t row_stride, int row0, int limit) {
    load_attention_rows_async<kD, kThreads, kKeyTile>(dst, src, row_stride, row0, limit, a.head_dim);
  };
  const auto pair_at = [](const uint16_t* s, int row, int col) {  // two neighbours of one row
    return *reinterpret_cast<const uint32_t*>(s + row * kStride + col);
  };

  load_attention_rows<kD, kThreads, kQueryTile>(q_s, q_base, a.q_row, q0, a.lq, a.head_dim);
  __syncthreads();
  FragmentA q_frag[kD / 16];
  const int row = group * 16 + g;  // this lane's first query row in the tile; the second is row + 8
#pragma unroll
  for (int kc = 0; kc < kD / 16; ++kc) {
    q_frag[kc].r[0] = pair_at(q_s, row, kc * 16 + 2 * t);
    q_frag[kc].r[1] = pair_at(q_s, row + 8, kc * 16 + 2 * t);
    q_frag[kc].r[2] = pair_at(q_s, row, kc * 16 + 8 + 2 * t);
    q_frag[kc].r[3] = pair_at(q_s, row + 8, kc * 16 + 8 + 2 * t);
  }

  FragmentC o[kDV / 8];
#pragma unroll
  for (auto& f : o) f = FragmentC{{0.f, 0.f, 0.f, 0.f}};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int key_end = a.causal ? min(a.lk, q0 + kQueryTile) : a.lk;

  if constexpr (kStages == 2) {
    load_tile_async(k_tile(0), k_base, a.kv_row, 0, a.lk);
    load_tile_async(v_tile(0), v_base, a.kv_row, 0, a.lk);
    async_commit();
  }
  for (int k0 = 0, tile = 0; k0 < key_end; k0 += kKeyTile, ++tile) {
    const int stage = kStages == 2 ? tile & 1 : 0;
    if constexpr (kStages == 2) {
      // The other stage was last read in the previous tile, which every thread finished before that
      // tile's closing barrier.
      if (k0 + kKeyTile < key_end) {
        load_tile_async(k_tile(stage ^ 1), k_base, a.kv_row, k0 + kKeyTile, a.lk);
        load_tile_async(v_tile(stage ^ 1), v_base, a.kv_row, k0 + kKeyTile, a.lk);
      }
      async_commit();
      async_wait<1>();  // this tile has landed (for this thread) ...
      __syncthreads();  // ... and for every thread
    } else {
      __syncthreads();  // the previous tile is no longer read
      load_tile(k_tile(0), k_base, a.kv_row, k0, a.lk);
      load_tile(v_tile(0), v_base, a.kv_row, k0, a.lk);
      __syncthreads();
    }
    const uint16_t* k_s = k_tile(stage);
    const uint16_t* v_s = v_tile(stage);

    FragmentC s[kKeyTile / 8];
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j) {
      s[j] = FragmentC{{0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int kc = 0; kc < kD / 16; ++kc) {
        mma_16x8x16<T, kPortable>(s[j], q_frag[kc], load_b<kPortable>(k_s, kStride, j * 8, kc * 16));
      }
    }
    // The softmax works on raw scores: the scale is folded into the exponent (one fused multiply-add a
    // score), and the running maximum m is kept unscaled (the scale is positive). A tile with every key
    // in range and no causal mask skips the masking and the checks for rows that saw only masked keys.
    const bool unmasked = !a.causal && k0 + kKeyTile <= a.lk;
    float tile_max[2] = {-INFINITY, -INFINITY};
    if (unmasked) {
#pragma unroll
      for (int j = 0; j < kKeyTile / 8; ++j) {
        tile_max[0] = fmaxf(tile_max[0], fmaxf(s[j].r[0], s[j].r[1]));
        tile_max[1] = fmaxf(tile_max[1], fmaxf(s[j].r[2], s[j].r[3]));
      }
    } else {
#pragma unroll
      for (int j = 0; j < kKeyTile / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = k0 + j * 8 + 2 * t + (e & 1), query = q0 + row + (e >= 2 ? 8 : 0);
          if (key >= a.lk || (a.causal && key > query)) s[j].r[e] = -INFINITY;
          tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j].r[e]);
        }
      }
    }
    float alpha[2], m_scaled[2];
    online_softmax_step<kFragmentLanes, kPortable>(tile_max, m, l, a.scale_log2, alpha, m_scaled);
#pragma unroll
    for (auto& f : o) {
      f.r[0] *= alpha[0], f.r[1] *= alpha[0];
      f.r[2] *= alpha[1], f.r[3] *= alpha[1];
    }
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // A masked score is -inf, and 2^-inf = 0 (a row with m = -inf has m_scaled 0 here).
        const float p = fast_exp2<kPortable>(fmaf(s[j].r[e], a.scale_log2, -m_scaled[e / 2]));
        s[j].r[e] = p;
        l[e / 2] += p;
      }
    }
    // O += P · V: the scores' accumulator layout is the A layout of the next product, two key tiles at a time.
#pragma unroll
    for (int kc = 0; kc < kKeyTile / 16; ++kc) {
      const FragmentC& lo = s[2 * kc];
      const FragmentC& hi = s[2 * kc + 1];
      const FragmentA p{{pack2<T>(lo.r[0], lo.r[1]), pack2<T>(lo.r[2], lo.r[3]), pack2<T>(hi.r[0], hi.r[1]),
                         pack2<T>(hi.r[2], hi.r[3])}};
#pragma unroll
      for (int n = 0; n < kDV / 8; ++n)
        mma_16x8x16<T, kPortable>(o[n], p, load_b_transposed<kPortable>(v_s, kStride, kc * 16, n * 8));
    }
    if constexpr (kStages == 2) __syncthreads();  // this stage is refilled at the top of the tile after next
  }

  store_attention_rows<kDV, kFragmentLanes, kWithLse>(out, a, b, h, q0 + row, t, m, l,
                                                      [&](int n, int e) HD_INLINE { return o[n].r[e]; });
}

template <class T, int kD, bool kPortable, int kDV, int kGroups>
void launch_groups(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  constexpr int kKeyTile = kD <= 64 ? 64 : 32;  // keeps shared memory within 64 KB (AMD's limit)
  // Two key/value stages where copies can run in the background (NVIDIA sm_80+ tensor-core path); one
  // on the portable path, whose shared memory then fits AMD's 64 KB at every head size.
  constexpr int kStages = kPortable ? 1 : 2;
  constexpr int kQueryTile = 16 * kGroups;
  const size_t smem = size_t(kQueryTile + 2 * kStages * kKeyTile) * (kD + kAttentionPad) * sizeof(uint16_t);
  // With and without the log-sum-exp on the tensor cores; the portable kernel tests a.lse
  // (store_attention_rows).
  const auto kernel = [&] {
    if constexpr (kPortable)
      return flash_attention_kernel<T, kD, kDV, kKeyTile, kPortable, kStages, kGroups, true>;
    else
      return a.lse != nullptr
                 ? flash_attention_kernel<T, kD, kDV, kKeyTile, kPortable, kStages, kGroups, true>
                 : flash_attention_kernel<T, kD, kDV, kKeyTile, kPortable, kStages, kGroups, false>;
  }();
  allow_dynamic_shared_memory(kernel, smem, q.device.index);
  const dim3 grid(unsigned((a.lq + kQueryTile - 1) / kQueryTile), unsigned(q.dim(0) * a.heads));
  kernel<<<grid, kGroups * kFragmentLanes, smem, current_stream()>>>(
      static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(v.data),
      static_cast<T*>(out.data), a);
  HD_GPU_CHECK_LAUNCH();
}

// 128 queries a block (8 groups) for the narrowest heads (SD1.5's 40) where there are enough queries
// for two such blocks per multiprocessor: every block reads all of its head's keys and values from L2,
// and twice the queries a block halves that traffic (0.259 -> 0.242 ms at SD1.5's 64x64 level on an
// H100; at head size 64 it was slower, 0.41 -> 0.54 ms, so those keep 64). 64 queries elsewhere, and on
// the portable path, whose shared memory must fit AMD's 64 KB.
template <class T, int kD, bool kPortable, int kDV = kD>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  if constexpr (!kPortable && kD <= 48) {
    if (int64_t(a.lq) * q.dim(0) * a.heads >= 128 * 2 * int64_t(multiprocessor_count(q.device.index)))
      return launch_groups<T, kD, kPortable, kDV, 8>(q, k, v, out, a);
  }
  launch_groups<T, kD, kPortable, kDV, 4>(q, k, v, out, a);
}

template <class T, bool kPortable>
void dispatch_head_dim(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  with_head_sizes(a.head_dim, [&]<int kD, int kDV>() { launch<T, kD, kPortable, kDV>(q, k, v, out, a); });
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal, float scale,
               const Tensor& out, KernelPath path, const Tensor* lse) {
  const int head_dim = int(q.dim(2) / heads);
  HD_CHECK_KIND(q.dtype == DType::kF16 || q.dtype == DType::kBF16, ErrorKind::kUnsupported,
                "attention: the GPU kernel takes f16 or bf16, got ", dtype_name(q.dtype));
  // The kernels read and write whole 16-byte vectors of a head, and step K and V by one row stride:
  // other widths, alignments and strides are copied into heads that fit (attention_padded.cu). Tokens
  // are rows (ops::attention's check_rows), which may be wider than the heads (stacked projections).
  bool vectors = head_dim % 8 == 0 && k.strides[1] == v.strides[1];
  for (const Tensor* t : {&q, &k, &v, &out})
    vectors = vectors && is_aligned(t->data, 16) && t->strides[1] % 8 == 0;
  if (!vectors) return attention_padded(q, k, v, heads, causal, scale, out, path, lse);
  if (head_dim > kMaxFlashHeadDim) {
    HD_CHECK_KIND(lse == nullptr, ErrorKind::kUnsupported,
                  "attention: the log-sum-exp is written for heads up to ", kMaxFlashHeadDim,
                  " (the flash kernels), not for heads of ", head_dim);
    return attention_materialised(q, k, v, heads, causal, scale, out);
  }
  if (q.dim(1) == 0) return;
  AttentionArgs a{heads,          int(q.dim(1)),
                  int(k.dim(1)),  head_dim,
                  q.strides[1],   k.strides[1],
                  out.strides[1], (scale > 0.f ? scale : 1.f / std::sqrt(float(head_dim))) * kLog2e,
                  causal,         lse != nullptr ? lse->ptr<float>() : nullptr};
  HD_GPU_CHECK(cudaSetDevice(q.device.index));
  // This file's kernel is written for NVIDIA's 32-lane fragment layout (tensor cores, or the portable
  // shuffles AMD GPUs without matrix cores run); AMD's MFMA and WMMA layouts have a kernel of their own.
  // Heads wider than an AMD layout's kernel takes run the portable kernel, there and in its tests.
  const MatrixUnit unit = device_matrix_unit(q.device.index);
  // The AMD layout to run, if any: the one a test forces, or on the tuned path the device's own.
  MatrixUnit amd = amd_layout_of(path);
  if (path == KernelPath::kTuned && unit != MatrixUnit::kNvidiaMma) amd = unit;
  if (amd != MatrixUnit::kNone && head_dim <= amd_flash_max_head_dim(amd)) {
    if (amd == MatrixUnit::kAmdMfma) return flash_attention_mfma(q, k, v, out, a);
    if (amd == MatrixUnit::kAmdWmma11) return flash_attention_wmma11(q, k, v, out, a);
    return flash_attention_wmma12(q, k, v, out, a);
  }
#if defined(HD_WITH_WGMMA)
  // Hopper's warpgroup kernel where the device has it (nvidia/attention_wgmma.cu); the fragment-layer
  // kernel below on every other NVIDIA GPU, and where a test asks for it (KernelPath::kFragments) or the
  // run does (--kernels fragments).
  if (path == KernelPath::kTuned && head_dim <= kWgmmaAttentionMaxHeadDim &&
      has_warpgroup_mma(q.device.index) && ops::kernel_choice() != ops::KernelChoice::kFragments)
    return flash_attention_wgmma(q, k, v, out, a);
#endif
#if defined(HD_GPU_HIP)
  // AMD runs this layout as the portable shuffles only: the tensor-core instances are not built for it.
  if (q.dtype == DType::kF16) return dispatch_head_dim<__half, true>(q, k, v, out, a);
  dispatch_head_dim<Bf16, true>(q, k, v, out, a);
#else
  const bool portable = path == KernelPath::kPortable || unit != MatrixUnit::kNvidiaMma;
  if (q.dtype == DType::kF16) {
    portable ? dispatch_head_dim<__half, true>(q, k, v, out, a) : dispatch_head_dim<__half, false>(q, k, v, out, a);
  } else {
    portable ? dispatch_head_dim<Bf16, true>(q, k, v, out, a) : dispatch_head_dim<Bf16, false>(q, k, v, out, a);
  }
#endif
}

}  // namespace hd::gpu
