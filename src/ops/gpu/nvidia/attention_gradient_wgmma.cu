// Attention's gradient (FlashAttention-2's backward scheme, in FlashAttention-3's arrangement of the
// products) on Hopper's warpgroup instructions (wgmma.cuh), for sm_90a.
//
// Why a kernel of its own: the fragment-layer gradient (attention_backward.cu, mma.sync) took 2.2x-3.3x
// the time of cuDNN's backward behind torch's SDPA on SD's self-attention on an H100 (2026-11-27), about
// 120-170 TFLOP/s against cuDNN's 400.
//
// A block holds 128 keys of one (batch, head), 64 for each of its two warpgroups (K and V in shared memory
// for the whole kernel), and walks the query steps (64 queries each; Q, dO and their rows' statistics
// through two shared stages, the next step's copied while this one's products run). Per step each
// warpgroup computes, for its 64 keys:
//   Sᵀ = K Qᵀ and dPᵀ = V dOᵀ       both operands from shared memory, K-major (as the forward's S = Q Kᵀ);
//   Pᵀ = exp2(Sᵀ·scale·log2e − lse), dSᵀ = Pᵀ ∘ (dPᵀ − delta)   in registers (a query is a column);
//   dV += Pᵀ dO and dK += dSᵀ Q      Pᵀ and dSᵀ straight from registers (the accumulator layout is the A
//                                    fragment layout), dO and Q read N-major (as the forward's V);
//   dQ += dS K                       both warpgroups' dSᵀ stored to shared memory as held ([key][query]) and
//                                    read as an MN-major A, K read N-major: one warpgroup a step (the two
//                                    take turns) multiplies over all 128 keys and adds the result into f32
//                                    sums with vector atomics, every key block adding into the same rows;
//                                    for heads up to 64 that product runs during the next step, from a
//                                    second buffer of dSᵀ.
// The block's key blocks start their walk at different steps so that they do not all add into the same
// rows of dQ at once, and where the key blocks alone would not fill the GPU (cross-attention's 77 keys)
// the query steps are split among gridDim.z parts, each adding its share of dK and dV into f32 sums.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/attention_gradient.cuh"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/nvidia/attention_gradient_wgmma.h"
#include "ops/gpu/nvidia/attention_wgmma_rows.cuh"
#include "ops/gpu/nvidia/wgmma.cuh"

namespace hd::gpu {

namespace {

using wgmma::kRowBytes;
using wgmma::kWarpgroupThreads;

// One tile configuration: the head width the scores' products use (kD: rounded up to 16, their k) and the
// gradients' (kDV: rounded up to 8, their n). A row of Q, K, V or dO spans `atoms` blocks of 64 elements,
// each block of the tile's rows stored apart (wgmma.cuh's layout). Two warpgroups (one block a
// multiprocessor: 166-238 registers a thread) share each step's Q and dO, and take turns at dQ. One
// warpgroup a block, three a multiprocessor (168 registers: ptxas spills, and serialises the wgmma of
// heads from 64 up), was no faster once dQ took turns (H100, 2026-11-28: SD1.5's 40-wide heads 0.512 ms
// against 0.505, SDXL's 4096-token self-attention 1.10 against 0.73, SD1.5's 80-wide heads 0.14 against
// 0.07).
template <int kHead, int kValueHead>
struct GradientWgmmaTile {
  static constexpr int d = kHead, dv = kValueHead, warpgroups = 2;
  // Heads up to 64 multiply the dQ of step i during step i + 1, from a second buffer of dSᵀ: the barrier
  // between a step's dSᵀ stores and dQ's product goes, and dQ's product runs behind the next step's
  // scores (H200, 2026-11-28: SD1.5's 40-wide heads 0.477 ms against 0.502-0.505, SDXL's 4096-token
  // self-attention 0.719 against 0.724-0.729). Wider heads keep dQ within the step: deferred, 80 and 96 need
  // all 255 registers and spill, and 80 was no faster (0.067 ms both). Tried beside it and dropped (same
  // runs): both warpgroups multiplying half of dQ's columns every step (no faster); a third warpgroup adding
  // dQ's rows from shared memory with cp.reduce.async.bulk (27% slower at 40); dQ's sums kept per 64-query
  // tile in the fragments' order and added a tile at a time by one bulk reduction (at best equal, with a pass
  // back into dQ's order).
  static constexpr bool deferred = kValueHead <= 64;
  static constexpr int ds_buffers = deferred ? 2 : 1;
  static constexpr int keys = 64 * warpgroups, queries = 64, threads = kWarpgroupThreads * warpgroups;
  static constexpr int atoms = (d + 63) / 64, chunks = d / 8;
  static constexpr int q_block = queries * kRowBytes,
                       kv_block = keys * kRowBytes;             // one 64-element block's rows
  static constexpr size_t kv_bytes = size_t(kv_block) * atoms;  // K or V
  static constexpr size_t q_bytes = size_t(q_block) * atoms;    // Q or dO, one stage
  static constexpr size_t ds_bytes = size_t(64) * kRowBytes;    // a warpgroup's dSᵀ: 64 keys x 64 queries
  // K, V, two stages of (Q, dO), each warpgroup's dSᵀ (together the block's 128 keys' rows), two stages of
  // (lse, delta) f32: every tile starts on a 1024-byte boundary of the aligned window.
  static constexpr size_t v_offset = kv_bytes, q_offset = 2 * kv_bytes, ds_offset = q_offset + 4 * q_bytes;
  static constexpr size_t statistics_offset = ds_offset + ds_buffers * warpgroups * ds_bytes;
  static constexpr size_t shared_bytes = statistics_offset + 4 * queries * sizeof(float) + wgmma::kAtomBytes;
  static_assert(d % 16 == 0 && dv % 8 == 0 && dv <= d && d <= 128, "heads up to 128, k in steps of 16");
};

template <class T, class Tile>
__device__ __forceinline__ void gradient_body(const T* __restrict__ q, const T* __restrict__ k,
                                              const T* __restrict__ v, const T* __restrict__ grad_out,
                                              const float* __restrict__ lse, const float* __restrict__ delta,
                                              float* __restrict__ grad_q_sums, T* __restrict__ grad_k,
                                              T* __restrict__ grad_v, float* __restrict__ grad_k_sums,
                                              float* __restrict__ grad_v_sums, const GradientArgs& ga) {
#if defined(HD_NVIDIA_WGMMA)
  constexpr int kQueries = Tile::queries, kKeys = Tile::keys, kD = Tile::d, kDV = Tile::dv;
  const AttentionArgs& a = ga.a;
  extern __shared__ uint8_t shared_raw[];
  // Swizzle atoms (8 rows of 128 bytes) start on 1024-byte boundaries of the shared window.
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw));
  uint8_t* const base = shared_raw + ((1024 - (raw & 1023)) & 1023);
  uint8_t* const k_s = base;
  uint8_t* const v_s = base + Tile::v_offset;
  const auto q_tile = [&](int stage) { return base + Tile::q_offset + stage * 2 * Tile::q_bytes; };
  const auto do_tile = [&](int stage) { return q_tile(stage) + Tile::q_bytes; };
  float* const statistics = reinterpret_cast<float*>(base + Tile::statistics_offset);  // [stage][lse, delta]

  const int tid = int(threadIdx.x);
  // The warpgroup's number, through a shuffle so that ptxas sees it is the same on every lane of a warp:
  // with the plain quotient it took the warpgroups' turns at dQ for divergent code and serialised every
  // wgmma of the kernel (C7520). It also freed registers (SDXL's heads: 200 against 218).
  const int warpgroup = int(shuffle(uint32_t(tid / kWarpgroupThreads), 0, kWarpSize));
  // Both warpgroups' dSᵀ of one step (a buffer): warpgroup 0's 64 keys' rows, then warpgroup 1's.
  const auto ds_buffer = [&](int buffer) { return base + Tile::ds_offset + buffer * 2 * Tile::ds_bytes; };
  const int lane = tid % kWarpSize, g = lane / 4, t = lane % 4;
  // The lane's rows of the warpgroup's 64 (keys in Sᵀ, dK and dV; queries in dQ): row and row + 8.
  const int row = (tid % kWarpgroupThreads) / kWarpSize * 16 + g;
  const int bh = int(blockIdx.y), b = bh / a.heads, h = bh % a.heads;
  const int k0 = int(blockIdx.x) * kKeys, group_key0 = k0 + warpgroup * 64;
  const int64_t head = int64_t(h) * a.head_dim;
  const T* const q_base = q + int64_t(b) * a.lq * a.q_row + head;
  const T* const do_base = grad_out + int64_t(b) * a.lq * ga.grad_row + head;

  // Causal: queries before the block's first key see none of its keys. This block's part of the steps
  // from there, [part_begin, part_end), starting at its own step and wrapping around.
  const int first_query = a.causal ? (k0 / kQueries) * kQueries : 0;
  const int all_steps = max(0, (a.lq - first_query + kQueries - 1) / kQueries);
  const int part = int(blockIdx.z), parts = int(gridDim.z);
  const int step_begin = int(int64_t(part) * all_steps / parts),
            step_end = int(int64_t(part + 1) * all_steps / parts);
  const int steps = step_end - step_begin;
  const int part_begin = first_query + step_begin * kQueries;
  const int part_end = min(a.lq, first_query + step_end * kQueries);
  const int first_step_query = part_begin + int(int64_t(blockIdx.x) * steps / gridDim.x) * kQueries;
  const auto following = [&](int q0) { return q0 + kQueries < part_end ? q0 + kQueries : part_begin; };
  // Deferred form: whether this warpgroup multiplies and adds step i - 1's dQ during step i (i == steps:
  // the last step's, after the loop). The warpgroups take turns.
  const auto dq_turn = [&](int i) { return i > 0 && ((i - 1) & 1) == warpgroup; };

  const auto load_step = [&](int stage, int q0) {
    load_rows<Tile, kQueries>(q_tile(stage), q_base, a.q_row, q0, a.lq, a.head_dim);
    load_rows<Tile, kQueries>(do_tile(stage), do_base, ga.grad_row, q0, a.lq, a.head_dim);
    async_commit();
  };
  // A step's lse and delta, one query a thread, read into registers a step ahead (and taken into the exp2
  // domain only when stored: scaling them here stalled the warp on the load, H100 profile 2026-11-28).
  float next_lse = INFINITY, next_delta = 0.f;
  const auto fetch_statistics = [&](int q0) {
    const bool valid = tid < kQueries && q0 + tid < a.lq;
    next_lse = valid ? lse[int64_t(bh) * a.lq + q0 + tid] : INFINITY;  // past lq: no probability
    next_delta = valid ? delta[int64_t(bh) * a.lq + q0 + tid] : 0.f;
  };

  load_rows<Tile, kKeys>(k_s, k + int64_t(b) * a.lk * a.kv_row + head, a.kv_row, k0, a.lk, a.head_dim);
  load_rows<Tile, kKeys>(v_s, v + int64_t(b) * a.lk * a.kv_row + head, a.kv_row, k0, a.lk, a.head_dim);
  async_commit();
  if (steps > 0) {
    load_step(0, first_step_query);
    fetch_statistics(first_step_query);
  }

  float dv[kDV / 2], dk[kDV / 2];
#pragma unroll
  for (int i = 0; i < kDV / 2; ++i) dv[i] = 0.f, dk[i] = 0.f;
  // Every key of this warpgroup is below lk: only causal masking can remove a score.
  const bool keys_whole = group_key0 + 64 <= a.lk;
  uint32_t p[kQueries / 16][4], ds[kQueries / 16][4];

  // dQ (one step's 64 queries x kDV) = dS K over the block's 128 keys: A is both warpgroups' dSᵀ of that
  // step, one after the other, read MN-major (a row of 64 queries at one key), B is K read N-major.
  float dq[kDV / 2];
  const auto issue_dq = [&](const uint8_t* ds_both) {
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc)
      wgmma::mma_async_mn_major<kDV, T>(
          dq, wgmma::descriptor_n_major(ds_both + kc * 16 * kRowBytes, 64 * kRowBytes),
          wgmma::descriptor_n_major(k_s + kc * 16 * kRowBytes, Tile::kv_block), kc > 0);
    wgmma::commit();
  };
  // dq[4n + e] is (query dq_q0 + row + 8 (e / 2), column 8n + 2t + e % 2), added into dQ's f32 sums.
  const auto add_dq = [&](int dq_q0) {
    const int query = dq_q0 + row;
    float* const row_g = grad_q_sums + (int64_t(b) * a.lq + query) * ga.grad_row + head;
    const auto add = [&]<bool kPadded>() {
#pragma unroll
      for (int n = 0; n < kDV / 8; ++n) {
        const int col = n * 8 + 2 * t;
        if (kPadded && n * 8 >= a.head_dim) continue;  // the padding's columns (the same for every lane)
        add_fragment(row_g + col, row_g + 8 * ga.grad_row + col, dq[4 * n] * ga.scale,
                     dq[4 * n + 1] * ga.scale, dq[4 * n + 2] * ga.scale, dq[4 * n + 3] * ga.scale, t,
                     query < a.lq, query + 8 < a.lq);
      }
    };
    // The check of every column of every fragment, where no column is padding, cost a branch each.
    if (a.head_dim == kDV)
      add.template operator()<false>();
    else
      add.template operator()<true>();
  };

  int previous_q0 = first_step_query;
  for (int i = 0, q0 = first_step_query; i < steps; ++i, q0 = following(q0)) {
    const int stage = i & 1;
    float* const lse_s = statistics + stage * 2 * kQueries;
    float* const delta_s = lse_s + kQueries;
    // This stage's statistics were last read in step i - 2, which every thread left before step i - 1's
    // barrier.
    if (tid < kQueries) lse_s[tid] = next_lse * kLog2e, delta_s[tid] = next_delta;

    async_wait<0>();                  // this step's tiles (and the first time K and V) have landed ...
    wgmma::fence_shared_for_async();  // ... where wgmma's reads see them ...
    __syncthreads();  // ... for every thread; and every warpgroup is done with the other stage and dSᵀ
    if (i + 1 < steps) {
      load_step(stage ^ 1, following(q0));
      fetch_statistics(following(q0));
    }
    const uint8_t* const q_s = q_tile(stage);
    const uint8_t* const do_s = do_tile(stage);
    uint8_t* const ds_s = ds_buffer(Tile::deferred ? stage : 0) + warpgroup * Tile::ds_bytes;

    // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: k (the head) in steps of 16, 32 bytes further along a block's rows; this
    // warpgroup's keys are rows 64·warpgroup.. of K and V.
    float s[kQueries / 2], dp[kQueries / 2];
    const auto issue_scores = [&](float(&acc)[kQueries / 2], const uint8_t* keys, const uint8_t* queries) {
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const int block = kk / 4, offset = (kk % 4) * 32;
        wgmma::mma_async<kQueries, T>(
            acc, wgmma::descriptor(keys + block * Tile::kv_block + warpgroup * 64 * kRowBytes + offset),
            wgmma::descriptor(queries + block * Tile::q_block + offset), kk > 0);
      }
      wgmma::commit();
    };
    // dV += Pᵀ dO and dK += dSᵀ Q: k (the queries) in steps of 16, 16 rows (2048 bytes) further; dO's and
    // Q's 64-column blocks lie q_block bytes apart. The softmax scale goes on dK once, at the end.
    const auto issue_dv_dk = [&] {
#pragma unroll
      for (int kc = 0; kc < kQueries / 16; ++kc)
        wgmma::mma_async<kDV, T>(dv, p[kc],
                                 wgmma::descriptor_n_major(do_s + kc * 16 * kRowBytes, Tile::q_block));
#pragma unroll
      for (int kc = 0; kc < kQueries / 16; ++kc)
        wgmma::mma_async<kDV, T>(dk, ds[kc],
                                 wgmma::descriptor_n_major(q_s + kc * 16 * kRowBytes, Tile::q_block));
      wgmma::commit();
    };

    // One step; kDq (deferred form): this warpgroup also multiplies and adds the previous step's dQ, its
    // product running behind the scores' while the probabilities are computed.
    const auto step = [&]<bool kDq>() {
      wgmma::fence();
      issue_scores(s, k_s, q_s);
      issue_scores(dp, v_s, do_s);
      if constexpr (kDq) issue_dq(ds_buffer(stage ^ 1));
      // The lane's queries' statistics, read while the products run (each read just before its use left
      // the warp waiting on shared memory at every one): lse now, delta after the probabilities.
      float2 lse2[kQueries / 8], delta2[kQueries / 8];
#pragma unroll
      for (int j = 0; j < kQueries / 8; ++j)
        lse2[j] = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t);
      wgmma::wait<kDq ? 2 : 1>();  // Sᵀ (dPᵀ, and dQ, may still run)
      wgmma::fence_operands(s);

      // s[4j + e] is (key row + 8 (e / 2), query q0 + 8j + 2t + e % 2): Pᵀ in place, then packed as the A
      // fragments of dV's product, 16 queries a fragment. Two copies of the loop, so that the masks' test is
      // not a branch at each score where none applies.
      const auto probabilities = [&]<bool kMasked>() {
#pragma unroll
        for (int j = 0; j < kQueries / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float prob = fast_exp2(fmaf(s[4 * j + e], a.scale_log2, -((e & 1) ? lse2[j].y : lse2[j].x)));
            if constexpr (kMasked) {
              const int key = group_key0 + row + 8 * (e / 2), query = q0 + 8 * j + 2 * t + (e & 1);
              if (key >= a.lk || (a.causal && key > query)) prob = 0.f;
            }
            s[4 * j + e] = prob;
          }
          p[j / 2][(j % 2) * 2] = pack_probabilities<T>(s[4 * j], s[4 * j + 1]);
          p[j / 2][(j % 2) * 2 + 1] = pack_probabilities<T>(s[4 * j + 2], s[4 * j + 3]);
        }
      };
      if (keys_whole && !a.causal)
        probabilities.template operator()<false>();
      else
        probabilities.template operator()<true>();
#pragma unroll
      for (int j = 0; j < kQueries / 8; ++j)
        delta2[j] = *reinterpret_cast<const float2*>(delta_s + 8 * j + 2 * t);
      wgmma::wait<kDq ? 1 : 0>();  // dPᵀ (dQ may still run)
      wgmma::fence_operands(dp);
#pragma unroll
      for (int j = 0; j < kQueries / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          dp[4 * j + e] = s[4 * j + e] * (dp[4 * j + e] - ((e & 1) ? delta2[j].y : delta2[j].x));
        ds[j / 2][(j % 2) * 2] = pack_probabilities<T>(dp[4 * j], dp[4 * j + 1]);
        ds[j / 2][(j % 2) * 2 + 1] = pack_probabilities<T>(dp[4 * j + 2], dp[4 * j + 3]);
        // dSᵀ as held, [key][query]: the lane's two queries are neighbours, one 32-bit store a row. Chunk j
        // of a row is swizzled apart for each of the eight rows a store instruction's lanes span.
        *reinterpret_cast<uint32_t*>(ds_s + wgmma::swizzled(row, j) + 4 * t) = ds[j / 2][(j % 2) * 2];
        *reinterpret_cast<uint32_t*>(ds_s + wgmma::swizzled(row + 8, j) + 4 * t) = ds[j / 2][(j % 2) * 2 + 1];
      }
      wgmma::fence_shared_for_async();  // dSᵀ's stores, for wgmma's reads (this step's or the next's)
      wgmma::fence();                   // p and ds were written by this thread's own instructions
      if constexpr (Tile::deferred) {
        issue_dv_dk();
        if constexpr (kDq) {
          wgmma::wait<1>();  // the previous step's dQ (dV's and dK's products may still run)
          wgmma::fence_operands(dq);
          add_dq(previous_q0);
        }
        wgmma::wait<0>();
      } else {
        // Adding dQ into global memory bounds the kernel: with each warpgroup adding its own 64 keys' share
        // at every step, the atomics held their registers for the L2's answer (the most sampled stall on
        // SDXL's 64x64 self-attention, H100 profile 2026-11-28). One warpgroup a step multiplies over both
        // halves and adds, half the atomics, and the turns keep the two warpgroups' work even over two
        // steps: SDXL 0.73 ms against 0.87, SD1.5's 40-wide heads 0.51 against 0.59. (Summing the two halves
        // in shared memory first had not paid, 0.99 against 1.00, nor had the bulk-copy unit's
        // cp.reduce.async.bulk, 1.09.) The warpgroup at dQ issues it before dV and dK, so that its additions
        // run while their products do.
        __syncthreads();  // both warpgroups' rows of dSᵀ are stored
        // Each branch waits for all of its own products: with a product still running where the two meet,
        // ptxas serialises every wgmma (C7514).
        if ((i & 1) != warpgroup) {
          issue_dv_dk();
          wgmma::wait<0>();
        } else {
          issue_dq(ds_buffer(0));
          issue_dv_dk();
          wgmma::wait<1>();  // dQ (dV's and dK's products may still run)
          wgmma::fence_operands(dq);
          add_dq(q0);
          wgmma::wait<0>();
        }
      }
    };
    if (Tile::deferred && dq_turn(i))
      step.template operator()<true>();
    else
      step.template operator()<false>();
    wgmma::fence_operands(p);
    wgmma::fence_operands(ds);
    previous_q0 = q0;
  }
  if constexpr (Tile::deferred) {  // the last step's dQ
    if (steps > 0) {
      __syncthreads();  // both warpgroups' dSᵀ of the last step are stored
      if (dq_turn(steps)) {
        wgmma::fence();
        issue_dq(ds_buffer((steps - 1) & 1));
        wgmma::wait<0>();
        wgmma::fence_operands(dq);
        add_dq(previous_q0);
      }
    }
  }

  if (steps == 0) async_wait<0>();  // the key and value copies, which no step waited for
  const int key = group_key0 + row;
  if (parts > 1) {  // a share of dK and dV, added into their f32 sums
    if (steps == 0) return;
    float* const k_row = grad_k_sums + (int64_t(b) * a.lk + key) * ga.grad_row + head;
    float* const v_row = grad_v_sums + (int64_t(b) * a.lk + key) * ga.grad_row + head;
#pragma unroll
    for (int n = 0; n < kDV / 8; ++n) {
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
    const int64_t at = (int64_t(b) * a.lk + key + 8 * half) * ga.grad_row + head;
#pragma unroll
    for (int n = 0; n < kDV / 8; ++n) {
      const int col = n * 8 + 2 * t;
      if (col >= a.head_dim) continue;  // head_dim is a multiple of 8, so col + 1 is in range too
      *reinterpret_cast<uint32_t*>(grad_v + at + col) =
          pack2<T>(dv[4 * n + 2 * half], dv[4 * n + 2 * half + 1]);
      *reinterpret_cast<uint32_t*>(grad_k + at + col) =
          pack2<T>(dk[4 * n + 2 * half] * ga.scale, dk[4 * n + 2 * half + 1] * ga.scale);
    }
  }
#else
  HD_TRAP();
#endif
}

template <class T, class Tile>
__global__ void __launch_bounds__(Tile::threads)
    wgmma_gradient_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const T* __restrict__ grad_out, const float* __restrict__ lse,
                          const float* __restrict__ delta, float* __restrict__ grad_q_sums,
                          T* __restrict__ grad_k, T* __restrict__ grad_v, float* __restrict__ grad_k_sums,
                          float* __restrict__ grad_v_sums, GradientArgs ga) {
  gradient_body<T, Tile>(q, k, v, grad_out, lse, delta, grad_q_sums, grad_k, grad_v, grad_k_sums, grad_v_sums,
                         ga);
}

template <class T, class Tile>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad_out, const float* lse,
            const float* delta, float* grad_q_sums, const Tensor& grad_k, const Tensor& grad_v,
            const GradientArgs& ga) {
  const AttentionArgs& a = ga.a;
  const Device& device = q.device;
  const auto kernel = wgmma_gradient_kernel<T, Tile>;
  allow_dynamic_shared_memory(kernel, Tile::shared_bytes, device.index);
  const int64_t batch_heads = q.dim(0) * a.heads, key_blocks = (a.lk + Tile::keys - 1) / Tile::keys;
  const int parts = query_parts(key_blocks * batch_heads, (a.lq + Tile::queries - 1) / Tile::queries,
                                resident_blocks(kernel, Tile::threads, Tile::shared_bytes, device.index));
  const OwnedTensor k_sums = parts > 1 ? zeroed_sums(k.shape, device) : OwnedTensor();
  const OwnedTensor v_sums = parts > 1 ? zeroed_sums(k.shape, device) : OwnedTensor();
  const dim3 grid{unsigned(key_blocks), unsigned(batch_heads), unsigned(parts)};
  kernel<<<grid, Tile::threads, Tile::shared_bytes, current_stream()>>>(
      static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(v.data),
      static_cast<const T*>(grad_out.data), lse, delta, grad_q_sums, static_cast<T*>(grad_k.data),
      static_cast<T*>(grad_v.data), parts > 1 ? k_sums.ptr<float>() : nullptr,
      parts > 1 ? v_sums.ptr<float>() : nullptr, ga);
  HD_GPU_CHECK_LAUNCH();
  if (parts > 1) convert(k_sums, grad_k), convert(v_sums, grad_v);
}

}  // namespace

void attention_gradient_wgmma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad_out,
                              const float* lse, const float* delta, float* grad_q_sums, const Tensor& grad_k,
                              const Tensor& grad_v, const GradientArgs& ga) {
  HD_CHECK(ga.a.head_dim % 8 == 0 && ga.a.head_dim <= kWgmmaGradientMaxHeadDim,
           "attention_gradient_wgmma: head dimension ", ga.a.head_dim, " is not a multiple of 8 up to ",
           kWgmmaGradientMaxHeadDim);
  const auto run = [&]<class T>() {
    with_head_sizes(ga.a.head_dim, [&]<int kD, int kDV>() {
      if constexpr (kDV <= kWgmmaGradientMaxHeadDim) {
        launch<T, GradientWgmmaTile<kD, kDV>>(q, k, v, grad_out, lse, delta, grad_q_sums, grad_k, grad_v, ga);
      }
    });
  };
  if (q.dtype == DType::kF16) return run.template operator()<__half>();
  run.template operator()<Bf16>();
}

}  // namespace hd::gpu
