// Flash attention forward (FlashAttention-2's online softmax) on Hopper's warpgroup instructions
// (wgmma.cuh), for sm_90a.
//
// Why a kernel of its own: the fragment-layer kernel (attention.cu, mma.sync) reached 128-202 TFLOP/s on
// SD's self-attention on an H100, 1.4x-2.3x the time of cuDNN's Hopper kernels behind torch's SDPA
// (2026-11-26): mma.sync cannot reach Hopper's full matrix rate, and every K and V fragment passes
// through registers by ldmatrix. wgmma reads Q, K and V from shared memory itself.
//
// A block is one or two warpgroups, each owning 64 queries of one (batch, head); the block's queries
// stay in shared memory for the whole kernel. Keys and values stream through two shared-memory stages
// (cp.async, all threads): the next tile's copies run while this one's products do. Per key tile a
// warpgroup computes S = Q Kᵀ (64 x keys, f32 in registers: both operands K-major), the online softmax
// on S in registers, and O += P V with P straight from registers (the accumulator layout of S is the A
// fragment layout of the next product, as in FlashAttention-3) and V read N-major: V's rows are keys,
// which is the k of that product, so V is stored exactly as K is and only its descriptor differs.
//
// Tried and dropped (H100, 2026-11-26): FlashAttention-3's overlap inside a warpgroup (the next tile's
// scores issued before this tile's P V, and their softmax run while P V does; K and V in slots of their
// own). Correct, but slower on every shape: SDXL's 64x64 self-attention 0.297-0.347 ms against 0.255,
// SD1.5's 0.203-0.262 against 0.174. Its second set of scores and probabilities in registers cost the
// second block a multiprocessor, and two warpgroups a block already run one's softmax during the
// other's products. Also dropped (H100, 2026-11-27): a share of the exponentials computed on the FMA units
// by a polynomial (FlashAttention-4's idea): slower at every share, SDXL's 0.203-0.217 ms -> 0.224-0.255,
// so the softmax is bound by issuing instructions rather than by the special-function unit; and keeping
// the running maximum until a tile's exceeds it by 2^8 (fewer rescales of O): timed again in three
// alternating rounds (H200, 2026-11-28), 3% faster on SD1.5's 4096-token self-attention in every round, the
// same on SDXL's, slower on SD1.5's 80-wide heads, SDXL's 1024 tokens and the cross-attention (code on the
// branch wip/gradient-overlap).
#include <algorithm>
#include <cmath>

#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/nvidia/attention_wgmma.h"
#include "ops/gpu/nvidia/attention_wgmma_rows.cuh"
#include "ops/gpu/nvidia/wgmma.cuh"

namespace hd::gpu {

namespace {

using wgmma::kRowBytes;
using wgmma::kWarpgroupThreads;

// One tile configuration: the head width the products use (kD: the head rounded up to 16, the k of
// Q Kᵀ; kDV: rounded up to 8, the width of P V and O), the warpgroups of a block (64 queries each) and
// the keys a shared-memory stage holds. A row of Q, K or V spans `atoms` blocks of 64 elements, each
// block of the tile's rows stored apart (the layout wgmma.cuh describes).
template <int kHead, int kValueHead, int kGroups>
struct AttentionTile {
  static constexpr int d = kHead, dv = kValueHead, warpgroups = kGroups;
  // 128 keys a step where a row is one 64-element block (S then takes 64 registers a thread); 64 for the
  // wider heads, whose O accumulators (up to 80 registers) and shared stages are larger.
  static constexpr int keys = d <= 64 ? 128 : 64;
  // Two-warpgroup blocks of the narrow heads are compiled for two blocks a multiprocessor (128 registers
  // a thread; ptxas spills 24-56 bytes). On an H100 (2026-11-26) that took SD1.5's 64x64 self-attention
  // (D40) from 0.249 to 0.171 ms and left SDXL's (D64) at 0.254; 64 keys a stage instead (no spills) gave
  // 0.211 and 0.302 ms, and one-warpgroup blocks four to a multiprocessor 0.242 and 0.319.
  static constexpr int blocks_per_sm = d <= 64 && warpgroups == 2 ? 2 : 1;
  static constexpr int queries = 64 * warpgroups, threads = kWarpgroupThreads * warpgroups;
  static constexpr int atoms = (d + 63) / 64, chunks = d / 8;  // 16-byte chunks of a row that are loaded
  static constexpr int q_block = queries * kRowBytes,
                       kv_block = keys * kRowBytes;  // one 64-element block's rows
  static constexpr size_t q_bytes = size_t(q_block) * atoms, kv_bytes = size_t(kv_block) * atoms;
  static constexpr size_t shared_bytes = q_bytes + 2 * 2 * kv_bytes + wgmma::kAtomBytes;  // + alignment
  static_assert(d % 16 == 0 && dv % 8 == 0 && dv <= d, "Q Kᵀ takes k in steps of 16");
};

template <class T, class Tile, bool kWithLse>
__device__ __forceinline__ void attention_body(const T* __restrict__ q, const T* __restrict__ k,
                                               const T* __restrict__ v, T* __restrict__ out,
                                               const AttentionArgs& a) {
#if defined(HD_NVIDIA_WGMMA)
  constexpr int kKeys = Tile::keys, kQueries = Tile::queries, kD = Tile::d, kDV = Tile::dv;
  extern __shared__ uint8_t shared_raw[];
  // Swizzle atoms (8 rows of 128 bytes) start on 1024-byte boundaries of the shared window.
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw));
  uint8_t* const q_s = shared_raw + ((1024 - (raw & 1023)) & 1023);
  const auto k_tile = [&](int stage) { return q_s + Tile::q_bytes + stage * 2 * Tile::kv_bytes; };
  const auto v_tile = [&](int stage) { return k_tile(stage) + Tile::kv_bytes; };

  const int tid = int(threadIdx.x), warpgroup = tid / kWarpgroupThreads;
  const int lane = tid % kWarpSize, g = lane / 4, t = lane % 4;
  const int row = warpgroup * 64 + (tid % kWarpgroupThreads) / kWarpSize * 16 + g;  // and row + 8
  const int b = int(blockIdx.y) / a.heads, h = int(blockIdx.y) % a.heads;
  const int q0 = int(blockIdx.x) * kQueries;
  const T* q_base = q + int64_t(b) * a.lq * a.q_row + int64_t(h) * a.head_dim;
  const T* k_base = k + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;
  const T* v_base = v + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;
  const int key_end = a.causal ? min(a.lk, q0 + kQueries) : a.lk;

  load_rows<Tile, kQueries>(q_s, q_base, a.q_row, q0, a.lq, a.head_dim);
  load_rows<Tile, kKeys>(k_tile(0), k_base, a.kv_row, 0, a.lk, a.head_dim);
  load_rows<Tile, kKeys>(v_tile(0), v_base, a.kv_row, 0, a.lk, a.head_dim);
  async_commit();

  float o[kDV / 2];
#pragma unroll
  for (float& x : o) x = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  // This warpgroup's 64 queries in each 64-element block of Q.
  const uint8_t* const q_rows = q_s + warpgroup * 64 * kRowBytes;

  for (int k0 = 0, tile = 0; k0 < key_end; k0 += kKeys, ++tile) {
    const int stage = tile & 1;
    async_wait<0>();                  // this tile has landed (this thread's copies) ...
    wgmma::fence_shared_for_async();  // ... where wgmma's reads see it ...
    __syncthreads();  // ... for every thread; and every warpgroup is done with the other stage
    if (k0 + kKeys < key_end) {
      load_rows<Tile, kKeys>(k_tile(stage ^ 1), k_base, a.kv_row, k0 + kKeys, a.lk, a.head_dim);
      load_rows<Tile, kKeys>(v_tile(stage ^ 1), v_base, a.kv_row, k0 + kKeys, a.lk, a.head_dim);
    }
    async_commit();
    const uint8_t* const k_s = k_tile(stage);
    const uint8_t* const v_s = v_tile(stage);

    // S = Q Kᵀ: k (the head) in steps of 16, 32 bytes further along a block's swizzled rows.
    float s[kKeys / 2];
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int block = kk / 4, offset = (kk % 4) * 32;
      wgmma::mma_async<kKeys, T>(s, wgmma::descriptor(q_rows + block * Tile::q_block + offset),
                                 wgmma::descriptor(k_s + block * Tile::kv_block + offset), kk > 0);
    }
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operands(s);

    // The online softmax on raw scores, as in attention.cu: s[4j + e] is (row + 8 (e / 2), key
    // k0 + 8j + 2t + e % 2), the accumulator layout of every warp of the warpgroup.
    const bool unmasked = !a.causal && k0 + kKeys <= a.lk;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (!unmasked) {
          const int key = k0 + j * 8 + 2 * t + (e & 1), query = q0 + row + (e >= 2 ? 8 : 0);
          if (key >= a.lk || (a.causal && key > query)) s[4 * j + e] = -INFINITY;
        }
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[4 * j + e]);
      }
    }
    float alpha[2], m_scaled[2];
    online_softmax_step<kWarpSize>(tile_max, m, l, a.scale_log2, alpha, m_scaled);
#pragma unroll
    for (int n = 0; n < kDV / 8; ++n) {
      o[4 * n] *= alpha[0], o[4 * n + 1] *= alpha[0];
      o[4 * n + 2] *= alpha[1], o[4 * n + 3] *= alpha[1];
    }
    // P in the A fragment layout, 16 keys a fragment: (row, keys 2t, 2t+1), (row + 8, the same), then the
    // same 8 keys further.
    uint32_t p[kKeys / 16][4];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      float e4[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        e4[e] = fast_exp2(fmaf(s[4 * j + e], a.scale_log2, -m_scaled[e / 2]));
        l[e / 2] += e4[e];
      }
      p[j / 2][(j % 2) * 2] = pack_probabilities<T>(e4[0], e4[1]);
      p[j / 2][(j % 2) * 2 + 1] = pack_probabilities<T>(e4[2], e4[3]);
    }

    // O += P V: k (the keys) in steps of 16, 16 rows (2048 bytes) of V further; V's 64-column blocks lie
    // kv_block bytes apart.
    wgmma::fence();
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc)
      wgmma::mma_async<kDV, T>(o, p[kc],
                               wgmma::descriptor_n_major(v_s + kc * 16 * kRowBytes, Tile::kv_block));
    wgmma::commit();
    wgmma::wait<0>();  // the other stage is refilled after the next barrier; p and o are read until here
    wgmma::fence_operands(o);
    wgmma::fence_operands(p);
  }

  store_attention_rows<kDV, kWarpSize, kWithLse>(out, a, b, h, q0 + row, t, m, l,
                                                 [&](int n, int e) HD_INLINE { return o[4 * n + e]; });
#else
  HD_TRAP();
#endif
}

// Two kernels around the one body: a minimum of blocks a multiprocessor in __launch_bounds__ changes
// what ptxas does even when it is 1 (the threads alone let it keep the wider heads' tiles near 128-190
// registers; with a minimum of 1 it took up to 214), so the bound is spelled only where it is wanted.
template <class T, class Tile, bool kWithLse>
__global__ void __launch_bounds__(Tile::threads)
    wgmma_attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           T* __restrict__ out, AttentionArgs a) {
  attention_body<T, Tile, kWithLse>(q, k, v, out, a);
}
template <class T, class Tile, bool kWithLse>
__global__ void __launch_bounds__(Tile::threads, Tile::blocks_per_sm)
    wgmma_attention_kernel_packed(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                  T* __restrict__ out, AttentionArgs a) {
  attention_body<T, Tile, kWithLse>(q, k, v, out, a);
}

// kWithLse: the kernel that also writes the log-sum-exp (store_attention_rows says why there are two).
template <class T, class Tile, bool kWithLse>
void launch_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const AttentionArgs& a) {
  const auto kernel = [] {
    if constexpr (Tile::blocks_per_sm > 1)
      return wgmma_attention_kernel_packed<T, Tile, kWithLse>;
    else
      return wgmma_attention_kernel<T, Tile, kWithLse>;
  }();
  allow_dynamic_shared_memory(kernel, Tile::shared_bytes, q.device.index);
  const dim3 grid(unsigned((a.lq + Tile::queries - 1) / Tile::queries), unsigned(q.dim(0) * a.heads));
  kernel<<<grid, Tile::threads, Tile::shared_bytes, current_stream()>>>(
      static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(v.data),
      static_cast<T*>(out.data), a);
  HD_GPU_CHECK_LAUNCH();
}

template <class T, class Tile>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const AttentionArgs& a) {
  if (a.lse != nullptr) return launch_kernel<T, Tile, true>(q, k, v, out, a);
  launch_kernel<T, Tile, false>(q, k, v, out, a);
}

// Two warpgroups (128 queries) a block where that still gives every multiprocessor a block; one
// elsewhere (short sequences: SD's 32x32 and 16x16 levels at batch 2 make 128 and 32 such blocks).
// Three or four warpgroups a block (each key tile then serves 192 or 256 queries) were slower on an H100
// (2026-11-26): SDXL's 64x64 self-attention 0.319 and 0.314 ms against 0.256, SD1.5's 0.226 and 0.175
// against 0.171.
template <class T, int kD, int kDV>
void launch_head(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                 const AttentionArgs& a) {
  const int64_t wide_blocks = (a.lq + 127) / 128 * q.dim(0) * a.heads;
  if (wide_blocks >= multiprocessor_count(q.device.index))
    return launch<T, AttentionTile<kD, kDV, 2>>(q, k, v, out, a);
  launch<T, AttentionTile<kD, kDV, 1>>(q, k, v, out, a);
}

}  // namespace

void flash_attention_wgmma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                           const AttentionArgs& a) {
  HD_CHECK(a.head_dim % 8 == 0 && a.head_dim <= kWgmmaAttentionMaxHeadDim,
           "flash_attention_wgmma: head dimension ", a.head_dim, " is not a multiple of 8 up to ",
           kWgmmaAttentionMaxHeadDim);
  const auto run = [&]<class T>() {
    with_head_sizes(a.head_dim, [&]<int kD, int kDV>() { launch_head<T, kD, kDV>(q, k, v, out, a); });
  };
  if (q.dtype == DType::kF16) return run.template operator()<__half>();
  run.template operator()<Bf16>();
}

}  // namespace hd::gpu
