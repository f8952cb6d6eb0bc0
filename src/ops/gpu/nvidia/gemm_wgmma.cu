// GEMM / implicit-GEMM convolution tiles on Hopper's warpgroup instructions (wgmma.cuh), for sm_90a.
//
// Why a kernel of its own: on an H100 the fragment-layer tiles (mma.sync, gemm_kernel.cuh) stop near
// 310-340 TFLOP/s on large products and 190-270 on the UNet's convolutions (2026-11-26/27). The
// instruction is the limit: mma.sync peaks at 635-650 TFLOP/s on an H100 with its operands already in
// registers, and reaches 471-491 fed by ldmatrix from shared memory as those tiles feed it (8 warps a
// multiprocessor), where wgmma, which reads both operands from shared memory itself, reaches 973-993
// (tools/device/matrix_peak.cu, 2026-11-27).
//
// A block is one or two warpgroups (128 or 256 threads); each owns 64 rows of a 64 or 128 x bn tile of C
// and keeps its 64 x bn f32 accumulators in registers (bn / 2 a thread). k streams through shared memory
// in steps of 64: all the block's threads copy a step's vectors with cp.async (the same im2col addressing
// as the fragment-layer kernel, TileOperands) into 128-byte swizzled rows, `stages - 2` steps ahead; each
// warpgroup then issues four wgmma (16 k each) and waits only for the previous step's, so the tensor cores
// work while the next step's copies and this step's barrier go on.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/gemm_kernel.cuh"
#include "ops/gpu/gemm_operands.cuh"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/nvidia/gemm_wgmma.h"
#include "ops/gpu/nvidia/wgmma.cuh"

namespace hd::gpu::gemm_tiles {

namespace {

constexpr int kStepK = 64;
using wgmma::kRowBytes;  // a k-step's 64 elements of a row
static_assert(kStepK * 2 == kRowBytes, "a k-step fills one swizzled row");

// A warpgroup tile configuration: the width of C it computes (a wgmma width), the k-steps of shared
// memory (stages - 2 in flight ahead of the one the tensor cores read, and the one they read last),
// split-K, and the rows of C (64 per warpgroup). One-warpgroup tiles (64 rows) give grids of about one
// wave twice the blocks of two-warpgroup ones: SD's 32x32 level at batch 2 (2048 rows of 640 channels)
// is 64 tiles of 128 x 160, 128 of 64 x 160.
// gated: GEGLU in the epilogue (the fragment layer's TileShape::gated, gemm_operands.cuh's chunks).
template <int kWidth, int kStageCount, int kSplitCount = 1, int kRows = 128, bool kGated = false>
struct WgmmaTile {
  static constexpr int bm = kRows, bn = kWidth, stages = kStageCount, splits = kSplitCount;
  static constexpr bool gated = kGated;
  static constexpr int warpgroups = bm / 64, threads = warpgroups * wgmma::kWarpgroupThreads;
  static constexpr size_t stage_bytes = size_t(bm + bn) * kRowBytes;
  static constexpr size_t shared_bytes = stages * stage_bytes + wgmma::kAtomBytes;  // + alignment
  static_assert(bm == 64 || bm == 128, "one or two warpgroups");
  static_assert(!gated || (splits == 1 && bn % kGateChunk == 0), "GEGLU tiles: no split-K, whole chunks");
  static std::string name() {
    return "wgmma-" + std::to_string(bm) + "x" + std::to_string(bn) + "s" + std::to_string(stages) +
           (splits > 1 ? "-split" + std::to_string(splits) : "") + (gated ? "-geglu" : "");
  }
};

template <class T, class Tile>
__global__ void __launch_bounds__(Tile::threads)
    wgmma_gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ bias,
                      const T* residual, T* c, float* __restrict__ partial, KernelArgs p) {
#if defined(HD_NVIDIA_WGMMA)
  constexpr int kBM = Tile::bm, kBN = Tile::bn, kThreads = Tile::threads, kStages = Tile::stages,
                kAhead = kStages - 2;
  constexpr size_t kStageBytes = Tile::stage_bytes, kABytes = size_t(kBM) * kRowBytes;
  static_assert(kAhead >= 1, "at least one k-step in flight");
  extern __shared__ uint8_t shared_raw[];
  // Swizzle atoms (8 rows of 128 bytes) start on 1024-byte boundaries of the shared window.
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw));
  uint8_t* const smem = shared_raw + ((1024 - (raw & 1023)) & 1023);

  const BlockBatch<T, (Tile::splits > 1)> block(a, b, bias, residual, c, partial, p);
  const int m0 = int(blockIdx.x) * kBM, n0 = int(blockIdx.y) * kBN, tid = int(threadIdx.x);
  const TileOperands<kBM, kBN, kThreads, kStepK, Tile::gated> in(p, block.a_bits, block.b_bits, m0, n0, tid,
                                                                 block.pad_top, block.pad_left);
  const auto load = [&](int stage, int k0) HD_INLINE {
    uint8_t* const a_tile = smem + stage * kStageBytes;
    uint8_t* const b_tile = a_tile + kABytes;
    in.for_each_vector(
        k0, [&](int i, const uint16_t* src, bool ok) HD_INLINE { copy_16_async(a_tile + wgmma::swizzled(in.row(i), in.vec), src, ok); },
        [&](int j, const uint16_t* src, bool ok) HD_INLINE { copy_16_async(b_tile + wgmma::swizzled(in.row(j), in.vec), src, ok); });
  };

  const int warpgroup = tid / wgmma::kWarpgroupThreads;  // its 64 rows of the tile
  float acc[kBN / 2];
#pragma unroll
  for (float& v : acc) v = 0.f;
  wgmma::fence_operands(acc);
  int first, steps;
  block.steps(p, kStepK, first, steps);
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < steps) load(s, (first + s) * kStepK);
    async_commit();  // empty groups too: the wait below counts groups
  }
  for (int s = 0; s < steps; ++s) {
    async_wait<kAhead - 1>();          // step s has landed (this thread's copies) ...
    wgmma::fence_shared_for_async();   // ... where wgmma's reads see it ...
    __syncthreads();                   // ... for every thread; and every warpgroup is done with step s - 2
    const int next = s + kAhead;       // into the stage step s - 2 used
    if (next < steps) load(next % kStages, (first + next) * kStepK);
    async_commit();
    const uint8_t* const a_tile = smem + (s % kStages) * kStageBytes + warpgroup * 64 * kRowBytes;
    const uint8_t* const b_tile = smem + (s % kStages) * kStageBytes + kABytes;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kStepK / 16; ++kk)  // 16 k = 32 bytes further along the swizzled rows
      wgmma::mma_async<kBN, T>(acc, wgmma::descriptor(a_tile + kk * 32), wgmma::descriptor(b_tile + kk * 32));
    wgmma::commit();
    wgmma::wait<1>();  // step s - 1's products are done: its stage is free after the next barrier
  }
  wgmma::wait<0>();
  wgmma::fence_operands(acc);

  // The accumulators' layout: warp w of the warpgroup holds rows 16w..16w+15; for each 8 columns j a
  // lane holds (row lane/4, columns 8j + 2(lane%4) and +1) and the same 8 rows further down.
  const int lane = tid % kWarpSize,
            row = warpgroup * 64 + (tid % wgmma::kWarpgroupThreads) / kWarpSize * 16 + lane / 4;
  if constexpr (Tile::splits > 1) {
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int col = n0 + j * 8 + 2 * (lane % 4);
      block.out.store(m0 + row, col, acc[4 * j], acc[4 * j + 1], true);
      block.out.store(m0 + row + 8, col, acc[4 * j + 2], acc[4 * j + 3], true);
    }
  } else {
    // C leaves through shared memory (the stages, free once every warpgroup's products are done), so
    // that each thread stores 16 contiguous bytes of a row: straight from the accumulators a warp's
    // store covered 8 rows x 16 bytes, which made the short products (k = 320, 42 MB of C) slow.
    constexpr int kPitch = staged_pitch(kBN);
    static_assert(size_t(kBM) * kPitch * sizeof(float) <= kStages * kStageBytes, "C fits in the stages");
    float* const staged = reinterpret_cast<float*>(smem);
    __syncthreads();  // every warpgroup has left the stages
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int col = staged_column<Tile::gated, kBN>(j * 8 + 2 * (lane % 4));
      *reinterpret_cast<float2*>(staged + row * kPitch + col) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2*>(staged + (row + 8) * kPitch + col) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
    __syncthreads();
    if constexpr (Tile::gated) {
      store_staged_gated_tile<kBM, kBN, kThreads>(block.out, staged, m0, n0, tid);
    } else {
      store_staged_tile<kBM, kBN, kThreads>(block.out, staged, m0, n0, tid);
    }
  }
#else
  HD_TRAP();
#endif
}

template <class T, class Tile>
void launch_wgmma(const GemmProblem& p, const KernelArgs& args, void* c) {
  launch_tiles<T>(wgmma_gemm_kernel<T, Tile>, p, args, c, Tile::bm, Tile::bn, Tile::splits, Tile::threads,
                  Tile::shared_bytes);
}

}  // namespace

template <class T>
std::vector<Candidate> wgmma_candidates(const GemmProblem& p, const KernelArgs& args) {
  std::vector<Candidate> list;
  if (!has_warpgroup_mma(p.device.index)) return list;
  const size_t shared_limit = max_block_shared_bytes(p.device.index);
  const auto add = [&]<class Tile>(Tile, bool quick) {
    if (Tile::shared_bytes > shared_limit) return;
    list.push_back({Tile::name(), [args](const GemmProblem& q, void* c) { launch_wgmma<T, Tile>(q, args, c); }, quick,
                    false});
  };
  if (p.gate != GemmGate::kNone) {
    // GEGLU's projections (SD's k = 320-1280, n = 2560-20480: large grids, short k) take the widths that
    // won products: 3 stages so that two blocks share a multiprocessor, and 4.
    if (args.n % kGateChunk == 0) {
      add(WgmmaTile<128, 3, 1, 128, true>{}, true);
      add(WgmmaTile<128, 4, 1, 128, true>{}, true);
      add(WgmmaTile<160, 4, 1, 128, true>{}, true);
      add(WgmmaTile<256, 4, 1, 128, true>{}, true);
    }
    return list;
  }
  // Stages are bought with shared memory: 3 let two blocks share a multiprocessor (97-109 KiB), which
  // pays on large grids with short k (the GEGLU projections); deeper ones keep more k-steps in flight for
  // the one block a multiprocessor holds, which pays wherever the grid is about one wave or less (SD's
  // 32x32 and smaller levels). On an H100 (2026-11-27, exhaustive tuning of SD1.5 with our kernels only)
  // 128x64 with 6 stages took 12 of its 61 shapes, 128x128 with 4 another 12 and 128x160 with 4 ten; with
  // them in the quick set the step went from 9.9 to 8.2 ms under default tuning. 160 wide: SD's 320, 640
  // and 1280 channels in whole tiles.
  add(WgmmaTile<64, 6>{}, true);
  add(WgmmaTile<128, 3>{}, true);
  add(WgmmaTile<128, 4>{}, true);
  add(WgmmaTile<160, 3>{}, false);
  add(WgmmaTile<160, 4>{}, true);
  add(WgmmaTile<160, 5>{}, false);
  add(WgmmaTile<256, 4>{}, true);
  // Split k where 128 x 160 tiles leave most multiprocessors idle and k is long (SD's 16x16 and 8x8
  // levels): deep pipelines, since such a grid is one wave at most (3 stages took 0.065 ms on
  // the 16x16 level's 1280-channel convolution in 4 splits, 5 stages 0.047).
  using Wide = WgmmaTile<160, 5>;  // the tile whose count of blocks decides
  const int64_t tiles =
      ((args.m + Wide::bm - 1) / Wide::bm) * ((args.n + Wide::bn - 1) / Wide::bn) * p.outer * p.inner;
  if (tiles < multiprocessor_count(p.device.index) && args.k >= 16 * kStepK) {
    add(WgmmaTile<64, 6, 2>{}, true);
    add(WgmmaTile<64, 6, 4>{}, true);
    add(WgmmaTile<160, 5, 2>{}, true);
    add(WgmmaTile<160, 5, 4>{}, true);
    // One warpgroup a block: twice the blocks of the same width (up to about two waves of one block a
    // multiprocessor), each block with six stages to itself. On an H100 (2026-11-27, two runs) the 32x32
    // level's 640-channel convolution took 0.048 ms in 128 x 128 tiles (80 blocks) and 0.046 in 64 x 160 (128
    // blocks), cuDNN 0.033-0.036; they also won the stride-2 convolution (0.021-0.023 against 0.023-0.025)
    // and the 16x16 level's feed-forward output (512 x 1280 <- 5120: 0.029-0.030 against 0.033). 64 x 160
    // split in 2 and 64 x 256 with 4 stages won no shape of the kernel benchmark in those runs and were left
    // out.
    add(WgmmaTile<128, 6, 1, 64>{}, true);
    add(WgmmaTile<160, 6, 1, 64>{}, true);
  }
  return list;
}

template std::vector<Candidate> wgmma_candidates<__half>(const GemmProblem&, const KernelArgs&);
template std::vector<Candidate> wgmma_candidates<Bf16>(const GemmProblem&, const KernelArgs&);

}  // namespace hd::gpu::gemm_tiles
