// Flash attention forward on AMD's 64-lane MFMA fragment layout (mma.cuh, Fragments16x16), the same
// online softmax as attention.cu, arranged for that layout: the scores are computed transposed,
// Sᵀ = K · Qᵀ, so that each lane's accumulators belong to one query (a column of C) and the
// probabilities Pᵀ are, register for register, the B operand of Oᵀ = Vᵀ · Pᵀ. One query per lane means
// the running maximum and sum are one value per lane, reduced over the four lanes that share the query.
//
// On gfx90a this runs the MFMA instruction. In CUDA builds it runs the layout's emulation: slow, and
// there only so that the tests on NVIDIA check every index this kernel derives from the layout.
#include <cmath>

#include "core/error.h"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/mma.cuh"

namespace hd::gpu {

namespace {

#if defined(HD_GPU_HIP)
using Frag = Fragments16x16<false>;  // the instruction on gfx90a (the host picks this kernel only there)
#else
using Frag = Fragments16x16<true>;
#endif

// kD: the head dimension rounded up to a multiple of 16 (zero padding). kGroups groups of 64 lanes, 16
// queries each. One key/value stage: with 64 queries, 64 keys and heads up to 160 the tiles fit the
// 64 KB of shared memory AMD GPUs have.
template <class T, int kD, int kKeyTile, int kGroups>
__global__ void __launch_bounds__(kGroups* Frag::kLanes)
    flash_attention_mfma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                T* __restrict__ out, AttentionArgs a) {
  constexpr int kStride = kD + kAttentionPad;
  constexpr int kQueryTile = 16 * kGroups, kThreads = kGroups * Frag::kLanes;
  static_assert(kGroups <= Frag::kMaxGroups, "more fragment groups than the layout's emulation has scratch for");
  extern __shared__ uint4 smem_raw[];
  uint16_t* const q_s = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* const k_s = q_s + kQueryTile * kStride;
  uint16_t* const v_s = k_s + kKeyTile * kStride;

  const int group = int(threadIdx.x) / Frag::kLanes, lane = int(threadIdx.x) % Frag::kLanes;
  const int quad = lane / 16;  // this lane's keys in a 16-key chunk, and its output dims: 4·quad .. +3
  const int b = int(blockIdx.y) / a.heads, h = int(blockIdx.y) % a.heads;
  const int q0 = int(blockIdx.x) * kQueryTile;
  const int query = q0 + group * 16 + lane % 16;  // this lane's query (a column of every fragment)
  const T* q_base = q + int64_t(b) * a.lq * a.q_row + int64_t(h) * a.head_dim;
  const T* k_base = k + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;
  const T* v_base = v + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;

  load_attention_rows<kD, kThreads>(q_s, q_base, a.q_row, q0, kQueryTile, a.lq, a.head_dim);
  __syncthreads();
  typename Frag::B q_frag[kD / 16];  // Qᵀ, the B operand: rows of Q are its columns
  for (int kc = 0; kc < kD / 16; ++kc) q_frag[kc] = Frag::load_b(q_s, kStride, group * 16, kc * 16);

  FragmentC o[kD / 16];  // Oᵀ: o[n].r[r] = O[query][16n + 4·quad + r]
  for (auto& f : o) f = FragmentC{{0.f, 0.f, 0.f, 0.f}};
  float m = -INFINITY, l = 0.f;  // the query's running maximum (unscaled) and this lane's share of the sum
  const int key_end = a.causal ? min(a.lk, q0 + kQueryTile) : a.lk;

  for (int k0 = 0; k0 < key_end; k0 += kKeyTile) {
    __syncthreads();  // the previous tile is no longer read
    load_attention_rows<kD, kThreads>(k_s, k_base, a.kv_row, k0, kKeyTile, a.lk, a.head_dim);
    load_attention_rows<kD, kThreads>(v_s, v_base, a.kv_row, k0, kKeyTile, a.lk, a.head_dim);
    __syncthreads();

    FragmentC s[kKeyTile / 16];  // Sᵀ: s[c].r[r] = score of key k0 + 16c + 4·quad + r for this query
    for (int c = 0; c < kKeyTile / 16; ++c) {
      s[c] = FragmentC{{0.f, 0.f, 0.f, 0.f}};
      for (int kc = 0; kc < kD / 16; ++kc)
        Frag::mma<T>(s[c], Frag::load_a(k_s, kStride, c * 16, kc * 16), q_frag[kc]);
    }
    const bool unmasked = !a.causal && k0 + kKeyTile <= a.lk;
    float tile_max = -INFINITY;
    for (int c = 0; c < kKeyTile / 16; ++c) {
      for (int r = 0; r < 4; ++r) {
        const int key = k0 + c * 16 + 4 * quad + r;
        if (!unmasked && (key >= a.lk || (a.causal && key > query))) s[c].r[r] = -INFINITY;
        tile_max = fmaxf(tile_max, s[c].r[r]);
      }
    }
    tile_max = Frag::column_max(tile_max);
    const float m_new = fmaxf(m, tile_max);
    // A query that has seen only masked keys keeps m = -inf: its weights stay 0 and nothing rescales.
    const float alpha = m_new == -INFINITY ? 1.f : exp2f((m - m_new) * a.scale_log2);
    const float m_scaled = m_new == -INFINITY ? 0.f : m_new * a.scale_log2;
    m = m_new;
    l *= alpha;
    for (auto& f : o)
      for (float& x : f.r) x *= alpha;
    // Oᵀ += Vᵀ · Pᵀ, 16 keys at a time: a lane's four probabilities of a chunk are its B fragment.
    for (int c = 0; c < kKeyTile / 16; ++c) {
      float p[4];
      for (int r = 0; r < 4; ++r) {
        p[r] = exp2f(fmaf(s[c].r[r], a.scale_log2, -m_scaled));  // masked: 2^-inf = 0
        l += p[r];
      }
      const typename Frag::B p_frag{{pack2<T>(p[0], p[1]), pack2<T>(p[2], p[3])}};
      for (int n = 0; n < kD / 16; ++n)
        Frag::mma<T>(o[n], Frag::load_a_transposed(v_s, kStride, n * 16, c * 16), p_frag);
    }
  }

  l = Frag::column_sum(l);
  if (query >= a.lq) return;  // after the last collective call
  const float inv = l > 0.f ? 1.f / l : 0.f;
  T* dst = out + (int64_t(b) * a.lq + query) * a.out_row + int64_t(h) * a.head_dim;
  for (int n = 0; n < kD / 16; ++n) {
    const int dim = n * 16 + 4 * quad;
    if (dim >= a.head_dim) continue;  // head_dim is a multiple of 8: the lane's four dims are all in
    const uint32_t lo = pack2<T>(o[n].r[0] * inv, o[n].r[1] * inv), hi = pack2<T>(o[n].r[2] * inv, o[n].r[3] * inv);
    reinterpret_cast<uint32_t*>(dst + dim)[0] = lo;
    reinterpret_cast<uint32_t*>(dst + dim)[1] = hi;
  }
}

template <class T, int kD>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  constexpr int kKeyTile = kD <= 64 ? 64 : 32, kGroups = 4, kQueryTile = 16 * kGroups;
  const size_t smem = size_t(kQueryTile + 2 * kKeyTile) * (kD + kAttentionPad) * sizeof(uint16_t);
  const auto kernel = flash_attention_mfma_kernel<T, kD, kKeyTile, kGroups>;
  allow_dynamic_shared_memory(kernel, smem, q.device.index);
  const dim3 grid(unsigned((a.lq + kQueryTile - 1) / kQueryTile), unsigned(q.dim(0) * a.heads));
  kernel<<<grid, kGroups * Frag::kLanes, smem, current_stream()>>>(
      static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(v.data),
      static_cast<T*>(out.data), a);
  HD_GPU_CHECK_LAUNCH();
}

template <class T>
void dispatch_head_dim(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  const int d = a.head_dim;
  if (d <= 16) return launch<T, 16>(q, k, v, out, a);
  if (d <= 32) return launch<T, 32>(q, k, v, out, a);
  if (d <= 48) return launch<T, 48>(q, k, v, out, a);  // SD1.5's 40
  if (d <= 64) return launch<T, 64>(q, k, v, out, a);
  if (d <= 80) return launch<T, 80>(q, k, v, out, a);
  if (d <= 96) return launch<T, 96>(q, k, v, out, a);
  if (d <= 128) return launch<T, 128>(q, k, v, out, a);
  return launch<T, 160>(q, k, v, out, a);
}

}  // namespace

void flash_attention_mfma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const AttentionArgs& a) {
  HD_ASSERT(a.head_dim % 8 == 0 && a.head_dim <= 160);
  if (q.dtype == DType::kF16) return dispatch_head_dim<__half>(q, k, v, out, a);
  dispatch_head_dim<Bf16>(q, k, v, out, a);
}

}  // namespace hd::gpu
