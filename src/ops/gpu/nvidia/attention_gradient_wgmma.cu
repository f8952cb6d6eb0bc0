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
//                                    read as an MN-major A, K read N-major: one warpgroup multiplies a
//                                    step's dQ over all 128 keys and stores it into a shared tile, which
//                                    the dQ warp (a third warpgroup's) adds into dQ's f32 sums with one
//                                    bulk reduction, every key block adding into the same tiles.
// Heads up to 64 take the paired form (attention_gradient_wgmma_paired.cuh: two steps between block
// barriers, each warpgroup one step's dQ of the previous pair); this file's body is the form of heads of
// 80 and 96 (one step a barrier, the warpgroups taking turns at dQ). What both share:
// attention_gradient_wgmma_tile.cuh.
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
#include "ops/gpu/nvidia/attention_gradient_wgmma_paired.cuh"
#include "ops/gpu/nvidia/attention_gradient_wgmma_tile.cuh"
#include "ops/gpu/nvidia/attention_wgmma_rows.cuh"
#include "ops/gpu/nvidia/wgmma.cuh"

namespace hd::gpu {

namespace {

using wgmma::kRowBytes;
using wgmma::kWarpgroupThreads;

// Heads of 80 and 96: one query step between block barriers, the warpgroups taking turns at dQ (the turn's
// warpgroup multiplies it over both halves of dSᵀ within the step, after a second barrier). Deferred to the
// next step (as heads up to 64 did before the paired form), 80 and 96 need all 255 registers and spill,
// and 80 was no faster (0.067 ms both, H200, 2026-11-28).
template <class T, class Tile>
__device__ __forceinline__ void gradient_body_turns(const T* __restrict__ q, const T* __restrict__ k,
                                                    const T* __restrict__ v, const T* __restrict__ grad_out,
                                                    const float* __restrict__ lse,
                                                    const float* __restrict__ delta,
                                                    float* __restrict__ grad_q_sums, T* __restrict__ grad_k,
                                                    T* __restrict__ grad_v, float* __restrict__ grad_k_sums,
                                                    float* __restrict__ grad_v_sums, const GradientArgs& ga) {
#if defined(HD_NVIDIA_WGMMA)
  constexpr int kQueries = Tile::queries, kKeys = Tile::keys, kDV = Tile::dv;
  static_assert(!Tile::paired, "one step a stage");
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
  // Both warpgroups' dSᵀ of the step: warpgroup 0's 64 keys' rows, then warpgroup 1's.
  uint8_t* const ds_both = base + Tile::ds_offset;

  const int tid = int(threadIdx.x);
  // The warpgroup's number, through a shuffle so that ptxas sees it is the same on every lane of a warp: with
  // the plain quotient it took the branches on it for divergent code and serialised every wgmma (C7520).
  const int warpgroup = int(shuffle(uint32_t(tid / kWarpgroupThreads), 0, kWarpSize));
  const int lane = tid % kWarpSize, g = lane / 4, t = lane % 4;
  // The lane's rows of the warpgroup's 64 (keys in Sᵀ, dK and dV; queries in dQ): row and row + 8.
  const int row = (tid % kWarpgroupThreads) / kWarpSize * 16 + g;
  const int bh = int(blockIdx.y), b = bh / a.heads, h = bh % a.heads;
  const int k0 = int(blockIdx.x) * kKeys, group_key0 = k0 + warpgroup * 64;
  const int64_t head = int64_t(h) * a.head_dim;
  const T* const q_base = q + int64_t(b) * a.lq * a.q_row + head;
  const T* const do_base = grad_out + int64_t(b) * a.lq * ga.grad_row + head;
  const QueryWalk walk(a, k0, kQueries);
  const int steps = walk.steps;
  const auto following = [&](int q0) { return walk.following(q0, kQueries); };
  uint8_t* const dq_tiles = base + Tile::dq_offset;
  int* const dq_q0s = reinterpret_cast<int*>(base + Tile::dq_q0_offset);
  // The third warpgroup (the dQ warp's) ends here.
  if (!take_roles<Tile>(warpgroup, grad_q_sums, bh, a.lq, dq_tiles, dq_q0s, steps)) return;

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
    load_step(0, walk.first);
    fetch_statistics(walk.first);
  }

  float dv[kDV / 2], dk[kDV / 2], dq[kDV / 2];
#pragma unroll
  for (int i = 0; i < kDV / 2; ++i) dv[i] = 0.f, dk[i] = 0.f;
  // Every key of this warpgroup is below lk: only causal masking can remove a score.
  const bool keys_whole = group_key0 + 64 <= a.lk;
  uint32_t p[kQueries / 16][4], ds[kQueries / 16][4];
  bool dq_staged = false;  // this warpgroup's dQ tile holds a step the dQ warp is to read

  for (int i = 0, q0 = walk.first; i < steps; ++i, q0 = following(q0)) {
    const int stage = i & 1;
    float* const lse_s = statistics + stage * 2 * kQueries;
    float* const delta_s = lse_s + kQueries;
    // This stage's statistics were last read in step i - 2, which every thread left before step i - 1's
    // barrier.
    if (tid < kQueries) lse_s[tid] = next_lse * kLog2e, delta_s[tid] = next_delta;

    async_wait<0>();                  // this step's tiles (and the first time K and V) have landed ...
    wgmma::fence_shared_for_async();  // ... where wgmma's reads see them ...
    compute_sync<Tile>();  // ... for every thread; and every warpgroup is done with the other stage and dSᵀ
    if (i + 1 < steps) {
      load_step(stage ^ 1, following(q0));
      fetch_statistics(following(q0));
    }
    const uint8_t* const q_s = q_tile(stage);
    const uint8_t* const do_s = do_tile(stage);

    float s[kQueries / 2], dp[kQueries / 2];
    wgmma::fence();
    issue_scores<T, Tile>(s, k_s + warpgroup * 64 * kRowBytes, q_s);
    issue_scores<T, Tile>(dp, v_s + warpgroup * 64 * kRowBytes, do_s);
    // The lane's queries' statistics, read while the products run (each read just before its use left the
    // warp waiting on shared memory at every one): lse now, delta after the probabilities.
    float2 lse2[kQueries / 8], delta2[kQueries / 8];
#pragma unroll
    for (int j = 0; j < kQueries / 8; ++j) lse2[j] = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t);
    wgmma::wait<1>();  // Sᵀ (dPᵀ may still run)
    wgmma::fence_operands(s);
    // Two copies of the loop, so that the masks' test is not a branch at each score where none applies.
    if (keys_whole && !a.causal)
      probabilities<T, Tile, false>(s, p, lse2, a, group_key0 + row, q0 + 2 * t);
    else
      probabilities<T, Tile, true>(s, p, lse2, a, group_key0 + row, q0 + 2 * t);
#pragma unroll
    for (int j = 0; j < kQueries / 8; ++j)
      delta2[j] = *reinterpret_cast<const float2*>(delta_s + 8 * j + 2 * t);
    wgmma::wait<0>();
    wgmma::fence_operands(dp);
    score_gradients<T, Tile>(dp, s, delta2, ds, ds_both + warpgroup * Tile::ds_bytes, row, t);
    wgmma::fence_shared_for_async();  // dSᵀ's stores, for wgmma's reads
    wgmma::fence();                   // p and ds were written by this thread's own instructions
    // Adding dQ into global memory bounded the kernel: with each warpgroup adding its own 64 keys' share at
    // every step, the atomics held their registers for the L2's answer (the most sampled stall on SDXL's
    // 64x64 self-attention, H100 profile 2026-11-28). One warpgroup a step multiplies over both halves, and
    // the turns keep the two warpgroups' work even over two steps: with atomics, SDXL 0.73 ms against 0.87,
    // SD1.5's 40-wide heads 0.51 against 0.59. (Summing the two halves in shared memory first had not paid,
    // 0.99 against 1.00, nor had cp.reduce.async.bulk a row at a time from these warps, 1.09.) Now the
    // warpgroup hands its step's dQ to the dQ warp as one tile (80-wide heads 0.059-0.060 ms -> 0.057-0.058,
    // H200, 2026-11-28), issuing the product before dV and dK so that the hand-off runs while theirs do.
    compute_sync<Tile>();  // both warpgroups' rows of dSᵀ are stored
    // Each branch waits for all of its own products: with a product still running where the two meet,
    // ptxas serialises every wgmma (C7514).
    if ((i & 1) != warpgroup) {
      issue_dv_dk<T, Tile>(dv, dk, p, ds, q_s, do_s);
      wgmma::wait<0>();
    } else {
      issue_dq<T, Tile>(dq, ds_both, k_s);
      issue_dv_dk<T, Tile>(dv, dk, p, ds, q_s, do_s);
      wgmma::wait<1>();  // dQ (dV's and dK's products may still run)
      wgmma::fence_operands(dq);
      stage_dq<Tile>(dq, reinterpret_cast<float*>(dq_tiles + warpgroup * Tile::dq_bytes), dq_q0s + warpgroup,
                     q0, warpgroup, dq_staged);
      dq_staged = true;
      wgmma::wait<0>();
    }
    wgmma::fence_operands(p);
    wgmma::fence_operands(ds);
  }

  if (steps == 0) async_wait<0>();  // the key and value copies, which no step waited for
  if (gridDim.z > 1 && steps == 0) return;  // no share of dK and dV to add
  const int key = group_key0 + row;
  store_key_gradients<T, Tile>(dk, dv, (int64_t(b) * a.lk + key) * ga.grad_row + head, key, t, grad_k, grad_v,
                               grad_k_sums, grad_v_sums, gridDim.z > 1, ga);
#else
  HD_TRAP();
#endif
}

template <class T, class Tile>
__global__ void __launch_bounds__(Tile::block_threads, 1)
    wgmma_gradient_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const T* __restrict__ grad_out, const float* __restrict__ lse,
                          const float* __restrict__ delta, float* __restrict__ grad_q_sums,
                          T* __restrict__ grad_k, T* __restrict__ grad_v, float* __restrict__ grad_k_sums,
                          float* __restrict__ grad_v_sums, GradientArgs ga) {
  if constexpr (Tile::paired)
    gradient_body_paired<T, Tile>(q, k, v, grad_out, lse, delta, grad_q_sums, grad_k, grad_v, grad_k_sums,
                                  grad_v_sums, ga);
  else
    gradient_body_turns<T, Tile>(q, k, v, grad_out, lse, delta, grad_q_sums, grad_k, grad_v, grad_k_sums,
                                 grad_v_sums, ga);
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
  const int parts =
      query_parts(key_blocks * batch_heads, (a.lq + Tile::queries - 1) / Tile::queries,
                  resident_blocks(kernel, Tile::block_threads, Tile::shared_bytes, device.index));
  const OwnedTensor k_sums = parts > 1 ? zeroed_sums(k.shape, device) : OwnedTensor();
  const OwnedTensor v_sums = parts > 1 ? zeroed_sums(k.shape, device) : OwnedTensor();
  const dim3 grid{unsigned(key_blocks), unsigned(batch_heads), unsigned(parts)};
  kernel<<<grid, Tile::block_threads, Tile::shared_bytes, current_stream()>>>(
      static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(v.data),
      static_cast<const T*>(grad_out.data), lse, delta, grad_q_sums, static_cast<T*>(grad_k.data),
      static_cast<T*>(grad_v.data), parts > 1 ? k_sums.ptr<float>() : nullptr,
      parts > 1 ? v_sums.ptr<float>() : nullptr, ga);
  HD_GPU_CHECK_LAUNCH();
  if (parts > 1) convert(k_sums, grad_k), convert(v_sums, grad_v);
}

// dQ's tiled sums (tiles of 64 queries x kDV, the head rounded up as the tile rounds it) into dQ: one thread
// an 8-element vector of a row, threads in dQ's order (so that the stores are whole sectors; the 8 floats
// a thread reads are one 32-byte sector of a tile). blockIdx.y: the batch.
template <class T, int kDV>
__global__ void narrow_dq_tiles_kernel(const float* __restrict__ sums, T* __restrict__ grad_q,
                                       GradientArgs ga) {
  const AttentionArgs& a = ga.a;
  constexpr int kQueries = 64;
  const int vectors = a.head_dim / 8;
  const int64_t count = int64_t(a.lq) * a.heads * vectors, tiles = (a.lq + kQueries - 1) / kQueries;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int n = int(i % vectors), h = int(i / vectors % a.heads),
              query = int(i / (int64_t(vectors) * a.heads));
    const int64_t bh = int64_t(blockIdx.y) * a.heads + h;
    const float* const src = sums + (bh * tiles + query / kQueries) * (kQueries * kDV) +
                             dq_tile_index_of_columns(query % kQueries, n);
    const float4 lo = *reinterpret_cast<const float4*>(src), hi = *reinterpret_cast<const float4*>(src + 4);
    const float sc = ga.scale;  // the softmax scale, left out of the sums
    const uint4 packed{pack2<T>(lo.x * sc, lo.y * sc), pack2<T>(lo.z * sc, lo.w * sc),
                       pack2<T>(hi.x * sc, hi.y * sc), pack2<T>(hi.z * sc, hi.w * sc)};
    *reinterpret_cast<uint4*>(grad_q + (int64_t(blockIdx.y) * a.lq + query) * ga.grad_row +
                              int64_t(h) * a.head_dim + n * 8) = packed;
  }
}

}  // namespace

int64_t wgmma_gradient_dq_tiles_size(int64_t batch_heads, int lq, int head_dim) {
  int width = 0;  // the tile's kDV
  with_head_sizes(head_dim, [&]<int kD, int kDV>() { width = kDV; });
  return batch_heads * ((lq + 63) / 64) * 64 * width;
}

void narrow_dq_tiles(const float* sums, const Tensor& grad_q, const GradientArgs& ga) {
  HD_CHECK(ga.a.head_dim % 8 == 0 && ga.a.head_dim <= kWgmmaGradientMaxHeadDim,
           "narrow_dq_tiles: heads of a multiple of 8 up to ", kWgmmaGradientMaxHeadDim, ", got ",
           ga.a.head_dim);
  constexpr int kThreads = 256;
  const int64_t vectors = int64_t(ga.a.lq) * ga.a.heads * (ga.a.head_dim / 8);
  const dim3 grid(unsigned(std::min<int64_t>((vectors + kThreads - 1) / kThreads, 4096)),
                  unsigned(grad_q.dim(0)));
  const auto run = [&]<class T>() {
    with_head_sizes(ga.a.head_dim, [&]<int kD, int kDV>() {
      if constexpr (kDV <= kWgmmaGradientMaxHeadDim)
        narrow_dq_tiles_kernel<T, kDV>
            <<<grid, kThreads, 0, current_stream()>>>(sums, static_cast<T*>(grad_q.data), ga);
    });
  };
  if (grad_q.dtype == DType::kF16)
    run.template operator()<__half>();
  else
    run.template operator()<Bf16>();
  HD_GPU_CHECK_LAUNCH();
}

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
