// Flash attention forward on AMD's 16x16 fragment layouts (mma.cuh): CDNA's MFMA (64 lanes) and RDNA3's
// and RDNA4's WMMA (32 lanes). The same online softmax as attention.cu, arranged for layouts whose C
// fragment gives each lane one column: the scores are computed transposed, Sᵀ = K · Qᵀ, so that each
// lane's accumulators belong to one query, and the probabilities Pᵀ become the B operand of
// Oᵀ = Vᵀ · Pᵀ (register for register on MFMA; on WMMA after one exchange between the half-waves,
// Frag::b_from_accumulators). One query per lane means the running maximum and sum are one value per
// lane, reduced over the lanes that share the query (Frag::column_max / column_sum).
//
// On AMD each layout runs its instruction on the targets that have it (elsewhere its kernels are trap
// stubs the host never launches). In CUDA builds the layouts' emulations run: slow, and there only so
// that the tests on NVIDIA check every index this kernel derives from each layout.
//
// Each layout's instances are compiled in a file of their own (attention_amd_mfma.cu,
// attention_amd_wmma11.cu, attention_amd_wmma12.cu), so that the three build in parallel.
#pragma once

#include <cmath>

#include "core/error.h"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/mma.cuh"

namespace hd::gpu {

namespace amd_attention {

#if defined(HD_GPU_HIP)
inline constexpr bool kEmulated = false;  // the instructions, on the targets that have them
#else
inline constexpr bool kEmulated = true;
#endif

// 2^x for the softmax. On AMD the hardware's v_exp_f32 alone: exp2f wraps it in a fix-up for results
// below 2^-126 (a v_ldexp_f32 and a compare per value, counted by tools/rocm/amd_matrix_peak.py), and a
// probability that small may as well be 0. Elsewhere (the emulations) exp2f.
__device__ __forceinline__ float softmax_exp2(float x) {
#if defined(__HIP_DEVICE_COMPILE__)
  return __builtin_amdgcn_exp2f(x);
#else
  return exp2f(x);
#endif
}

// Keys [row0, row0 + kKeyTile) of V's [tokens, head_dim] slice into a shared tile stored transposed,
// vt[dim][key] with rows kKeyTile + kAttentionPad apart, zeros past the data. Vᵀ is the A operand of
// Oᵀ = Vᵀ · Pᵀ: stored this way it is read like any A tile, one wide read per register, where reading V
// as stored took one 16-bit read per value (64 per iteration at head size 64 on MFMA). A thread moves two
// keys' 8 dims, so that the pair's values of one dim are one 32-bit store, and neighbouring lanes take
// neighbouring dims, so that eight lanes read two whole rows. Rows and columns past the data are read
// from the slice's first row and zeroed, not branched around (an exec-mask branch per vector on AMD).
template <int kD, int kKeyTile, int kThreads, class T>
__device__ inline void load_attention_columns(uint16_t* vt, const T* src, int64_t row_stride, int row0, int limit,
                                              int head_dim) {
  constexpr int kStride = kKeyTile + kAttentionPad, kVectors = kD / 8;
  const int vectors = head_dim / 8;  // 16-byte vectors of a row that hold data
  for (int i = int(threadIdx.x); i < (kKeyTile / 2) * kVectors; i += kThreads) {
    const int key = 2 * (i / kVectors), c = i % kVectors;
    const bool c_ok = c < vectors, lo_ok = c_ok && row0 + key < limit, hi_ok = c_ok && row0 + key + 1 < limit;
    const auto* lo_src = reinterpret_cast<const uint4*>(src + (lo_ok ? int64_t(row0 + key) * row_stride + c * 8 : 0));
    const auto* hi_src = reinterpret_cast<const uint4*>(src + (hi_ok ? int64_t(row0 + key + 1) * row_stride + c * 8 : 0));
    const uint4 lo = *lo_src, hi = *hi_src;
    const uint32_t lo_words[4] = {lo_ok ? lo.x : 0u, lo_ok ? lo.y : 0u, lo_ok ? lo.z : 0u, lo_ok ? lo.w : 0u};
    const uint32_t hi_words[4] = {hi_ok ? hi.x : 0u, hi_ok ? hi.y : 0u, hi_ok ? hi.z : 0u, hi_ok ? hi.w : 0u};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t* row = reinterpret_cast<uint32_t*>(vt + (c * 8 + 2 * w) * kStride + key);
      row[0] = (lo_words[w] & 0xffffu) | hi_words[w] << 16;                      // dim 2w: keys key, key + 1
      row[kStride / 2] = lo_words[w] >> 16 | (hi_words[w] & 0xffff0000u);        // dim 2w + 1
    }
  }
}

// kD: the head dimension rounded up to a multiple of 16 (zero padding). kGroups fragment groups, 16
// queries each. One key/value stage: with 64 queries, 64 keys and heads up to 160 the tiles fit the
// 64 KB of shared memory AMD GPUs have (shared_bytes).
template <class Frag, class T, int kD, int kKeyTile, int kGroups>
__device__ __forceinline__ void flash_attention_block(const T* __restrict__ q, const T* __restrict__ k,
                                                      const T* __restrict__ v, T* __restrict__ out,
                                                      const AttentionArgs& a) {
  constexpr int kStride = kD + kAttentionPad;
  constexpr int kQueryTile = 16 * kGroups, kThreads = kGroups * Frag::kLanes, kAcc = Frag::kAccumulators;
  static_assert(kGroups <= Frag::kMaxGroups, "more fragment groups than the layout's emulation has scratch for");
  extern __shared__ uint4 smem_raw[];
  uint16_t* const q_s = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* const k_s = q_s + kQueryTile * kStride;
  uint16_t* const vt_s = k_s + kKeyTile * kStride;  // Vᵀ: [kD][kKeyTile + kAttentionPad]

  const int group = int(threadIdx.x) / Frag::kLanes, lane = int(threadIdx.x) % Frag::kLanes;
  const int b = int(blockIdx.y) / a.heads, h = int(blockIdx.y) % a.heads;
  const int q0 = int(blockIdx.x) * kQueryTile;
  const int query = q0 + group * 16 + lane % 16;  // this lane's query (a column of every fragment)
  const T* q_base = q + int64_t(b) * a.lq * a.q_row + int64_t(h) * a.head_dim;
  const T* k_base = k + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;
  const T* v_base = v + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;

  load_attention_rows<kD, kThreads, kQueryTile>(q_s, q_base, a.q_row, q0, a.lq, a.head_dim);
  __syncthreads();
  // Qᵀ, the B operand (rows of Q are its columns), kept in registers where it fits beside the
  // accumulators, else read from shared memory at each use: on gfx11, whose operands hold 16 values per
  // lane, a 160-wide head's Qᵀ alone is 80 registers, and keeping it spilled.
  constexpr bool kQInRegisters = sizeof(typename Frag::B) * (kD / 16) <= 96;
  typename Frag::B q_frag[kQInRegisters ? kD / 16 : 1];
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int kc = 0; kc < kD / 16; ++kc) q_frag[kc] = Frag::load_b(q_s, kStride, group * 16, kc * 16);
  }
  const auto q_operand = [&](int kc) HD_INLINE {
    if constexpr (kQInRegisters) {
      return q_frag[kc];
    } else {
      return Frag::load_b(q_s, kStride, group * 16, kc * 16);
    }
  };

  typename Frag::C o[kD / 16];  // Oᵀ: o[n].r[r] = O[query][16n + Frag::c_row(lane, r)]
#pragma unroll
  for (auto& f : o) f = typename Frag::C{};
  float m = -INFINITY, l = 0.f;  // the query's running maximum (unscaled) and this lane's share of the sum
  const int key_end = a.causal ? min(a.lk, q0 + kQueryTile) : a.lk;

  for (int k0 = 0; k0 < key_end; k0 += kKeyTile) {
    __syncthreads();  // the previous tile is no longer read
    load_attention_rows<kD, kThreads, kKeyTile>(k_s, k_base, a.kv_row, k0, a.lk, a.head_dim);
    load_attention_columns<kD, kKeyTile, kThreads>(vt_s, v_base, a.kv_row, k0, a.lk, a.head_dim);
    __syncthreads();

    typename Frag::C s[kKeyTile / 16];  // Sᵀ: s[c].r[r] = score of key k0 + 16c + Frag::c_row(lane, r)
#pragma unroll
    for (int c = 0; c < kKeyTile / 16; ++c) {
      s[c] = typename Frag::C{};
#pragma unroll
      for (int kc = 0; kc < kD / 16; ++kc)
        Frag::template mma<T>(s[c], Frag::load_a(k_s, kStride, c * 16, kc * 16), q_operand(kc));
    }
    // The tile's maximum, masking keys past the end and (causal) after the query; decided once per tile
    // rather than per score, so that whole tiles inside the keys carry no test.
    const auto tile_max_of = [&]<bool kMasked>() HD_INLINE {
      float max = -INFINITY;
#pragma unroll
      for (int c = 0; c < kKeyTile / 16; ++c) {
#pragma unroll
        for (int r = 0; r < kAcc; ++r) {
          if constexpr (kMasked) {
            const int key = k0 + c * 16 + Frag::c_row(lane, r);
            if (key >= a.lk || (a.causal && key > query)) s[c].r[r] = -INFINITY;
          }
          max = fmaxf(max, s[c].r[r]);
        }
      }
      return max;
    };
    const bool unmasked = !a.causal && k0 + kKeyTile <= a.lk;
    const float tile_max =
        Frag::column_max(unmasked ? tile_max_of.template operator()<false>() : tile_max_of.template operator()<true>());
    const float m_new = fmaxf(m, tile_max);
    // A query that has seen only masked keys keeps m = -inf: its weights stay 0 and nothing rescales.
    const float alpha = m_new == -INFINITY ? 1.f : softmax_exp2((m - m_new) * a.scale_log2);
    const float m_scaled = m_new == -INFINITY ? 0.f : m_new * a.scale_log2;
    m = m_new;
    l *= alpha;
#pragma unroll
    for (auto& f : o)
#pragma unroll
      for (float& x : f.r) x *= alpha;
    // Oᵀ += Vᵀ · Pᵀ, 16 keys at a time: a lane's probabilities of a chunk become its B fragment.
#pragma unroll
    for (int c = 0; c < kKeyTile / 16; ++c) {
      float p[kAcc];
#pragma unroll
      for (int r = 0; r < kAcc; ++r) {
        p[r] = softmax_exp2(fmaf(s[c].r[r], a.scale_log2, -m_scaled));  // masked: 2^-inf = 0
        l += p[r];
      }
      const typename Frag::B p_frag = Frag::template b_from_accumulators<T>(p);
#pragma unroll
      for (int n = 0; n < kD / 16; ++n)
        Frag::template mma<T>(o[n], Frag::load_a(vt_s, kKeyTile + kAttentionPad, n * 16, c * 16), p_frag);
    }
  }

  l = Frag::column_sum(l);
  if (query >= a.lq) return;  // after the last collective call
  // Lanes 0-15 hold the 16 queries of the group once each (lane % 16); m and l are whole on every lane.
  if (a.lse != nullptr && lane < 16)
    a.lse[(int64_t(b) * a.heads + h) * a.lq + query] = row_log_sum_exp(m, l, a.scale_log2);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  T* dst = out + (int64_t(b) * a.lq + query) * a.out_row + int64_t(h) * a.head_dim;
  // head_dim is a multiple of 8: where neighbouring registers hold neighbouring dims (kRowPairs), both
  // are in range or neither, and go out as one 32-bit store.
  constexpr int kStep = Frag::kRowPairs ? 2 : 1;
#pragma unroll
  for (int n = 0; n < kD / 16; ++n) {
#pragma unroll
    for (int r = 0; r < kAcc; r += kStep) {
      const int dim = n * 16 + Frag::c_row(lane, r);
      if (dim >= a.head_dim) continue;
      if constexpr (Frag::kRowPairs) {
        *reinterpret_cast<uint32_t*>(dst + dim) = pack2<T>(o[n].r[r] * inv, o[n].r[r + 1] * inv);
      } else {
        dst[dim] = from_float<T>(o[n].r[r] * inv);
      }
    }
  }
}

// An empty kernel on targets without the layout's instruction, and for heads wider than the layout
// takes (the host launches it only where it runs).
template <class Frag, class T, int kD, int kKeyTile, int kGroups>
__global__ void __launch_bounds__(kGroups* Frag::kLanes)
    flash_attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           T* __restrict__ out, AttentionArgs a) {
  if constexpr (Frag::kOnThisTarget && kD <= amd_flash_max_head_dim(Frag::kUnit)) {
    flash_attention_block<Frag, T, kD, kKeyTile, kGroups>(q, k, v, out, a);
  } else {
    HD_TRAP();
  }
}

// Q's and K's tiles in rows of kD + kAttentionPad, Vᵀ's in rows of kKeyTile + kAttentionPad
// (tools/rocm/amd_matrix_peak.py repeats this formula for its occupancy: keep them in step).
constexpr size_t shared_bytes(int d, int key_tile, int query_tile) {
  return (size_t(query_tile + key_tile) * (d + kAttentionPad) + size_t(d) * (key_tile + kAttentionPad)) *
         sizeof(uint16_t);
}

template <class Frag, class T, int kD>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  // 64 keys a tile for narrow heads, 32 for wide ones and on gfx11 (whose 16-value operands left no
  // registers for 64 keys' scores: it spilled at head sizes 48 and 64 in bf16).
  constexpr int kKeyTile = kD <= 64 && sizeof(typename Frag::B) <= 16 ? 64 : 32, kGroups = 4;
  constexpr int kQueryTile = 16 * kGroups;
  const size_t smem = shared_bytes(kD, kKeyTile, kQueryTile);
  const auto kernel = flash_attention_kernel<Frag, T, kD, kKeyTile, kGroups>;
  allow_dynamic_shared_memory(kernel, smem, q.device.index);
  const dim3 grid(unsigned((a.lq + kQueryTile - 1) / kQueryTile), unsigned(q.dim(0) * a.heads));
  kernel<<<grid, kGroups * Frag::kLanes, smem, current_stream()>>>(
      static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(v.data),
      static_cast<T*>(out.data), a);
  HD_GPU_CHECK_LAUNCH();
}

template <class Frag, class T>
void dispatch_head_dim(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  const int d = a.head_dim;
  if (d <= 16) return launch<Frag, T, 16>(q, k, v, out, a);
  if (d <= 32) return launch<Frag, T, 32>(q, k, v, out, a);
  if (d <= 48) return launch<Frag, T, 48>(q, k, v, out, a);  // SD1.5's 40
  if (d <= 64) return launch<Frag, T, 64>(q, k, v, out, a);
  if (d <= 80) return launch<Frag, T, 80>(q, k, v, out, a);
  if (d <= 96) return launch<Frag, T, 96>(q, k, v, out, a);
  if (d <= 128) return launch<Frag, T, 128>(q, k, v, out, a);
  return launch<Frag, T, 160>(q, k, v, out, a);
}

template <class Frag>
void dispatch_type(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  HD_ASSERT(a.head_dim % 8 == 0 && a.head_dim <= amd_flash_max_head_dim(Frag::kUnit));
  if (q.dtype == DType::kF16) return dispatch_head_dim<Frag, __half>(q, k, v, out, a);
  dispatch_head_dim<Frag, Bf16>(q, k, v, out, a);
}

}  // namespace amd_attention

}  // namespace hd::gpu
