// Attention's gradient on Hopper's warpgroup instructions for heads up to 64 (SD1.5's 40, SDXL's 64): the
// paired form (attention_gradient_wgmma.cu describes the products; the tile:
// attention_gradient_wgmma_tile.cuh).
//
// A stage holds two query steps (sub-steps u = 0, 1 of pair P: steps 2P and 2P + 1) and the block meets at
// one barrier a pair. During pair P warpgroup w multiplies dQ of sub-step w of pair P - 1 (both
// warpgroups' dSᵀ of it were stored before the barrier), behind sub-step w's scores (behind sub-step 0's
// where pair P has one step), and adds it into dQ's sums while dV's and dK's products run; the last pair's
// dQ follows the loop. dSᵀ of pair P is stored in buffer set P % 2. Each warpgroup thus does the same work
// between two barriers, where one step a barrier with the warpgroups taking turns at dQ left one waiting on
// the other at every barrier. On an H200 (2026-11-28) SDXL's 4096-token self-attention took 0.640 ms
// against 0.715-0.719 (one step a barrier, dQ deferred), its 1024-token 0.128-0.129 against 0.140-0.142,
// SD1.5's 40-wide heads 0.432-0.433 against 0.475-0.477. Tried beside it and dropped (the same day, code
// on the branch wip/gradient-pingpong): the warpgroups half a step apart, one's scores and exponentials
// beside the other's dV, dK and dQ products, a block barrier between the halves (0.707 ms on SDXL, 0.480 on
// SD1.5's heads: the warpgroup at the exponentials bounds every half); the exponentials two at a time in
// f16 (ex2.approx.f16x2 is two MUFU.EX2.F16 instructions on sm_90: no faster, 3x the error).
#pragma once

#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/nvidia/attention_gradient_wgmma_tile.cuh"

namespace hd::gpu {

template <class T, class Tile>
__device__ __forceinline__ void gradient_body_paired(
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ grad_out,
    const float* __restrict__ lse, const float* __restrict__ delta, float* __restrict__ grad_q_sums,
    T* __restrict__ grad_k, T* __restrict__ grad_v, float* __restrict__ grad_k_sums,
    float* __restrict__ grad_v_sums, const GradientArgs& ga) {
#if defined(HD_NVIDIA_WGMMA)
  constexpr int kQueries = Tile::queries, kKeys = Tile::keys, kDV = Tile::dv;
  static_assert(Tile::paired && Tile::atoms == 1, "a step's Q and dO are one 64-element block of rows each");
  const AttentionArgs& a = ga.a;
  extern __shared__ uint8_t shared_raw[];
  // Swizzle atoms (8 rows of 128 bytes) start on 1024-byte boundaries of the shared window.
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw));
  uint8_t* const base = shared_raw + ((1024 - (raw & 1023)) & 1023);
  uint8_t* const k_s = base;
  uint8_t* const v_s = base + Tile::v_offset;
  // Stage s: Q of sub-steps 0 and 1, then dO of both; their lse and delta: [stage][u][lse, delta].
  const auto q_tile = [&](int stage, int u) {
    return base + Tile::q_offset + (stage * 4 + u) * Tile::q_bytes;
  };
  const auto do_tile = [&](int stage, int u) { return q_tile(stage, u) + 2 * Tile::q_bytes; };
  float* const statistics = reinterpret_cast<float*>(base + Tile::statistics_offset);
  const auto lse_tile = [&](int stage, int u) { return statistics + (stage * 2 + u) * 2 * kQueries; };
  // Both warpgroups' dSᵀ of sub-step u of a pair in buffer set `set`: warpgroup 0's 64 keys' rows, then 1's.
  const auto ds_buffer = [&](int set, int u) {
    return base + Tile::ds_offset + (set * 2 + u) * 2 * Tile::ds_bytes;
  };

  const int tid = int(threadIdx.x);
  // The warpgroup's number, through a shuffle so that ptxas sees it is the same on every lane of a warp: with
  // the plain quotient it took the branches on it for divergent code and serialised every wgmma (C7520).
  const int warpgroup = int(shuffle(uint32_t(tid / wgmma::kWarpgroupThreads), 0, kWarpSize));
  const int lane = tid % kWarpSize, g = lane / 4, t = lane % 4;
  // The lane's rows of the warpgroup's 64 (keys in Sᵀ, dK and dV; queries in dQ): row and row + 8.
  const int row = (tid % wgmma::kWarpgroupThreads) / kWarpSize * 16 + g;
  const int bh = int(blockIdx.y), b = bh / a.heads, h = bh % a.heads;
  const int k0 = int(blockIdx.x) * kKeys, group_key0 = k0 + warpgroup * 64;
  const int64_t head = int64_t(h) * a.head_dim;
  const T* const q_base = q + int64_t(b) * a.lq * a.q_row + head;
  const T* const do_base = grad_out + int64_t(b) * a.lq * ga.grad_row + head;
  const QueryWalk walk(a, k0, kQueries);
  const int pairs = (walk.steps + 1) / 2;
  const auto has_second = [&](int pair) { return 2 * pair + 1 < walk.steps; };
  const auto following = [&](int q0) { return walk.following(q0, kQueries); };
  uint8_t* const dq_tiles = base + Tile::dq_offset;
  int* const dq_q0s = reinterpret_cast<int*>(base + Tile::dq_q0_offset);
  // The third warpgroup (the dQ warp's) ends here.
  if (!take_roles<Tile>(warpgroup, grad_q_sums, bh, a.lq, dq_tiles, dq_q0s, walk.steps)) return;

  // A pair's tiles: q0s[0]'s and, where the pair has it, q0s[1]'s.
  const auto load_pair = [&](int stage, const int(&q0s)[2], bool second) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (u == 1 && !second) break;
      load_rows<Tile, kQueries>(q_tile(stage, u), q_base, a.q_row, q0s[u], a.lq, a.head_dim);
      load_rows<Tile, kQueries>(do_tile(stage, u), do_base, ga.grad_row, q0s[u], a.lq, a.head_dim);
    }
    async_commit();
  };
  // A pair's lse and delta, read into registers a pair ahead by threads 0-127 (sub-step tid / 64, query
  // tid % 64) and taken into the exp2 domain only when stored.
  float next_lse = INFINITY, next_delta = 0.f;
  const auto fetch_statistics = [&](const int(&q0s)[2], bool second) {
    const int u = (tid / kQueries) & 1, query = q0s[u] + tid % kQueries;
    const bool valid = tid < 2 * kQueries && (u == 0 || second) && query < a.lq;
    next_lse = valid ? lse[int64_t(bh) * a.lq + query] : INFINITY;  // past lq: no probability
    next_delta = valid ? delta[int64_t(bh) * a.lq + query] : 0.f;
  };

  load_rows<Tile, kKeys>(k_s, k + int64_t(b) * a.lk * a.kv_row + head, a.kv_row, k0, a.lk, a.head_dim);
  load_rows<Tile, kKeys>(v_s, v + int64_t(b) * a.lk * a.kv_row + head, a.kv_row, k0, a.lk, a.head_dim);
  async_commit();
  int pair_q0[2] = {walk.first, following(walk.first)};
  int previous_q0[2] = {pair_q0[0], pair_q0[1]};
  if (walk.steps > 0) {
    load_pair(0, pair_q0, has_second(0));
    fetch_statistics(pair_q0, has_second(0));
  }

  float dv[kDV / 2], dk[kDV / 2], dq[kDV / 2];
#pragma unroll
  for (int i = 0; i < kDV / 2; ++i) dv[i] = 0.f, dk[i] = 0.f;
  // Every key of this warpgroup is below lk: only causal masking can remove a score.
  const bool keys_whole = group_key0 + 64 <= a.lk;
  uint32_t p[kQueries / 16][4], ds[kQueries / 16][4];
  bool dq_staged = false;  // this warpgroup's dQ tile holds a step the dQ warp is to read
  const auto hand_dq = [&](int dq_q0) {
    stage_dq<Tile>(dq, reinterpret_cast<float*>(dq_tiles + warpgroup * Tile::dq_bytes), dq_q0s + warpgroup,
                   dq_q0, warpgroup, dq_staged);
    dq_staged = true;
  };

  for (int pair = 0; pair < pairs; ++pair) {
    const int stage = pair & 1;
    const bool second = has_second(pair);
    // This stage's statistics were last read in pair - 2, which every thread left before pair - 1's barrier.
    if (tid < 2 * kQueries) {
      float* const lse_s = lse_tile(stage, tid / kQueries);
      lse_s[tid % kQueries] = next_lse * kLog2e, lse_s[kQueries + tid % kQueries] = next_delta;
    }
    async_wait<0>();                  // this pair's tiles (and the first time K and V) have landed ...
    wgmma::fence_shared_for_async();  // ... where wgmma's reads see them ...
    compute_sync<Tile>();  // ... for every thread; both warpgroups' dSᵀ of the previous pair are stored, and
                           // every warpgroup is done with the other stage and this set's dSᵀ buffers
    const int this_q0[2] = {pair_q0[0], pair_q0[1]};
    if (pair + 1 < pairs) {  // this pair has two steps
      pair_q0[0] = following(this_q0[1]);
      pair_q0[1] = following(pair_q0[0]);
      load_pair(stage ^ 1, pair_q0, has_second(pair + 1));
      fetch_statistics(pair_q0, has_second(pair + 1));
    }
    const int dq_sub = second ? warpgroup : 0;

    for (int u = 0; u < 2; ++u) {
      if (u == 1 && !second) break;
      const int q0 = this_q0[u];
      const uint8_t* const q_s = q_tile(stage, u);
      const uint8_t* const do_s = do_tile(stage, u);
      const float* const lse_s = lse_tile(stage, u);
      const float* const delta_s = lse_s + kQueries;
      uint8_t* const ds_s = ds_buffer(stage, u) + warpgroup * Tile::ds_bytes;
      // One step; kDq: this warpgroup also multiplies and adds its dQ of the previous pair, the product
      // running behind the scores' while the probabilities are computed.
      // The same sequence as the step of heads of 80 and 96 (attention_gradient_wgmma.cu), written out in
      // each: as one function taking dQ's issue as a callback it made ptxas allocate differently, and the
      // 40-wide heads took 0.446-0.449 ms against 0.432-0.433 (H200, 2026-11-28; 220 registers against 215).
      const auto step = [&]<bool kDq>() {
        float s[kQueries / 2], dp[kQueries / 2];
        wgmma::fence();
        issue_scores<T, Tile>(s, k_s + warpgroup * 64 * wgmma::kRowBytes, q_s);
        issue_scores<T, Tile>(dp, v_s + warpgroup * 64 * wgmma::kRowBytes, do_s);
        if constexpr (kDq) issue_dq<T, Tile>(dq, ds_buffer(stage ^ 1, warpgroup), k_s);
        // The lane's queries' statistics, read while the products run (each read just before its use left
        // the warp waiting on shared memory at every one): lse now, delta after the probabilities.
        float2 lse2[kQueries / 8], delta2[kQueries / 8];
#pragma unroll
        for (int j = 0; j < kQueries / 8; ++j)
          lse2[j] = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t);
        wgmma::wait<kDq ? 2 : 1>();  // Sᵀ (dPᵀ, and dQ, may still run)
        wgmma::fence_operands(s);
        // Two copies of the loop, so that the masks' test is not a branch at each score where none applies.
        if (keys_whole && !a.causal)
          probabilities<T, Tile, false>(s, p, lse2, a, group_key0 + row, q0 + 2 * t);
        else
          probabilities<T, Tile, true>(s, p, lse2, a, group_key0 + row, q0 + 2 * t);
#pragma unroll
        for (int j = 0; j < kQueries / 8; ++j)
          delta2[j] = *reinterpret_cast<const float2*>(delta_s + 8 * j + 2 * t);
        wgmma::wait<kDq ? 1 : 0>();  // dPᵀ (dQ may still run)
        wgmma::fence_operands(dp);
        score_gradients<T, Tile>(dp, s, delta2, ds, ds_s, row, t);
        wgmma::fence_shared_for_async();  // dSᵀ's stores, for the next pair's dQ
        wgmma::fence();                   // p and ds were written by this thread's own instructions
        issue_dv_dk<T, Tile>(dv, dk, p, ds, q_s, do_s);
        if constexpr (kDq) {
          wgmma::wait<1>();  // dQ (dV's and dK's products may still run)
          wgmma::fence_operands(dq);
          hand_dq(previous_q0[warpgroup]);
        }
        wgmma::wait<0>();
      };
      if (pair > 0 && u == dq_sub)
        step.template operator()<true>();
      else
        step.template operator()<false>();
      wgmma::fence_operands(p);
      wgmma::fence_operands(ds);
    }
    previous_q0[0] = this_q0[0], previous_q0[1] = this_q0[1];
  }
  if (walk.steps > 0) {  // the last pair's dQ: each warpgroup its own sub-step's, where the pair has it
    compute_sync<Tile>();  // both warpgroups' dSᵀ of the last pair are stored
    const int last = pairs - 1;
    if (warpgroup == 0 || has_second(last)) {
      wgmma::fence();
      issue_dq<T, Tile>(dq, ds_buffer(last & 1, warpgroup), k_s);
      wgmma::wait<0>();
      wgmma::fence_operands(dq);
      hand_dq(previous_q0[warpgroup]);
    }
  }

  async_wait<0>();  // the key and value copies, which no pair waited for where there was none
  if (gridDim.z > 1 && walk.steps == 0) return;  // no share of dK and dV to add
  const int key = group_key0 + row;
  store_key_gradients<T, Tile>(dk, dv, (int64_t(b) * a.lk + key) * ga.grad_row + head, key, t, grad_k, grad_v,
                               grad_k_sums, grad_v_sums, gridDim.z > 1, ga);
#else
  HD_TRAP();
#endif
}

}  // namespace hd::gpu
