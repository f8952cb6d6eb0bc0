// What the two forms of attention's gradient on Hopper's warpgroup instructions share: heads of 80 and 96
// (attention_gradient_wgmma.cu: one query step between block barriers) and heads up to 64
// (attention_gradient_wgmma_paired.cuh: two). The tile and its shared memory, a block's walk over the query
// steps, and the pieces of a step: the scores' products, the probabilities and dSᵀ in registers, dQ's
// product and additions, and the epilogue of dK and dV. Compiled for sm_90a only (HD_NVIDIA_WGMMA).
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/gpu/attention_gradient.cuh"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/nvidia/attention_wgmma_rows.cuh"
#include "ops/gpu/nvidia/warp_specialization.cuh"
#include "ops/gpu/nvidia/wgmma.cuh"

namespace hd::gpu {

// One tile configuration: the head width the scores' products use (kD: rounded up to 16, their k) and the
// gradients' (kDV: rounded up to 8, their n). A row of Q, K, V or dO spans `atoms` blocks of 64 elements,
// each block of the tile's rows stored apart (wgmma.cuh's layout). Two warpgroups (one block a
// multiprocessor: 240 registers a thread, setmaxnreg's share; 206-254 before the dQ warp's warpgroup took
// its 24) share each step's Q and dO. One warpgroup a block, three a
// multiprocessor (168 registers: ptxas spills, and serialises the wgmma of heads from 64 up), was no
// faster (H100, 2026-11-28: SD1.5's 40-wide heads 0.512 ms against 0.505, SDXL's 4096-token
// self-attention 1.10 against 0.73, SD1.5's 80-wide heads 0.14 against 0.07).
template <int kHead, int kValueHead>
struct GradientWgmmaTile {
  static constexpr int d = kHead, dv = kValueHead, warpgroups = 2;
  // Heads up to 64 (one 64-element block a row) take the paired form: a stage holds two query steps, so
  // that the block meets at one barrier every two steps, and each warpgroup multiplies dQ of one of the
  // previous pair's steps, so that their work is even between barriers (four buffers of dSᵀ: two pairs of
  // steps). Wider heads take one step a stage: two stages of two steps' Q and dO would not fit beside K
  // and V.
  static constexpr bool paired = kValueHead <= 64;
  static constexpr int substeps = paired ? 2 : 1;    // query steps a stage holds
  static constexpr int ds_buffers = paired ? 4 : 1;  // of both warpgroups' dSᵀ of one step
  static constexpr int keys = 64 * warpgroups, queries = 64, threads = wgmma::kWarpgroupThreads * warpgroups;
  static constexpr int atoms = (d + 63) / 64, chunks = d / 8;
  static constexpr int q_block = queries * wgmma::kRowBytes,
                       kv_block = keys * wgmma::kRowBytes;      // one 64-element block's rows
  static constexpr size_t kv_bytes = size_t(kv_block) * atoms;  // K or V
  static constexpr size_t q_bytes = size_t(q_block) * atoms;    // Q or dO of one step
  // A warpgroup's dSᵀ of one step: 64 keys x 64 queries.
  static constexpr size_t ds_bytes = size_t(64) * wgmma::kRowBytes;
  // K, V, two stages of (Q, dO) of `substeps` steps each, the dSᵀ buffers, two stages of (lse, delta) f32
  // for each step: every tile starts on a 1024-byte boundary of the aligned window.
  static constexpr size_t v_offset = kv_bytes, q_offset = 2 * kv_bytes,
                          ds_offset = q_offset + 2 * 2 * substeps * q_bytes;
  static constexpr size_t statistics_offset = ds_offset + ds_buffers * warpgroups * ds_bytes;
  // A third warpgroup, of which one warp adds dQ into its f32 sums (the dQ warp): the compute warpgroup at
  // a step's dQ stores it into a tile of its own in fragment order (dq_tile_index_of_columns), and the dQ
  // warp adds the whole tile into the same tile of the sums, laid out alike, with one bulk reduction. The
  // two tiles' queries' first index: two ints after them.
  static constexpr int block_threads = threads + wgmma::kWarpgroupThreads;
  static constexpr size_t dq_offset = statistics_offset + 2 * 2 * substeps * queries * sizeof(float);
  static constexpr size_t dq_bytes = size_t(queries) * dv * sizeof(float);
  static constexpr size_t dq_q0_offset = dq_offset + warpgroups * dq_bytes;
  static constexpr size_t shared_bytes = dq_q0_offset + 16 + wgmma::kAtomBytes;
  static_assert(d % 16 == 0 && dv % 8 == 0 && dv <= d && d <= 128, "heads up to 128, k in steps of 16");
};

// dQ's tiles in fragment order (the sums and their shared tiles; narrow_dq_tiles reads them
// back): the float pair (dq[2p], dq[2p + 1]) of warpgroup thread c lies at p * 256 + 2c, so that a warp's
// stores of one pair are 256 contiguous bytes. In the accumulator's layout dq[4n + e] is (query row + 8 (e
// / 2), column 8n + 2t + e % 2) for lane (g, t) of warp w (row = 16w + g); so the 8 columns 8n..8n + 7 of
// query r (w = r / 16, g = r % 8, h = r % 16 / 8) are the 8 floats from (2n + h) * 256 + (32w + 4g) * 2.
inline constexpr int kDqTilePairStride = 2 * wgmma::kWarpgroupThreads;
__host__ __device__ constexpr int dq_tile_index_of_columns(int r, int n) {
  return (2 * n + r % 16 / 8) * kDqTilePairStride + (kWarpSize * (r / 16) + 4 * (r % 8)) * 2;
}

// A block's share of the query steps (64 queries each). Causal: queries before the block's first key see
// none of its keys. This block's part of the steps from there, [part_begin, part_end), starting at its own
// step and wrapping around, so that the key blocks do not all add into the same rows of dQ at once.
struct QueryWalk {
  int steps, part_begin, part_end, first;
  __device__ QueryWalk(const AttentionArgs& a, int k0, int queries) {
    const int first_query = a.causal ? (k0 / queries) * queries : 0;
    const int all_steps = max(0, (a.lq - first_query + queries - 1) / queries);
    const int part = int(blockIdx.z), parts = int(gridDim.z);
    const int step_begin = int(int64_t(part) * all_steps / parts),
              step_end = int(int64_t(part + 1) * all_steps / parts);
    steps = step_end - step_begin;
    part_begin = first_query + step_begin * queries;
    part_end = min(a.lq, first_query + step_end * queries);
    first = part_begin + int(int64_t(blockIdx.x) * steps / gridDim.x) * queries;
  }
  __device__ int following(int q0, int queries) const {
    return q0 + queries < part_end ? q0 + queries : part_begin;
  }
};

#if defined(HD_NVIDIA_WGMMA)
// Sᵀ = K Qᵀ (or dPᵀ = V dOᵀ) of this warpgroup's 64 keys (rows `keys` on) and a step's 64 queries: k (the
// head) in steps of 16, 32 bytes further along a block's rows.
template <class T, class Tile>
__device__ __forceinline__ void issue_scores(float (&acc)[Tile::queries / 2], const uint8_t* keys,
                                             const uint8_t* queries) {
#pragma unroll
  for (int kk = 0; kk < Tile::d / 16; ++kk) {
    const int block = kk / 4, offset = (kk % 4) * 32;
    wgmma::mma_async<Tile::queries, T>(acc, wgmma::descriptor(keys + block * Tile::kv_block + offset),
                                       wgmma::descriptor(queries + block * Tile::q_block + offset), kk > 0);
  }
  wgmma::commit();
}

// s[4j + e] is (key row + 8 (e / 2), query 8j + 2t + e % 2 of the step): Pᵀ = exp2(Sᵀ·scale·log2e − lse)
// in place (lse2: the lane's queries' lse, in the exp2 domain), then packed as the A fragments of dV's
// product, 16 queries a fragment. kMasked: keys at or past lk, and causal masks, give 0 (key: the lane's
// first key, query: its first query).
template <class T, class Tile, bool kMasked>
__device__ __forceinline__ void probabilities(float (&s)[Tile::queries / 2],
                                              uint32_t (&p)[Tile::queries / 16][4],
                                              const float2 (&lse2)[Tile::queries / 8], const AttentionArgs& a,
                                              int key, int query) {
#pragma unroll
  for (int j = 0; j < Tile::queries / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float prob = fast_exp2(fmaf(s[4 * j + e], a.scale_log2, -((e & 1) ? lse2[j].y : lse2[j].x)));
      if constexpr (kMasked) {
        const int ke = key + 8 * (e / 2), qe = query + 8 * j + (e & 1);
        if (ke >= a.lk || (a.causal && ke > qe)) prob = 0.f;
      }
      s[4 * j + e] = prob;
    }
    p[j / 2][(j % 2) * 2] = pack_probabilities<T>(s[4 * j], s[4 * j + 1]);
    p[j / 2][(j % 2) * 2 + 1] = pack_probabilities<T>(s[4 * j + 2], s[4 * j + 3]);
  }
}

// dSᵀ = Pᵀ ∘ (dPᵀ − delta) (in dp; delta2: the lane's queries' delta), packed as the A fragments of dK's
// product, and stored as held ([key][query]) into this warpgroup's dSᵀ tile for dQ's product: the lane's two
// queries are neighbours, one 32-bit store a row; chunk j of a row is swizzled apart for each of the eight
// rows a store instruction's lanes span.
template <class T, class Tile>
__device__ __forceinline__ void score_gradients(float (&dp)[Tile::queries / 2],
                                                const float (&s)[Tile::queries / 2],
                                                const float2 (&delta2)[Tile::queries / 8],
                                                uint32_t (&ds)[Tile::queries / 16][4], uint8_t* ds_s, int row,
                                                int t) {
#pragma unroll
  for (int j = 0; j < Tile::queries / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dp[4 * j + e] = s[4 * j + e] * (dp[4 * j + e] - ((e & 1) ? delta2[j].y : delta2[j].x));
    ds[j / 2][(j % 2) * 2] = pack_probabilities<T>(dp[4 * j], dp[4 * j + 1]);
    ds[j / 2][(j % 2) * 2 + 1] = pack_probabilities<T>(dp[4 * j + 2], dp[4 * j + 3]);
    *reinterpret_cast<uint32_t*>(ds_s + wgmma::swizzled(row, j) + 4 * t) = ds[j / 2][(j % 2) * 2];
    *reinterpret_cast<uint32_t*>(ds_s + wgmma::swizzled(row + 8, j) + 4 * t) = ds[j / 2][(j % 2) * 2 + 1];
  }
}

// dV += Pᵀ dO and dK += dSᵀ Q: k (the queries) in steps of 16, 16 rows (2048 bytes) further; dO's and Q's
// 64-column blocks lie q_block bytes apart. The softmax scale goes on dK once, at the end.
template <class T, class Tile>
__device__ __forceinline__ void issue_dv_dk(float (&dv)[Tile::dv / 2], float (&dk)[Tile::dv / 2],
                                            const uint32_t (&p)[Tile::queries / 16][4],
                                            const uint32_t (&ds)[Tile::queries / 16][4], const uint8_t* q_s,
                                            const uint8_t* do_s) {
#pragma unroll
  for (int kc = 0; kc < Tile::queries / 16; ++kc)
    wgmma::mma_async<Tile::dv, T>(
        dv, p[kc], wgmma::descriptor_n_major(do_s + kc * 16 * wgmma::kRowBytes, Tile::q_block));
#pragma unroll
  for (int kc = 0; kc < Tile::queries / 16; ++kc)
    wgmma::mma_async<Tile::dv, T>(dk, ds[kc],
                                  wgmma::descriptor_n_major(q_s + kc * 16 * wgmma::kRowBytes, Tile::q_block));
  wgmma::commit();
}

// dQ (one step's 64 queries x kDV) = dS K over the block's 128 keys: A is both warpgroups' dSᵀ of that
// step, one after the other, read MN-major (a row of 64 queries at one key), B is K read N-major.
template <class T, class Tile>
__device__ __forceinline__ void issue_dq(float (&dq)[Tile::dv / 2], const uint8_t* ds_both,
                                         const uint8_t* k_s) {
#pragma unroll
  for (int kc = 0; kc < Tile::keys / 16; ++kc)
    wgmma::mma_async_mn_major<Tile::dv, T>(
        dq, wgmma::descriptor_n_major(ds_both + kc * 16 * wgmma::kRowBytes, 64 * wgmma::kRowBytes),
        wgmma::descriptor_n_major(k_s + kc * 16 * wgmma::kRowBytes, Tile::kv_block), kc > 0);
  wgmma::commit();
}

#if defined(HD_NVIDIA_WGMMA)
// The named barriers of a block with a dQ warp: the compute warpgroups' own (bar 0, __syncthreads', would
// wait for the third warpgroup too), and for each compute warpgroup w, its dQ tile stored (kDqStored + w)
// and read by the dQ warp (kDqRead + w), each between w's threads and the dQ warp's.
inline constexpr int kComputeBarrier = 1, kDqStored = 2, kDqRead = 4;
inline constexpr int kDqBarrierThreads = wgmma::kWarpgroupThreads + kWarpSize;
// setmaxnreg's counts: 2 x 128 x 240 + 128 x 24 = 64512, the 168 registers x 384 threads the block is
// launched with (more deadlocked: TRY_ALLOC waits for registers the block does not hold).
inline constexpr int kComputeRegisters = 240, kDqWarpRegisters = 24;

// The dQ warp: step i's dQ (in the paired form sub-step i % 2 of pair i / 2; in turns, the turn's) comes
// from compute warpgroup i % 2, as its tile
// (dq_tiles: both warpgroups', Tile::dq_bytes apart) and its first query (q0s[i % 2], a multiple of 64);
// lane 0 adds it into the sums' tile of those queries (sums: this (batch, head)'s first tile) with one bulk
// reduction. The tile is handed back once the reduction has read it, except after each warpgroup's last
// step, for which it does not wait. (Earlier forms: one bulk reduction a row of dQ's [B, L, heads·D] sums,
// 0.88 ms on SDXL's 4096-token self-attention; vector atomics from this warp, 1.05; none, 0.62; H200,
// 2026-11-28.)
template <class Tile>
__device__ __forceinline__ void add_staged_dq(float* sums, const uint8_t* dq_tiles, const int* q0s, int steps,
                                              int lane) {
  namespace ws = warp_specialization;
  for (int i = 0; i < steps; ++i) {
    const int w = i & 1;
    ws::sync(kDqStored + w, kDqBarrierThreads);
    if (lane == 0) {
      const auto* const tile = reinterpret_cast<const float*>(dq_tiles + w * Tile::dq_bytes);
      ws::reduce_add_async(sums + int64_t(q0s[w] / Tile::queries) * (Tile::queries * Tile::dv), tile,
                           int(Tile::dq_bytes));
      ws::commit();
      ws::wait_reads();
    }
    __syncwarp();
    if (i + 2 < steps) ws::arrive(kDqRead + w, kDqBarrierThreads);  // the tile is read
  }
  if (lane == 0) ws::wait_all();
}

// A compute warpgroup's dQ of a step into its tile for the dQ warp, in fragment order
// (dq_tile_index_of_columns), without the softmax scale (narrow_dq_tiles applies it once), and the step's
// first query into its slot. wait_read: the tile was stored before, and the dQ warp must have read it first.
template <class Tile>
__device__ __forceinline__ void stage_dq(const float (&dq)[Tile::dv / 2], float* tile, int* q0_slot, int q0,
                                         int warpgroup, bool wait_read) {
  namespace ws = warp_specialization;
  if (wait_read) ws::sync(kDqRead + warpgroup, kDqBarrierThreads);
  const int c = int(threadIdx.x) % wgmma::kWarpgroupThreads;
#pragma unroll
  for (int p = 0; p < Tile::dv / 4; ++p)
    *reinterpret_cast<float2*>(tile + p * kDqTilePairStride + 2 * c) = make_float2(dq[2 * p], dq[2 * p + 1]);
  if (c == 0) *q0_slot = q0;
  wgmma::fence_shared_for_async();  // the stores, for the bulk reduction's reads
  ws::arrive(kDqStored + warpgroup, kDqBarrierThreads);
}

// Where both forms' bodies begin: the third warpgroup gives its registers to the compute warpgroups, its
// first warp is the dQ warp (add_staged_dq) over this (batch, head)'s `steps` steps (bh; grad_q_sums: every
// (batch, head)'s tiles of sums), and its other warps leave. Returns whether this thread computes (its
// warpgroup then holds kComputeRegisters).
template <class Tile>
__device__ __forceinline__ bool take_roles(int warpgroup, float* grad_q_sums, int bh, int lq,
                                           const uint8_t* dq_tiles, const int* q0s, int steps) {
  if (warpgroup == Tile::warpgroups) {
    warp_specialization::registers_down<kDqWarpRegisters>();
    const int tid = int(threadIdx.x);
    if (tid / kWarpSize == Tile::threads / kWarpSize)
      add_staged_dq<Tile>(
          grad_q_sums + int64_t(bh) * ((lq + Tile::queries - 1) / Tile::queries) * (Tile::queries * Tile::dv),
          dq_tiles, q0s, steps, tid % kWarpSize);
    return false;
  }
  warp_specialization::registers_up<kComputeRegisters>();
  return true;
}

// The compute warpgroups' barrier (kComputeBarrier).
template <class Tile>
__device__ __forceinline__ void compute_sync() {
  warp_specialization::sync(kComputeBarrier, Tile::threads);
}
#endif

// dK (with the softmax scale) and dV of the lane's keys (key, key + 8; `at`: key's row at this head, in
// elements): stored, or with the query steps split into parts, a share added into their f32 sums.
template <class T, class Tile>
__device__ __forceinline__ void store_key_gradients(const float (&dk)[Tile::dv / 2],
                                                    const float (&dv)[Tile::dv / 2], int64_t at, int key,
                                                    int t, T* grad_k, T* grad_v, float* grad_k_sums,
                                                    float* grad_v_sums, bool split, const GradientArgs& ga) {
  const AttentionArgs& a = ga.a;
  if (split) {
    float* const k_row = grad_k_sums + at;
    float* const v_row = grad_v_sums + at;
#pragma unroll
    for (int n = 0; n < Tile::dv / 8; ++n) {
      if (n * 8 >= a.head_dim) continue;
      const int col = n * 8 + 2 * t;
      add_fragment(k_row + col, k_row + 8 * ga.grad_row + col, dk[4 * n] * ga.scale, dk[4 * n + 1] * ga.scale,
                   dk[4 * n + 2] * ga.scale, dk[4 * n + 3] * ga.scale, t, key < a.lk, key + 8 < a.lk);
      add_fragment(v_row + col, v_row + 8 * ga.grad_row + col, dv[4 * n], dv[4 * n + 1], dv[4 * n + 2],
                   dv[4 * n + 3], t, key < a.lk, key + 8 < a.lk);
    }
    return;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (key + 8 * half >= a.lk) continue;
    const int64_t row_at = at + 8 * half * ga.grad_row;
#pragma unroll
    for (int n = 0; n < Tile::dv / 8; ++n) {
      const int col = n * 8 + 2 * t;
      if (col >= a.head_dim) continue;  // head_dim is a multiple of 8, so col + 1 is in range too
      *reinterpret_cast<uint32_t*>(grad_v + row_at + col) =
          pack2<T>(dv[4 * n + 2 * half], dv[4 * n + 2 * half + 1]);
      *reinterpret_cast<uint32_t*>(grad_k + row_at + col) =
          pack2<T>(dk[4 * n + 2 * half] * ga.scale, dk[4 * n + 2 * half + 1] * ga.scale);
    }
  }
}
#endif

}  // namespace hd::gpu
