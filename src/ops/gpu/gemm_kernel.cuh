// The implicit-GEMM convolution / GEMM tile kernel on the matrix-fragment layer (mma.cuh).
//
// A block computes a bm x bn tile of C with wm x wn fragment groups (TileShape, gemm_tile_shape.h), each
// owning a (bm/wm) x (bn/wn) sub-tile of the layout's accumulator fragments (16x8 or 16x16). The k
// dimension streams through shared memory in steps of step_k (32, or 64 for the large NVIDIA tiles: half
// the barriers and address arithmetic per multiply): double-buffered through registers (every target), or
// with 3-4 steps in flight through asynchronous copies (NVIDIA sm_80+, async_copy.cuh). A's rows are
// output pixels; their k-th element is found by splitting k into (kernel row, kernel column, channel), so
// the im2col matrix never exists. With channels a multiple of 8, every 16-byte vector of A lies inside one
// pixel and is one load (the "vector" kernels); otherwise (the 3- and 4-channel first convolutions)
// elements are gathered one by one. Problems with few output tiles and a long k can split k among blocks
// (split-K) and add the partial sums in a second kernel, in a fixed order. C leaves through shared memory
// where the stages can hold it (16-byte stores), else straight from each lane's fragments.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gemm_operands.cuh"
#include "ops/gpu/gemm_tile_shape.h"
#include "ops/gpu/mma.cuh"

namespace hd::gpu::gemm_tiles {

// stages == 2: the next k-step's tiles wait in registers while the tensor units work on the current
// one (every target). stages >= 3: stages - 1 k-steps are in flight at once through asynchronous
// copies straight into shared memory (16-byte vectors only; synchronous where the hardware has none).
// splits > 1: the block adds up only its share of the k-steps and writes them, unscaled, to `partial`
// ([batch][split][m][n] f32); split_k_reduce_kernel finishes the sum and applies the epilogue.
// Frag: the fragment layout (mma.cuh): 32-lane 16x8 fragments (NVIDIA's matrix units, or the portable
// shuffles), 64-lane 16x16 ones (AMD's MFMA) or 32-lane 16x16 ones (AMD's WMMA), or an AMD layout's
// emulation.
template <class T, class Tile, class Frag>
__device__ __forceinline__ void gemm_block(const T* __restrict__ a, const T* __restrict__ b,
                                           const T* __restrict__ bias, const T* residual, T* c,
                                           float* __restrict__ partial, const KernelArgs& p) {
  constexpr TileShape kTile = Tile::shape;
  constexpr int kBM = kTile.bm, kBN = kTile.bn, kWM = kTile.wm, kWN = kTile.wn, kStages = kTile.stages;
  constexpr int kStepK = kTile.step_k;
  constexpr bool kVector = kTile.vector, kSplit = kTile.splits > 1, kGated = kTile.gated;
  constexpr int kThreads = kWM * kWN * Frag::kLanes;
  constexpr int kBK = kStepK, kTileStride = tile_stride(kStepK);
  using Operands = TileOperands<kBM, kBN, kThreads, kStepK, kGated>;
  constexpr int kRowsPerPass = Operands::kRowsPerPass;
  constexpr int kAPasses = kBM / kRowsPerPass, kBPasses = kBN / kRowsPerPass;
  constexpr int kWarpM = kBM / kWM, kWarpN = kBN / kWN, kMT = kWarpM / 16, kNT = kWarpN / Frag::kN;
  constexpr bool kAsync = kStages >= 3;
  static_assert(kWarpM % 16 == 0 && kWarpN % Frag::kN == 0);
  static_assert(!kAsync || kVector, "asynchronous copies move whole 16-byte vectors");
  static_assert(!kTile.pipelined || (kVector && kStepK % 32 == 0), "pipelined fragments: 16-byte tiles, k-steps of 32 or 64");
  static_assert(kTile.copy_parts == 1 || (kAsync && kTile.pipelined && kTile.copy_parts < kStepK / 16),
                "copies in parts: asynchronous pipelined tiles, in fewer parts than a k-step has slices");
  static_assert(kWM * kWN <= Frag::kMaxGroups, "more fragment groups than the layout's emulation has scratch for");
  static_assert(!kGated || (kVector && !kSplit && kBN % kGateChunk == 0),
                "GEGLU tiles: 16-byte vectors, no split-K, whole chunks");
  extern __shared__ uint4 smem_raw[];
  uint16_t* const smem = reinterpret_cast<uint16_t*>(smem_raw);
  const auto a_tile = [&](int stage) HD_INLINE { return smem + stage * (kBM + kBN) * kTileStride; };
  const auto b_tile = [&](int stage) HD_INLINE { return smem + stage * (kBM + kBN) * kTileStride + kBM * kTileStride; };

  const BlockBatch<T, kSplit> block(a, b, bias, residual, c, partial, p);
  const int m0 = int(blockIdx.x) * kBM, n0 = int(blockIdx.y) * kBN;
  const int tid = int(threadIdx.x);
  const Operands in(p, block.a_bits, block.b_bits, m0, n0, tid, block.pad_top, block.pad_left);
  const int vec = in.vec, pass_row = in.pass_row;
  const auto a_slot = [&](int stage, int i) HD_INLINE { return a_tile(stage) + (pass_row + i * kRowsPerPass) * kTileStride + vec * 8; };
  const auto b_slot = [&](int stage, int j) HD_INLINE { return b_tile(stage) + (pass_row + j * kRowsPerPass) * kTileStride + vec * 8; };

  uint4 a_reg[kAPasses], b_reg[kBPasses];  // the register-staged path's next k-step
  const auto load_registers = [&](int k0) HD_INLINE {
    if constexpr (kVector) {
      in.for_each_vector(
          k0, [&](int i, const uint16_t* src, bool ok) HD_INLINE { a_reg[i] = load_or_zero(src, ok); },
          [&](int j, const uint16_t* src, bool ok) HD_INLINE { b_reg[j] = load_or_zero(src, ok); });
    } else {
      const int k = k0 + vec * 8;
#pragma unroll
      for (int i = 0; i < kAPasses; ++i) {
        uint16_t e[8];
#pragma unroll
        for (int x = 0; x < 8; ++x) e[x] = in.a_element(i, k + x);
        a_reg[i] = make_uint4(e[0] | uint32_t(e[1]) << 16, e[2] | uint32_t(e[3]) << 16, e[4] | uint32_t(e[5]) << 16,
                              e[6] | uint32_t(e[7]) << 16);
      }
#pragma unroll
      for (int j = 0; j < kBPasses; ++j) {
        uint16_t e[8];
#pragma unroll
        for (int x = 0; x < 8; ++x) e[x] = in.b_element(j, k + x);
        b_reg[j] = make_uint4(e[0] | uint32_t(e[1]) << 16, e[2] | uint32_t(e[3]) << 16, e[4] | uint32_t(e[5]) << 16,
                              e[6] | uint32_t(e[7]) << 16);
      }
    }
  };
  const auto store_registers = [&](int stage) HD_INLINE {
#pragma unroll
    for (int i = 0; i < kAPasses; ++i) *reinterpret_cast<uint4*>(a_slot(stage, i)) = a_reg[i];
#pragma unroll
    for (int j = 0; j < kBPasses; ++j) *reinterpret_cast<uint4*>(b_slot(stage, j)) = b_reg[j];
  };
  // A k-step's copies into a stage, or part `part` of `parts` of them (tiles that spread a step's copies).
  const auto load_async = [&](int stage, int k0, int part = 0, int parts = 1) HD_INLINE {
    constexpr int kVectors = kAPasses + kBPasses;
    in.for_vectors(
        k0, part * kVectors / parts, (part + 1) * kVectors / parts,
        [&](int i, const uint16_t* src, bool ok) HD_INLINE { copy_16_async(a_slot(stage, i), src, ok); },
        [&](int j, const uint16_t* src, bool ok) HD_INLINE { copy_16_async(b_slot(stage, j), src, ok); });
  };

  const int group = tid / Frag::kLanes, wm = group / kWN, wn = group % kWN;
  typename Frag::C acc[kMT][kNT];
#pragma unroll
  for (auto& row : acc)
#pragma unroll
    for (auto& f : row) f = typename Frag::C{};
  // One 16-wide slice of k: the warp's A and B fragments, read from a stage's tiles, then multiplied.
  struct Slice {
    typename Frag::A a[kMT];
    typename Frag::B b[kNT];
  };
  const auto load_slice = [&](Slice& f, int stage, int kk) HD_INLINE {
#pragma unroll
    for (int i = 0; i < kMT; ++i) f.a[i] = Frag::load_a(a_tile(stage), kTileStride, wm * kWarpM + i * 16, kk);
    if constexpr (Frag::kPairedB && kNT % 2 == 0) {  // two neighbouring fragments in one load
#pragma unroll
      for (int j = 0; j < kNT; j += 2)
        Frag::load_b_pair(b_tile(stage), kTileStride, wn * kWarpN + j * Frag::kN, kk, f.b[j], f.b[j + 1]);
    } else {
#pragma unroll
      for (int j = 0; j < kNT; ++j) f.b[j] = Frag::load_b(b_tile(stage), kTileStride, wn * kWarpN + j * Frag::kN, kk);
    }
  };
  const auto multiply_slice = [&](const Slice& f) HD_INLINE {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j) Frag::template mma<T>(acc[i][j], f.a[i], f.b[j]);
  };
  // A whole k-step from one stage. `between` runs once, after the first 16 k's products are issued: the
  // asynchronous path issues the next k-step's copies there, so that the tensor units start on this step
  // before the copies' address arithmetic, not after it.
  const auto multiply = [&](int stage, auto between) HD_INLINE {
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      if (kk == 16) between();
      Slice f;
      load_slice(f, stage, kk);
      multiply_slice(f);
    }
  };
  const auto nothing = [] {};

  // This block's k-steps: all of them, or its split's share.
  int first, steps;
  block.steps(p, kBK, first, steps);
  if constexpr (kAsync) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < steps) load_async(s, (first + s) * kBK);
      async_commit();  // empty groups too: the wait below counts groups
    }
    if constexpr (kTile.pipelined) {
      // Two slices of fragments in registers: the next 16 k's are read while this 16's products run. The
      // next k-step's first slice is read at this step's last 16 k, after the barrier that publishes that
      // step's stage, so the barrier's wait overlaps the last products rather than preceding the first
      // loads. Stage s-1 is free for step s + stages - 1's copies once that barrier is passed: every warp
      // read its last slice of it before arriving.
      constexpr int kSlices = kBK / 16;
      Slice f[2];
      if (steps > 0) {
        async_wait<kStages - 2>();
        __syncthreads();
        load_slice(f[0], 0, 0);
      }
      for (int s = 0; s < steps; ++s) {
        const int stage = s % kStages;
#pragma unroll
        for (int q = 0; q < kSlices; ++q) {
          if (q + 1 < kSlices) {
            load_slice(f[(q + 1) & 1], stage, (q + 1) * 16);
          } else if (s + 1 < steps) {
            async_wait<kStages - 2>();  // step s + 1 has landed (for this thread) ...
            __syncthreads();            // ... for every thread
            load_slice(f[(q + 1) & 1], (s + 1) % kStages, 0);
          }
          multiply_slice(f[q & 1]);
          // The next k-step's copies, in parts over the first copy_parts slices (all at the first by
          // default), committed with the last part, before this step's wait, so that the fragment loads
          // of the slices after are not queued behind all of them.
          const int next = s + kStages - 1;
          if (q < kTile.copy_parts) {
            if (next < steps) load_async(next % kStages, (first + next) * kBK, q, kTile.copy_parts);
            if (q == kTile.copy_parts - 1) async_commit();
          }
        }
      }
    } else {
      for (int s = 0; s < steps; ++s) {
        async_wait<kStages - 2>();  // step s has landed (for this thread) ...
        __syncthreads();            // ... for every thread, and step s-1's stage is no longer read
        const int next = s + kStages - 1;
        multiply(s % kStages, [&] {  // the stage step s-1 read, which every thread has left (the barrier)
          if (next < steps) load_async(next % kStages, (first + next) * kBK);
          async_commit();
        });
      }
    }
  } else if constexpr (kTile.pipelined) {
    if (steps > 0) {
      // Register-staged with pipelined fragments (every target): as above, the next 16 k's fragments are
      // read while this 16's products run. At a step's last 16 k the next step's vectors go to the other
      // stage, which every warp left before the last barrier (it read its last slice of it before
      // arriving), one barrier publishes them, and the next step's first slice is read from them.
      constexpr int kSlices = kBK / 16;
      Slice f[2];
      load_registers(first * kBK);
      store_registers(0);
      __syncthreads();
      load_slice(f[0], 0, 0);
      for (int s = 0; s < steps; ++s) {
        if (s + 1 < steps) load_registers((first + s + 1) * kBK);  // in flight while the matrix units work
#pragma unroll
        for (int q = 0; q < kSlices; ++q) {
          if (q + 1 < kSlices) {
            load_slice(f[(q + 1) & 1], s & 1, (q + 1) * 16);
          } else if (s + 1 < steps) {
            store_registers((s + 1) & 1);
            __syncthreads();
            load_slice(f[(q + 1) & 1], (s + 1) & 1, 0);
          }
          multiply_slice(f[q & 1]);
        }
      }
    }
  } else if (steps > 0) {
    load_registers(first * kBK);
    store_registers(0);
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
      if (s + 1 < steps) load_registers((first + s + 1) * kBK);  // in flight while the tensor units work
      multiply(s & 1, nothing);
      // The other stage was last read in step s-1, which every thread finished before the barrier below
      // of that step; this step's barrier then publishes it and retires the reads of this one.
      if (s + 1 < steps) store_registers((s + 1) & 1);
      __syncthreads();
    }
  }

  // Epilogue. Each lane's accumulators are C values at the layout's (row, column) positions.
  const int lane = tid % Frag::kLanes;
  constexpr int kStep = Frag::kColumnPairs ? 2 : 1;
  const auto row_of = [&](int i, int r) HD_INLINE { return wm * kWarpM + i * 16 + Frag::c_row(lane, r); };
  const auto col_of = [&](int j, int r)
                          HD_INLINE { return wn * kWarpN + j * Frag::kN + Frag::c_col(lane, r); };
  // The asynchronous tiles (NVIDIA) whose stages hold C in f32 send it through shared memory, so that
  // each thread stores 16 contiguous bytes of a row, as Hopper's warpgroup tiles do. Straight from the
  // accumulators a warp's store covers 8 rows x 16 bytes, with a bounds test, the bias and the residual
  // spelled out for each of a 64x64 warp tile's 64 fragments: on 8192^3 the 256x128 tile's epilogue
  // (about 2,000 instructions a warp, run while its block has the multiprocessor to itself) drew 16% of
  // the warps' stall samples, most of them waiting for instructions to be fetched (H200, 2026-11-29).
  // Through shared memory it ran at 323-326 TFLOP/s instead of 307-311, and SD's products up to 19% faster.
  // The register-staged tiles (every AMD layout) keep the direct stores: their two stages seldom hold C
  // in f32, and no AMD GPU was there to measure the change.
  constexpr int kPitch = staged_pitch(kBN);
  constexpr bool kStaged =
      kAsync && !kSplit && kBN % 8 == 0 && size_t(kBM) * kPitch * sizeof(float) <= kTile.shared_bytes();
  if constexpr (kStaged) {
    float* const staged = reinterpret_cast<float*>(smem_raw);
    __syncthreads();  // every warp has read its last slice of the stages
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int r = 0; r < Frag::kAccumulators; r += kStep) {
          float* const at = staged + row_of(i, r) * kPitch + staged_column<kGated, kBN>(col_of(j, r));
          if constexpr (kStep == 2) {
            *reinterpret_cast<float2*>(at) = make_float2(acc[i][j].r[r], acc[i][j].r[r + 1]);
          } else {
            *at = acc[i][j].r[r];
          }
        }
    __syncthreads();
    if constexpr (kGated) {
      store_staged_gated_tile<kBM, kBN, kThreads>(block.out, staged, m0, n0, tid);
    } else {
      store_staged_tile<kBM, kBN, kThreads>(block.out, staged, m0, n0, tid);
    }
  } else if constexpr (kGated) {
    // A hidden fragment's gate is kGateChunk / 2 columns further, in the same lane's accumulators where
    // each fragment group's columns are whole chunks (tiles staging C through shared memory need not be).
    static_assert(kWarpN % kGateChunk == 0 && (kGateChunk / 2) % Frag::kN == 0,
                  "whole chunks a fragment group");
    constexpr int kPartner = kGateChunk / 2 / Frag::kN;
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        if ((j * Frag::kN) % kGateChunk >= kGateChunk / 2) continue;  // a gate fragment
        const auto& hidden = acc[i][j];
        const auto& gate = acc[i][(j + kPartner) % kNT];
#pragma unroll
        for (int r = 0; r < Frag::kAccumulators; r += kStep) {
          const int column = n0 + col_of(j, r);  // of the tile's chunks, in its first half
          const int out_col = column / kGateChunk * (kGateChunk / 2) + column % (kGateChunk / 2);
          if (column >= p.n) continue;  // past the projection (whose bias gated() reads)
          const float v0 = block.out.gated(out_col, hidden.r[r], gate.r[r]);
          const float v1 = kStep == 2 ? block.out.gated(out_col + 1, hidden.r[r + 1], gate.r[r + 1]) : 0.f;
          block.out.store_final(m0 + row_of(i, r), out_col, v0, v1, kStep == 2);
        }
      }
  } else {
    // Where the layout pairs neighbouring columns, both go out in one 32-bit store.
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int r = 0; r < Frag::kAccumulators; r += kStep)
          block.out.store(m0 + row_of(i, r), n0 + col_of(j, r), acc[i][j].r[r],
                          kStep == 2 ? acc[i][j].r[r + 1] : 0.f, kStep == 2);
  }
}

// A layout the target being compiled does not have (Frag::kOnThisTarget; the host never offers it there)
// gets an empty kernel, so that each target's code holds only what it can run (the AMD resource report,
// tools/rocm/amd_kernel_report.py, lists these trap stubs apart).
// The bound names the threads only: an explicit minimum of one block a multiprocessor made ptxas spend
// more registers (the 128x128 8-group k64 tile 127 -> 164, which halves its occupancy), and a minimum of
// two made the pipelined 128x128 tile spill (H100, 2026-11-26).
template <class T, class Tile, class Frag>
__global__ void __launch_bounds__(Tile::shape.groups() * Frag::kLanes)
    gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ bias, const T* residual, T* c,
                float* __restrict__ partial, KernelArgs p) {
  if constexpr (Frag::kOnThisTarget) {
    gemm_block<T, Tile, Frag>(a, b, bias, residual, c, partial, p);
  } else {
    HD_TRAP();
  }
}

// Split-K's second half: C = alpha · (the splits' partial sums, added in split order) + bias + residual.
// kQuad: four columns a thread (16-byte loads of each split's sums, one 8-byte store), where C's rows and
// batch offsets are whole quads; otherwise one. Either way each value's arithmetic is the same. The index
// split is 32-bit (launch_tiles checks that m · n fits): written element by element with 64-bit
// divisions, this kernel took 0.32 ms of an SD1.5 UNet forward on the fragment layer (H200, 2026-11-29),
// several times what its bytes take.
template <class T, bool kQuad>
__global__ void split_k_reduce_kernel(const float* __restrict__ partial, const T* __restrict__ bias,
                                      const T* residual, T* c, KernelArgs p) {
  constexpr int kPer = kQuad ? 4 : 1;
  const int columns = p.n / kPer, vectors = p.m * columns;
  const int64_t per_batch = int64_t(p.m) * p.n;
  const int batch = int(blockIdx.y), zo = batch / p.inner, zi = batch % p.inner;
  const int64_t offset = zo * p.c_outer + zi * p.c_inner;
  const float* const sums = partial + int64_t(batch) * p.splits * per_batch;
  for (int v = int(blockIdx.x * blockDim.x + threadIdx.x); v < vectors; v += int(gridDim.x * blockDim.x)) {
    const int row = v / columns, col = (v - row * columns) * kPer;
    const int64_t e = int64_t(row) * p.n + col;
    float sum[kPer] = {};
    for (int s = 0; s < p.splits; ++s) {
      if constexpr (kQuad) {
        const float4 q = *reinterpret_cast<const float4*>(sums + s * per_batch + e);
        sum[0] += q.x, sum[1] += q.y, sum[2] += q.z, sum[3] += q.w;
      } else {
        sum[0] += sums[s * per_batch + e];
      }
    }
    const int64_t at = offset + p.c_row_at(row) + col;
    float out[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      out[i] = sum[i] * p.alpha + (bias ? to_float(bias[col + i]) : 0.f);
      if (residual) out[i] += to_float(residual[at + i]);
    }
    if constexpr (kQuad) {
      *reinterpret_cast<uint2*>(c + at) = make_uint2(pack2<T>(out[0], out[1]), pack2<T>(out[2], out[3]));
    } else {
      c[at] = from_float<T>(out[0]);
    }
  }
}

// Launches a tile kernel (the fragment layer's above, or Hopper's warpgroup one: both take a, b, bias,
// residual, c, partial, args) over the problem's bm x bn tiles, k split `splits` ways; with split-K the
// partial sums ([batch][split][m][n] f32) go to the device's GEMM scratch, which grows to the largest such
// problem and stays rather than a buffer per call (core/scratch.h says why), and split_k_reduce_kernel
// adds them.
template <class T, class Kernel>
void launch_tiles(Kernel* kernel, const GemmProblem& p, const KernelArgs& base, void* c, int bm, int bn, int splits,
                  int threads, size_t shared) {
  KernelArgs args = base;
  args.splits = splits;
  const int64_t batch = p.outer * p.inner;
  const dim3 grid(unsigned((args.m + bm - 1) / bm), unsigned((args.n + bn - 1) / bn), unsigned(batch * splits));
  allow_dynamic_shared_memory(kernel, shared, p.device.index);
  const auto* a = static_cast<const T*>(p.a);
  const auto* b = static_cast<const T*>(p.b);
  if (splits == 1) {
    kernel<<<grid, threads, shared, current_stream()>>>(a, b, static_cast<const T*>(p.bias),
                                                        static_cast<const T*>(p.residual), static_cast<T*>(c), nullptr, args);
    HD_GPU_CHECK_LAUNCH();
    return;
  }
  // Half the 32-bit range, so that the reduction's grid-stride index cannot overflow either.
  HD_CHECK_KIND(int64_t(args.m) * args.n <= INT_MAX / 2, ErrorKind::kUnsupported, "gemm: split-K over ",
                args.m, " x ", args.n, " outputs exceeds the reduction's 32-bit indices");
  auto* const partial = static_cast<float*>(
      scratch(p.device, size_t(batch * splits) * size_t(args.m) * size_t(args.n) * sizeof(float), ScratchSlot::kGemm));
  kernel<<<grid, threads, shared, current_stream()>>>(a, b, nullptr, nullptr, static_cast<T*>(c), partial, args);
  HD_GPU_CHECK_LAUNCH();
  const int64_t per_batch = int64_t(args.m) * args.n;
  const bool quads = args.n % 4 == 0 && args.ldc % 4 == 0 && args.c_outer % 4 == 0 && args.c_inner % 4 == 0 &&
                     args.c_group_stride % 4 == 0 && is_aligned(c, 8);
  const int64_t vectors = quads ? per_batch / 4 : per_batch;
  const dim3 reduce_grid(unsigned(std::clamp<int64_t>((vectors + 255) / 256, 1, 4096)), unsigned(batch));
  const auto reduce = quads ? split_k_reduce_kernel<T, true> : split_k_reduce_kernel<T, false>;
  reduce<<<reduce_grid, 256, 0, current_stream()>>>(
      partial, static_cast<const T*>(p.bias), static_cast<const T*>(p.residual), static_cast<T*>(c), args);
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu::gemm_tiles
