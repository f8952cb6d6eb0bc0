// Attention's gradient (FlashAttention-2's backward scheme) on NVIDIA's 32-lane fragment layout (tensor
// cores on sm_80+, the portable shuffles elsewhere, AMD included): no Lq x Lk matrix exists anywhere.
//   1. row_statistics: per query and head the softmax's log-sum-exp (natural log, as the forward writes
//      it: AttentionArgs::lse), recomputed from Q and K as the forward's online softmax does, and
//      delta = rowsum(dO ∘ O); or, given the forward's log-sum-exp, row_deltas_kernel: delta alone, which
//      also zeroes dQ's f32 sums (a memset of their own otherwise).
//   2. attention_gradient: each block takes 64 keys of one (batch, head), holds them and their values in
//      shared memory, and walks the query tiles: Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·scale·log2e − lse), dV += Pᵀ·dO,
//      dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − delta), dK += dSᵀ·Q; dQ += dS·K is summed over the key blocks
//      with f32 atomics (lse read as lse·log2(e): the exponentials are exp2). Each of the block's four
//      fragment groups owns 16 keys. The next query step's tiles are copied in the background, and each
//      key block starts its walk at its own step, so that a head's blocks do not all add into the same
//      rows of dQ at once; a head with few key blocks has its query steps split over several blocks.
//   3. dQ converted from its f32 sums.
// On a device with Hopper's warpgroup instructions, heads up to 96 take step 2 from
// nvidia/attention_gradient_wgmma.cu instead (1.3x-1.7x faster on SD's self-attention, H100, 2026-11-28).
// Everything accumulates in f32; inputs and gradients are f16 or bf16.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/attention_gradient.cuh"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/mma.cuh"
#include "ops/gpu/nvidia/attention_gradient_wgmma.h"
#include "ops/tuning/autotuner.h"

namespace hd::gpu {

namespace {

// The statistics kernels' blocks: four fragment groups of 32 lanes.
constexpr int kGroups = 4, kThreads = kGroups * kFragmentLanes;
// Tiles are copied in a loop, not from fixed addresses (for_each_tile_vector): the gradient kernel's dK and
// dV accumulators fill its registers, and the fixed addresses made it spill 72 bytes (sm_90, 2026-11-27).
constexpr bool kFixedCopies = false;
// The widest head whose gradient a 32-lane AMD target (RDNA) runs without spilling registers (the
// resource gate, tools/rocm/amd_kernel_report.py): dK's and dV's accumulators of wider heads do not fit
// its 256 registers a lane (CDNA's 512 hold them). Wider instances there are trap stubs, never launched:
// attention_backward_supported says no.
constexpr int kWave32AmdMaxHead = 96;
constexpr int kStatsQueries = 16 * kGroups, kStatsKeys = 64;

// attention_gradient's tiles for heads of kD (rounded up to 16) and its shared memory, described once for
// the kernel and its launch.
template <int kD, bool kPortable>
struct GradientTile {
  // Fragment groups of 32 lanes, 16 keys each: the block's keys. Eight (128 keys) for heads up to 48
  // (SD1.5's 40) on NVIDIA's tensor cores: half the blocks re-reading each Q and dO tile and adding into dQ.
  // On an H100 (2026-11-27) SD1.5's 4096-token gradient took 0.89 ms instead of 1.19-1.22 (f16; bf16 1.09
  // either way) and its cross-attention 0.071 instead of 0.085; at head size 64 eight groups were 14%
  // faster in f16 but 6% slower in bf16 and 7-24% slower on 1024 tokens, so the wider heads keep four.
  static constexpr int kGroups = !kPortable && kD <= 48 ? 8 : 4;
  static constexpr int kKeys = 16 * kGroups, kThreads = kGroups * kFragmentLanes;
  // Queries a step: 16 for the widest heads, whose dK and dV accumulators take most registers.
  static constexpr int kQueries = kD > 96 ? 16 : 32;
  // Query steps whose Q and dO tiles the block holds at once: 2 where the next step's are copied in the
  // background (NVIDIA's tensor-core path), 1 elsewhere (AMD's 64 KB of shared memory).
  static constexpr int kStages = kPortable ? 1 : 2;
  // In 16-bit elements: rows of the head tiles (K, V, Q, dO) and of dS ([query][key]).
  static constexpr int kStride = kD + kAttentionPad, kDsStride = kKeys + kAttentionPad;
  // K and V, then kStages pairs of Q and dO tiles, dS, then lse and delta (f32) for the step's queries.
  static constexpr int kKOffset = 0, kVOffset = kKeys * kStride;
  __host__ __device__ static constexpr int q_offset(int stage) {
    return (2 * kKeys + 2 * stage * kQueries) * kStride;
  }
  __host__ __device__ static constexpr int do_offset(int stage) {
    return q_offset(stage) + kQueries * kStride;
  }
  static constexpr int kDsOffset = (2 * kKeys + 2 * kStages * kQueries) * kStride;
  static constexpr int kStatisticsOffset = kDsOffset + kQueries * kDsStride;  // 16-bit units
  static constexpr size_t kSharedBytes =
      size_t(kStatisticsOffset) * sizeof(uint16_t) + 2 * kQueries * sizeof(float);
};

__device__ inline void zero(FragmentC& f) {
  f = FragmentC{{0.f, 0.f, 0.f, 0.f}};
}

// Two C fragments (16 rows x 8 columns each, neighbours in k) as one A fragment of the next product: the
// accumulator layout is the A layout.
template <class T>
__device__ inline FragmentA as_a(const FragmentC& lo, const FragmentC& hi) {
  return FragmentA{{pack2<T>(lo.r[0], lo.r[1]), pack2<T>(lo.r[2], lo.r[3]), pack2<T>(hi.r[0], hi.r[1]),
                    pack2<T>(hi.r[2], hi.r[3])}};
}

// Lanes a query of row_deltas takes: the head's 16-byte vectors rounded up to a power of two.
template <int kD>
constexpr int kDeltaLanes = kD / 8 <= 4    ? 4
                            : kD / 8 <= 8  ? 8
                            : kD / 8 <= 16 ? 16
                                           : kFragmentLanes;

// delta = rowsum(dO ∘ O) for queries [q0, q0 + kRows) of head h: kDeltaLanes lanes a query, each a dot
// product of 8 elements, then added across the lanes by shuffles in a fixed order. Every thread of the
// block takes part. Given kSums > 0 (f32 tensors laid out as dO, one after another at zero_sums,
// sums_stride elements apart: dQ's sums, and dK's and dV's where the keys are as many as the queries), each
// lane also zeroes the sums of the elements it read: one pass over those rows fewer than a memset of their
// own.
template <class T, int kD, int kRows, int kSums>
__device__ inline void row_deltas(const T* __restrict__ out, const T* __restrict__ grad_out,
                                  float* __restrict__ delta, float* __restrict__ zero_sums,
                                  int64_t sums_stride, const GradientArgs& ga, int b, int h, int bh, int q0) {
  constexpr int kLanes = kDeltaLanes<kD>;
  const AttentionArgs& a = ga.a;
  const int lane = int(threadIdx.x) % kLanes, vectors = a.head_dim / 8;
  for (int r = int(threadIdx.x) / kLanes; r < kRows; r += kThreads / kLanes) {  // whole kLanes groups loop
    const int query = q0 + r;
    float sum = 0.f;
    if (query < a.lq) {
      const int64_t at = (int64_t(b) * a.lq + query) * ga.grad_row + int64_t(h) * a.head_dim;
      for (int c = lane; c < vectors; c += kLanes) {
        T o8[8], g8[8];
        *reinterpret_cast<uint4*>(o8) = *reinterpret_cast<const uint4*>(out + at + c * 8);
        *reinterpret_cast<uint4*>(g8) = *reinterpret_cast<const uint4*>(grad_out + at + c * 8);
#pragma unroll
        for (int e = 0; e < 8; ++e) sum += to_float(o8[e]) * to_float(g8[e]);
#pragma unroll
        for (int i = 0; i < kSums; ++i) {
          float4* const zeroed = reinterpret_cast<float4*>(zero_sums + i * sums_stride + at + c * 8);
          zeroed[0] = zeroed[1] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
      }
    }
#pragma unroll
    for (int m = kLanes / 2; m > 0; m /= 2) sum += shuffle_xor(sum, m, kLanes);
    if (lane == 0 && query < a.lq) delta[int64_t(bh) * a.lq + query] = sum;
  }
}

// Queries a block of row_deltas_kernel takes: one each for its threads' groups of kDeltaLanes, so that the
// block makes one pass and small problems still fill the GPU (SD1.5's 256-token gradient, heads of 160:
// 64 blocks of 64 queries took 7.7 us on an H200, 2026-11-28, where cuDNN's delta kernel took 2.6; 1024
// blocks of 4 queries: 2.5).
template <int kD>
constexpr int kDeltaRows = kThreads / kDeltaLanes<kD>;

// 1'. delta alone, where the forward's log-sum-exp is given, and the f32 sums zeroed (row_deltas):
// kDeltaRows queries of one (batch·head) a block.
template <class T, int kD, int kSums>
__global__ void __launch_bounds__(kThreads)
    row_deltas_kernel(const T* __restrict__ out, const T* __restrict__ grad_out, float* __restrict__ delta,
                      float* __restrict__ sums, int64_t sums_stride, GradientArgs ga) {
  const int bh = int(blockIdx.y);
  row_deltas<T, kD, kDeltaRows<kD>, kSums>(out, grad_out, delta, sums, sums_stride, ga, bh / ga.a.heads,
                                           bh % ga.a.heads, bh, int(blockIdx.x) * kDeltaRows<kD>);
}

// 1''. delta alone, and dQ's sums zeroed where Hopper's kernel keeps them in tiles of 64 queries x kTileWidth
// floats (wgmma_gradient_dq_tiles_size): the grid spans the queries rounded up to whole tiles, and each block
// zeroes its queries' share of them, kDeltaRows x kTileWidth contiguous floats (a tile's floats are in
// fragment order, so a partial last tile is zeroed whole: its padding's share holds other queries' sums).
template <class T, int kD, int kTileWidth>
__global__ void __launch_bounds__(kThreads)
    row_deltas_tiles_kernel(const T* __restrict__ out, const T* __restrict__ grad_out,
                            float* __restrict__ delta, float* __restrict__ tiles, GradientArgs ga) {
  const int bh = int(blockIdx.y), q0 = int(blockIdx.x) * kDeltaRows<kD>;
  if (q0 < ga.a.lq)
    row_deltas<T, kD, kDeltaRows<kD>, 0>(out, grad_out, delta, nullptr, 0, ga, bh / ga.a.heads,
                                         bh % ga.a.heads, bh, q0);
  const int64_t padded = (ga.a.lq + 63) / 64 * 64;
  auto* const zeroed = reinterpret_cast<float4*>(tiles + (int64_t(bh) * padded + q0) * kTileWidth);
  static_assert(kDeltaRows<kD> * kTileWidth % 4 == 0 && 64 % kDeltaRows<kD> == 0,
                "whole vectors, whole tiles");
  for (int i = int(threadIdx.x); i < kDeltaRows<kD> * kTileWidth / 4; i += kThreads)
    zeroed[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// 1. lse and delta per (batch·head, query): 16 queries per fragment group. On NVIDIA's
// tensor-core path the key tiles come through two shared buffers, the next copied in the background while
// this one is used, where two fit the 48 KB of static shared memory (heads up to 96). Elsewhere one: AMD
// copies synchronously, and a second buffer there only cost waves (the resource report's occupancy fell
// from 2-3 to 1-2 on CDNA).
template <class T, int kD, bool kPortable>
__global__ void __launch_bounds__(kThreads)
    row_statistics(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ out,
                   const T* __restrict__ grad_out, float* __restrict__ lse, float* __restrict__ delta,
                   GradientArgs ga) {
  constexpr int kStride = kD + kAttentionPad;
  const AttentionArgs& a = ga.a;
  __shared__ __align__(16) uint16_t q_s[kStatsQueries * kStride];
  constexpr int kKeyStages =
      !kPortable && (kStatsQueries + 2 * kStatsKeys) * kStride * 2 <= 48 * 1024 ? 2 : 1;
  __shared__ __align__(16) uint16_t k_s[kKeyStages][kStatsKeys * kStride];
  const int group = int(threadIdx.x) / kFragmentLanes, lane = int(threadIdx.x) % kFragmentLanes;
  const int g = lane / 4, t = lane % 4;
  const int bh = int(blockIdx.y), b = bh / a.heads, h = bh % a.heads;
  const int q0 = int(blockIdx.x) * kStatsQueries;
  const T* q_base = q + int64_t(b) * a.lq * a.q_row + int64_t(h) * a.head_dim;
  const T* k_base = k + int64_t(b) * a.lk * a.kv_row + int64_t(h) * a.head_dim;
  const int key_end = a.causal ? min(a.lk, q0 + kStatsQueries) : a.lk;
  const auto load_keys = [&](int stage, int k0) {
    load_attention_rows_async<kD, kThreads, kStatsKeys, kFixedCopies>(k_s[stage], k_base, a.kv_row, k0, a.lk,
                                                                      a.head_dim);
    async_commit();
  };
  if constexpr (kKeyStages == 2) load_keys(0, 0);
  row_deltas<T, kD, kStatsQueries, 0>(out, grad_out, delta, nullptr, 0, ga, b, h, bh, q0);

  load_attention_rows<kD, kThreads, kStatsQueries, kFixedCopies>(q_s, q_base, a.q_row, q0, a.lq, a.head_dim);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int row = group * 16 + g;
  for (int k0 = 0, tile = 0; k0 < key_end; k0 += kStatsKeys, ++tile) {
    // The buffer written here was last read before the previous tile's middle barrier.
    if constexpr (kKeyStages == 2) {
      if (k0 + kStatsKeys < key_end)
        load_keys((tile + 1) & 1, k0 + kStatsKeys);
      else
        async_commit();  // an empty group keeps the count of groups in flight the same
      async_wait<1>();
    } else {
      load_keys(0, k0);
      async_wait<0>();
    }
    __syncthreads();  // this tile (and, the first time, Q) has landed for every thread
    const uint16_t* keys = k_s[kKeyStages == 2 ? tile & 1 : 0];
    FragmentC s[kStatsKeys / 8];
#pragma unroll
    for (int j = 0; j < kStatsKeys / 8; ++j) {
      zero(s[j]);
#pragma unroll
      for (int kc = 0; kc < kD / 16; ++kc)
        mma_16x8x16<T, kPortable>(s[j], load_a<kPortable>(q_s, kStride, group * 16, kc * 16),
                                  load_b<kPortable>(keys, kStride, j * 8, kc * 16));
    }
    __syncthreads();  // every thread is done with this buffer before the next tile refills it
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kStatsKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + j * 8 + 2 * t + (e & 1), query = q0 + row + (e >= 2 ? 8 : 0);
        if (key >= a.lk || (a.causal && key > query)) s[j].r[e] = -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j].r[e]);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tile_max[i] = fmaxf(tile_max[i], shuffle_xor(tile_max[i], 1, kFragmentLanes));
      tile_max[i] = fmaxf(tile_max[i], shuffle_xor(tile_max[i], 2, kFragmentLanes));
      const float m_new = fmaxf(m[i], tile_max[i]);
      if (m_new != -INFINITY) l[i] *= exp2f((m[i] - m_new) * a.scale_log2);
      m[i] = m_new;
    }
#pragma unroll
    for (int j = 0; j < kStatsKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (m[e / 2] != -INFINITY) l[e / 2] += exp2f((s[j].r[e] - m[e / 2]) * a.scale_log2);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += shuffle_xor(l[i], 1, kFragmentLanes);
    l[i] += shuffle_xor(l[i], 2, kFragmentLanes);
    const int query = q0 + row + 8 * i;
    // A row with no key (every key masked) has no probabilities: +inf makes every exp2 below 0.
    if (t == 0 && query < a.lq) lse[int64_t(bh) * a.lq + query] = row_log_sum_exp(m[i], l[i], a.scale_log2);
  }
}

// 2. dK, dV and dQ's f32 sums. kD: the head rounded up to 16 (the k dimension of Sᵀ and dPᵀ), kDV: rounded
// up to 8 (the n dimension of the gradients). The tiles, steps and stages: GradientTile.
//
// The key blocks of one head all add into the same rows of dQ's sums. Walking the query steps in the
// same order, they would add into the same addresses at the same time; with two stages each block
// starts its walk at its own step instead (block i of n at step i·steps/n) and wraps around.
//
// Where a head has few keys (cross-attention's 77: two key blocks), the blocks alone would not fill the
// GPU: with two stages the query steps are then split among gridDim.z blocks per key block (blockIdx.z:
// which part), and each adds its share of dK and dV into f32 sums (grad_k_sums, grad_v_sums) instead of
// storing it. One stage (AMD) keeps one part: the parts' bounds made CDNA's bf16 kernels spill scalar
// registers (gfx90a and gfx942, heads of 40-96; the resource gate, 2026-11-27).
template <class T, int kD, int kDV, bool kPortable>
__device__ __forceinline__ void attention_gradient_block(
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ grad_out,
    const float* __restrict__ lse, const float* __restrict__ delta, float* __restrict__ grad_q_sums,
    T* __restrict__ grad_k, T* __restrict__ grad_v, float* __restrict__ grad_k_sums,
    float* __restrict__ grad_v_sums, GradientArgs ga) {
  using Tile = GradientTile<kD, kPortable>;
  constexpr int kStride = Tile::kStride, kDsStride = Tile::kDsStride, kKeyBlock = Tile::kKeys;
  constexpr int kQueries = Tile::kQueries, kStages = Tile::kStages, kThreads = Tile::kThreads;
  constexpr int kRowGroups = kQueries / 16, kColumnParts = Tile::kGroups / kRowGroups;
  constexpr int kNFragments = kDV / 8, kPartFragments = (kNFragments + kColumnParts - 1) / kColumnParts;
  // The scores' k-steps outside the loop over queries (each K and V fragment loaded once a step) on
  // NVIDIA's tensor cores for heads of 64 to 96: on an H100 (2026-11-27) SDXL's gradients took 8%-11% less
  // time and SD1.5's 80-wide one 8% less; SD1.5's 40-wide one took 9% more (128 -> 164 registers, one
  // block fewer a multiprocessor), and the 128- and 160-wide ones spilled. AMD keeps the order its
  // resource gate passed.
  constexpr bool kStepFragmentsOnce = !kPortable && kD >= 64 && kD <= 96;
  const AttentionArgs& a = ga.a;
  extern __shared__ uint4 smem_raw[];
  uint16_t* const smem = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* k_s = smem + Tile::kKOffset;
  uint16_t* v_s = smem + Tile::kVOffset;
  const auto q_tile = [&](int stage) { return smem + Tile::q_offset(stage); };
  const auto do_tile = [&](int stage) { return smem + Tile::do_offset(stage); };
  uint16_t* ds_s = smem + Tile::kDsOffset;  // dS as [query][key], for dQ
  float* lse_s = reinterpret_cast<float*>(smem + Tile::kStatisticsOffset);
  float* delta_s = lse_s + kQueries;

  const int group = int(threadIdx.x) / kFragmentLanes, lane = int(threadIdx.x) % kFragmentLanes;
  const int g = lane / 4, t = lane % 4;
  const int bh = int(blockIdx.y), b = bh / a.heads, h = bh % a.heads;
  const int k0 = int(blockIdx.x) * kKeyBlock;
  const int64_t head = int64_t(h) * a.head_dim;
  const T* q_base = q + int64_t(b) * a.lq * a.q_row + head;
  const T* do_base = grad_out + int64_t(b) * a.lq * ga.grad_row + head;
  // Causal: queries before the block's first key see none of its keys. This block's part of the steps
  // from there: [part_begin, part_end) of the queries.
  const int first_query = a.causal ? (k0 / kQueries) * kQueries : 0;
  const int all_steps = max(0, (a.lq - first_query + kQueries - 1) / kQueries);
  const int part = kStages == 2 ? int(blockIdx.z) : 0, parts = kStages == 2 ? int(gridDim.z) : 1;
  const int step_begin = int(int64_t(part) * all_steps / parts),
            step_end = int(int64_t(part + 1) * all_steps / parts);
  const int steps = step_end - step_begin;
  const int part_begin = first_query + step_begin * kQueries;
  const int part_end = kStages == 2 ? min(a.lq, first_query + step_end * kQueries) : a.lq;
  // With one stage (AMD: one part) the walk starts at the first step and runs to the last, as a loop over
  // q0 alone: with the start and a step count, CDNA2's kernels for heads of 80 and 96 spilled scalar
  // registers.
  const int first_step_query =
      part_begin + (kStages == 2 ? int(int64_t(blockIdx.x) * steps / gridDim.x) : 0) * kQueries;
  const auto following = [&](int q0) {  // the query of the step after the one at q0, wrapping around
    return q0 + kQueries < part_end ? q0 + kQueries : part_begin;
  };
  const auto load_step = [&](int stage, int q0) {
    load_attention_rows_async<kD, kThreads, kQueries, kFixedCopies>(q_tile(stage), q_base, a.q_row, q0, a.lq,
                                                                    a.head_dim);
    load_attention_rows_async<kD, kThreads, kQueries, kFixedCopies>(do_tile(stage), do_base, ga.grad_row, q0,
                                                                    a.lq, a.head_dim);
    async_commit();
  };
  // A step's lse (in the exp2 domain) and delta, one query a thread: with two stages read into registers
  // a step ahead; with one read into shared memory at the step's start.
  float next_lse = INFINITY, next_delta = 0.f;
  const auto fetch_statistics = [&](int q0) {
    const int i = int(threadIdx.x);
    if (i < kQueries && q0 + i < a.lq) {
      next_lse = lse[int64_t(bh) * a.lq + q0 + i] * kLog2e;
      next_delta = delta[int64_t(bh) * a.lq + q0 + i];
    } else {
      next_lse = INFINITY, next_delta = 0.f;  // queries past lq: no probability, no gradient
    }
  };
  const auto store_statistics = [&](int q0) {
    if constexpr (kStages == 2) {
      if (threadIdx.x < kQueries) lse_s[threadIdx.x] = next_lse, delta_s[threadIdx.x] = next_delta;
    } else {
      for (int i = int(threadIdx.x); i < kQueries; i += kThreads) {
        const bool valid = q0 + i < a.lq;
        lse_s[i] = valid ? lse[int64_t(bh) * a.lq + q0 + i] * kLog2e : INFINITY;
        delta_s[i] = valid ? delta[int64_t(bh) * a.lq + q0 + i] : 0.f;
      }
    }
  };
  load_attention_rows_async<kD, kThreads, kKeyBlock, kFixedCopies>(
      k_s, k + int64_t(b) * a.lk * a.kv_row + head, a.kv_row, k0, a.lk, a.head_dim);
  load_attention_rows_async<kD, kThreads, kKeyBlock, kFixedCopies>(
      v_s, v + int64_t(b) * a.lk * a.kv_row + head, a.kv_row, k0, a.lk, a.head_dim);
  if (steps > 0 && kStages == 2) {
    load_step(0, first_step_query);  // one group with the keys and values
    fetch_statistics(first_step_query);
  }

  FragmentC dk[kNFragments], dv[kNFragments];
#pragma unroll
  for (int n = 0; n < kNFragments; ++n) zero(dk[n]), zero(dv[n]);
  const int key_row = group * 16;  // this group's keys in the block; the lane's are key_row + g and + 8
  // dQ's share of this group: query rows [dq_row, dq_row + 16) of the step, fragments from dq_first.
  const int dq_row = (group % kRowGroups) * 16, dq_first = (group / kRowGroups) * kPartFragments;
  for (int i = 0, q0 = first_step_query; kStages == 2 ? i < steps : q0 < part_end;
       ++i, q0 = kStages == 2 ? following(q0) : q0 + kQueries) {
    const int stage = kStages == 2 ? i & 1 : 0;
    // Every buffer written here was last read before the previous step's middle barrier.
    if constexpr (kStages == 2) {
      if (i + 1 < steps)
        load_step(stage ^ 1, following(q0));
      else
        async_commit();  // an empty group: the wait below still means "this step's copies"
      async_wait<1>();
    } else {
      load_step(0, q0);
      async_wait<0>();
    }
    store_statistics(q0);
    __syncthreads();  // this step's tiles and statistics (and, the first time, K and V) are there
    if (kStages == 2 && i + 1 < steps) fetch_statistics(following(q0));
    const uint16_t* q_s = q_tile(stage);
    const uint16_t* do_s = do_tile(stage);

    // Pᵀ and dPᵀ for this group's 16 keys and the step's queries.
    FragmentC p[kQueries / 8], dp[kQueries / 8];
    // The scores of query tile j into probabilities, and dPᵀ into dSᵀ.
    const auto to_probabilities = [&](int j) HD_INLINE {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + key_row + g + (e >= 2 ? 8 : 0), query_in_step = j * 8 + 2 * t + (e & 1);
        const int query = q0 + query_in_step;
        const bool masked = key >= a.lk || (a.causal && key > query);  // queries past lq have lse = +inf
        const float prob = masked ? 0.f : exp2f(fmaf(p[j].r[e], a.scale_log2, -lse_s[query_in_step]));
        p[j].r[e] = prob;
        dp[j].r[e] = prob * (dp[j].r[e] - delta_s[query_in_step]);  // dSᵀ
      }
    };
    if constexpr (kStepFragmentsOnce) {
      // Each k-step's K and V fragments loaded once for all the step's queries, Q's and dO's two query
      // tiles at a time (the loads are volatile: the compiler does not merge repeated ones).
#pragma unroll
      for (int j = 0; j < kQueries / 8; ++j) zero(p[j]), zero(dp[j]);
#pragma unroll
      for (int kc = 0; kc < kD / 16; ++kc) {
        const FragmentA ka = load_a<kPortable>(k_s, kStride, key_row, kc * 16);
        const FragmentA va = load_a<kPortable>(v_s, kStride, key_row, kc * 16);
#pragma unroll
        for (int j = 0; j < kQueries / 8; j += 2) {
          FragmentB qb[2], gb[2];
          load_b_pair<kPortable>(q_s, kStride, j * 8, kc * 16, qb[0], qb[1]);
          load_b_pair<kPortable>(do_s, kStride, j * 8, kc * 16, gb[0], gb[1]);
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            mma_16x8x16<T, kPortable>(p[j + half], ka, qb[half]);
            mma_16x8x16<T, kPortable>(dp[j + half], va, gb[half]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kQueries / 8; ++j) to_probabilities(j);
    } else {
#pragma unroll
      for (int j = 0; j < kQueries / 8; ++j) {
        zero(p[j]), zero(dp[j]);
#pragma unroll
        for (int kc = 0; kc < kD / 16; ++kc) {
          mma_16x8x16<T, kPortable>(p[j], load_a<kPortable>(k_s, kStride, key_row, kc * 16),
                                    load_b<kPortable>(q_s, kStride, j * 8, kc * 16));
          mma_16x8x16<T, kPortable>(dp[j], load_a<kPortable>(v_s, kStride, key_row, kc * 16),
                                    load_b<kPortable>(do_s, kStride, j * 8, kc * 16));
        }
        to_probabilities(j);
      }
    }
    // dV += Pᵀ·dO and dK += dSᵀ·Q (the scale is applied once, at the end).
#pragma unroll
    for (int kc = 0; kc < kQueries / 16; ++kc) {
      const FragmentA pa = as_a<T>(p[2 * kc], p[2 * kc + 1]), dsa = as_a<T>(dp[2 * kc], dp[2 * kc + 1]);
#pragma unroll
      for (int n = 0; n < kNFragments; ++n) {
        mma_16x8x16<T, kPortable>(dv[n], pa, load_b_transposed<kPortable>(do_s, kStride, kc * 16, n * 8));
        mma_16x8x16<T, kPortable>(dk[n], dsa, load_b_transposed<kPortable>(q_s, kStride, kc * 16, n * 8));
      }
    }
    // dS into shared memory as [query][key] for dQ += dS·K over the block's keys.
#pragma unroll
    for (int j = 0; j < kQueries / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key_row + g + (e >= 2 ? 8 : 0), query = j * 8 + 2 * t + (e & 1);
        ds_s[query * kDsStride + key] = uint16_t(pack2<T>(dp[j].r[e], 0.f) & 0xffffu);
      }
    }
    __syncthreads();  // dS is there; this step's Q, dO and statistics are no longer read
    FragmentC dq[kPartFragments];
#pragma unroll
    for (int n = 0; n < kPartFragments; ++n) zero(dq[n]);
#pragma unroll
    for (int kc = 0; kc < kKeyBlock / 16; ++kc) {
      const FragmentA dsa = load_a<kPortable>(ds_s, kDsStride, dq_row, kc * 16);
#pragma unroll
      for (int n = 0; n < kPartFragments; ++n) {
        if (dq_first + n < kNFragments)
          mma_16x8x16<T, kPortable>(dq[n], dsa,
                                    load_b_transposed<kPortable>(k_s, kStride, kc * 16, (dq_first + n) * 8));
      }
    }
    const int query = q0 + dq_row + g;
    float* row_g = grad_q_sums + (int64_t(b) * a.lq + query) * ga.grad_row + head;
#pragma unroll
    for (int n = 0; n < kPartFragments; ++n) {
      const int col = (dq_first + n) * 8 + 2 * t;
      if (dq_first + n >= kNFragments || (dq_first + n) * 8 >= a.head_dim) continue;  // whole fragments
#pragma unroll
      for (int e = 0; e < 4; ++e) dq[n].r[e] *= ga.scale;
      add_fragment(row_g + col, row_g + 8 * ga.grad_row + col, dq[n].r[0], dq[n].r[1], dq[n].r[2], dq[n].r[3],
                   t, query < a.lq, query + 8 < a.lq);
    }
  }

  if (steps == 0) async_commit(), async_wait<0>();  // the key and value copies, which no step waited for
  if (kStages == 2 && parts > 1) {                  // a share of dK and dV, added into their f32 sums
    if (steps == 0) return;
    const int key = k0 + key_row + g;
    float* k_row = grad_k_sums + (int64_t(b) * a.lk + key) * ga.grad_row + head;
    float* v_row = grad_v_sums + (int64_t(b) * a.lk + key) * ga.grad_row + head;
#pragma unroll
    for (int n = 0; n < kNFragments; ++n) {
      const int col = n * 8 + 2 * t;
      if (n * 8 >= a.head_dim) continue;  // whole fragments: head_dim is a multiple of 8
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[n].r[e] *= ga.scale;
      add_fragment(k_row + col, k_row + 8 * ga.grad_row + col, dk[n].r[0], dk[n].r[1], dk[n].r[2], dk[n].r[3],
                   t, key < a.lk, key + 8 < a.lk);
      add_fragment(v_row + col, v_row + 8 * ga.grad_row + col, dv[n].r[0], dv[n].r[1], dv[n].r[2], dv[n].r[3],
                   t, key < a.lk, key + 8 < a.lk);
    }
    return;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = k0 + key_row + g + 8 * half;
    if (key >= a.lk) continue;
    const int64_t at = (int64_t(b) * a.lk + key) * ga.grad_row + head;
#pragma unroll
    for (int n = 0; n < kNFragments; ++n) {
      const int col = n * 8 + 2 * t;
      if (col >= a.head_dim) continue;  // head_dim is a multiple of 8, so col + 1 is in range too
      *reinterpret_cast<uint32_t*>(grad_v + at + col) = pack2<T>(dv[n].r[2 * half], dv[n].r[2 * half + 1]);
      *reinterpret_cast<uint32_t*>(grad_k + at + col) =
          pack2<T>(dk[n].r[2 * half] * ga.scale, dk[n].r[2 * half + 1] * ga.scale);
    }
  }
}

template <class T, int kD, int kDV, bool kPortable>
__global__ void __launch_bounds__(
    (GradientTile<kD, kPortable>::kThreads))  // (): HIP's macro splits at commas
    attention_gradient(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                       const T* __restrict__ grad_out, const float* __restrict__ lse,
                       const float* __restrict__ delta, float* __restrict__ grad_q_sums,
                       T* __restrict__ grad_k, T* __restrict__ grad_v, float* __restrict__ grad_k_sums,
                       float* __restrict__ grad_v_sums, GradientArgs ga) {
#if defined(__HIP_DEVICE_COMPILE__)
  if constexpr (kWarpSize == 32 && kD > kWave32AmdMaxHead) {
    HD_TRAP();
    return;
  } else
#endif
    attention_gradient_block<T, kD, kDV, kPortable>(q, k, v, grad_out, lse, delta, grad_q_sums, grad_k,
                                                    grad_v, grad_k_sums, grad_v_sums, ga);
}

// The gradient's tensors: the forward's inputs and output, dO, the three gradients, and the forward's
// log-sum-exp (null: recomputed).
struct GradientOperands {
  const Tensor &grad_out, &q, &k, &v, &out, &grad_q, &grad_k, &grad_v;
  const Tensor* lse;
  KernelPath path;
};

template <class T, int kD, int kDV, bool kPortable>
void launch(const GradientOperands& t, const GradientArgs& ga) {
  const AttentionArgs& a = ga.a;
  const Device& device = t.q.device;
  const int64_t batch_heads = t.q.dim(0) * a.heads, rows = batch_heads * a.lq;
  const auto* qp = static_cast<const T*>(t.q.data);
  const auto* kp = static_cast<const T*>(t.k.data);
  const auto* gp = static_cast<const T*>(t.grad_out.data);
  const auto* op = static_cast<const T*>(t.out.data);
  OwnedTensor delta(Shape{rows}, DType::kF32, device), own_lse;
  // Which gradient kernel runs, and in how many parts, is decided first: where the fragment kernel splits a
  // self-attention's query steps, dK's and dV's sums sit after dQ's in one allocation, which the delta
  // kernel zeroes and one launch narrows (SD1.5's 256-token gradient at heads of 160 spent 2.9 us on two
  // memsets and 6.3 on three conversions, H200, 2026-11-28).
  bool warpgroup = false;
#if defined(HD_WITH_WGMMA)
  // Hopper's warpgroup kernel where the device has it (nvidia/attention_gradient_wgmma.cu) and the head
  // fits it; this file's kernel on every other NVIDIA GPU, and where a test asks for it
  // (KernelPath::kFragments) or the run does (--kernels fragments).
  if constexpr (!kPortable && kDV <= kWgmmaGradientMaxHeadDim)
    warpgroup = t.path == KernelPath::kTuned && has_warpgroup_mma(device.index) &&
                ops::kernel_choice() != ops::KernelChoice::kFragments;
#endif
  using Tile = GradientTile<kD, kPortable>;
  const auto kernel = attention_gradient<T, kD, kDV, kPortable>;
  const int64_t key_blocks = (a.lk + Tile::kKeys - 1) / Tile::kKeys;
  int parts = 1;
  if (!warpgroup) {
    allow_dynamic_shared_memory(kernel, Tile::kSharedBytes, device.index);
    if constexpr (Tile::kStages == 2)
      parts = query_parts(key_blocks * batch_heads, (a.lq + Tile::kQueries - 1) / Tile::kQueries,
                          resident_blocks(kernel, Tile::kThreads, Tile::kSharedBytes, device.index));
  }
  const int64_t count = t.q.numel();
  const bool stacked = parts > 1 && t.lse != nullptr && a.lk == a.lq;
  // dQ's f32 sums (and, stacked, dK's and dV's): zeroed by the delta kernel where the forward's
  // log-sum-exp is given, else by a memset. Hopper's kernel keeps dQ's in tiles of 64 queries
  // (wgmma_gradient_dq_tiles_size), which a delta kernel of their own zeroes.
  OwnedTensor sums;
  if (warpgroup) {
#if defined(HD_WITH_WGMMA)
    const Shape size{wgmma_gradient_dq_tiles_size(batch_heads, a.lq, a.head_dim)};
    if (t.lse != nullptr) {
      sums = OwnedTensor(size, DType::kF32, device);
      const dim3 grid(unsigned((a.lq + 63) / 64 * 64 / kDeltaRows<kD>), unsigned(batch_heads));
      row_deltas_tiles_kernel<T, kD, kDV>
          <<<grid, kThreads, 0, current_stream()>>>(op, gp, delta.ptr<float>(), sums.ptr<float>(), ga);
    } else {
      sums = zeroed_sums(size, device);
    }
#endif
  } else if (t.lse != nullptr) {
    sums = OwnedTensor(Shape{(stacked ? 3 : 1) * count}, DType::kF32, device);
    const dim3 grid(unsigned((a.lq + kDeltaRows<kD> - 1) / kDeltaRows<kD>), unsigned(batch_heads));
    const auto deltas = stacked ? row_deltas_kernel<T, kD, 3> : row_deltas_kernel<T, kD, 1>;
    deltas<<<grid, kThreads, 0, current_stream()>>>(op, gp, delta.ptr<float>(), sums.ptr<float>(), count, ga);
  } else {
    sums = zeroed_sums(Shape{count}, device);
  }
  if (t.lse == nullptr) {
    own_lse = OwnedTensor(Shape{rows}, DType::kF32, device);
    const dim3 grid(unsigned((a.lq + kStatsQueries - 1) / kStatsQueries), unsigned(batch_heads));
    row_statistics<T, kD, kPortable><<<grid, kThreads, 0, current_stream()>>>(
        qp, kp, op, gp, own_lse.ptr<float>(), delta.ptr<float>(), ga);
  }
  HD_GPU_CHECK_LAUNCH();
  const float* lse = t.lse != nullptr ? t.lse->ptr<float>() : own_lse.ptr<float>();
#if defined(HD_WITH_WGMMA)
  if (warpgroup) {
    attention_gradient_wgmma(t.q, t.k, t.v, t.grad_out, lse, delta.ptr<float>(), sums.ptr<float>(), t.grad_k,
                             t.grad_v, ga);
    return narrow_dq_tiles(sums.ptr<float>(), t.grad_q, ga);
  }
#endif
  const Tensor q_sums = Tensor::contiguous(sums.ptr<float>(), DType::kF32, t.q.shape, device);
  const OwnedTensor k_sums = parts > 1 && !stacked ? zeroed_sums(t.k.shape, device) : OwnedTensor();
  const OwnedTensor v_sums = parts > 1 && !stacked ? zeroed_sums(t.k.shape, device) : OwnedTensor();
  float* const k_sums_at = stacked ? sums.ptr<float>() + count : parts > 1 ? k_sums.ptr<float>() : nullptr;
  float* const v_sums_at = stacked     ? sums.ptr<float>() + 2 * count
                           : parts > 1 ? v_sums.ptr<float>()
                                       : nullptr;
  const dim3 grid{unsigned(key_blocks), unsigned(batch_heads), unsigned(parts)};
  kernel<<<grid, Tile::kThreads, Tile::kSharedBytes, current_stream()>>>(
      qp, kp, static_cast<const T*>(t.v.data), gp, lse, delta.ptr<float>(), q_sums.ptr<float>(),
      static_cast<T*>(t.grad_k.data), static_cast<T*>(t.grad_v.data), k_sums_at, v_sums_at, ga);
  HD_GPU_CHECK_LAUNCH();
  if (stacked) return narrow_stacked(sums.ptr<float>(), count, {&t.grad_q, &t.grad_k, &t.grad_v});
  convert(q_sums, t.grad_q);
  if (parts > 1) convert(k_sums, t.grad_k), convert(v_sums, t.grad_v);
}

template <class T, bool kPortable>
void dispatch_head_dim(const GradientOperands& t, const GradientArgs& ga) {
  with_head_sizes(ga.a.head_dim, [&]<int kD, int kDV>() { launch<T, kD, kDV, kPortable>(t, ga); });
}

}  // namespace

bool attention_backward_supported(const Tensor& q, int heads) {
  const int64_t head_dim = q.dim(2) / heads;
  if ((q.dtype != DType::kF16 && q.dtype != DType::kBF16) || head_dim % 8 != 0 || head_dim > kMaxFlashHeadDim)
    return false;
#if defined(HD_GPU_HIP)
  // Every AMD GPU but CDNA's (MFMA, 64-lane) runs 32-lane waves: see kWave32AmdMaxHead.
  if (head_dim > kWave32AmdMaxHead && device_matrix_unit(q.device.index) != MatrixUnit::kAmdMfma)
    return false;
#endif
  return true;
}

void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, int heads, bool causal, float scale, const Tensor& grad_q,
                        const Tensor& grad_k, const Tensor& grad_v, KernelPath path, const Tensor* lse) {
  const int head_dim = int(q.dim(2) / heads);
  for (const Tensor* t : {&grad_out, &q, &k, &v, &out, &grad_q, &grad_k, &grad_v})
    HD_CHECK_KIND(t->is_contiguous() && is_aligned(t->data, 16), ErrorKind::kUnsupported,
                  "attention_backward: the GPU kernel takes dense 16-byte-aligned tensors");
  HD_CHECK_KIND(attention_backward_supported(q, heads), ErrorKind::kUnsupported,
                "attention_backward: the GPU kernel takes f16 or bf16 heads of a multiple of 8 up to ",
                kMaxFlashHeadDim, " (", kWave32AmdMaxHead, " on AMD GPUs of 32-lane waves), got ",
                dtype_name(q.dtype), " heads of ", head_dim);
  if (q.dim(1) == 0 || k.dim(1) == 0) {
    if (k.dim(1) > 0) {  // no queries: no gradient reaches the keys and values
      HD_GPU_CHECK(cudaMemsetAsync(grad_k.data, 0, grad_k.nbytes(), current_stream()));
      HD_GPU_CHECK(cudaMemsetAsync(grad_v.data, 0, grad_v.nbytes(), current_stream()));
    }
    return;
  }
  const float softmax_scale = scale > 0.f ? scale : 1.f / std::sqrt(float(head_dim));
  const GradientArgs ga{{heads, int(q.dim(1)), int(k.dim(1)), head_dim, q.dim(2), k.dim(2), out.dim(2),
                         softmax_scale * kLog2e, causal},
                        q.dim(2),
                        softmax_scale};
  const GradientOperands operands{grad_out, q, k, v, out, grad_q, grad_k, grad_v, lse, path};
  HD_GPU_CHECK(cudaSetDevice(q.device.index));
#if defined(HD_GPU_HIP)
  (void)path;
  if (q.dtype == DType::kF16) return dispatch_head_dim<__half, true>(operands, ga);
  dispatch_head_dim<Bf16, true>(operands, ga);
#else
  const bool portable =
      path == KernelPath::kPortable || device_matrix_unit(q.device.index) != MatrixUnit::kNvidiaMma;
  if (q.dtype == DType::kF16) {
    portable ? dispatch_head_dim<__half, true>(operands, ga) : dispatch_head_dim<__half, false>(operands, ga);
  } else {
    portable ? dispatch_head_dim<Bf16, true>(operands, ga) : dispatch_head_dim<Bf16, false>(operands, ga);
  }
#endif
}

}  // namespace hd::gpu
