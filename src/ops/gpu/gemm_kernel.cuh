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
// (split-K) and add the partial sums in a second kernel, in a fixed order.
#pragma once

#include <climits>
#include <cstdint>

#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/fast_divisor.h"
#include "ops/gpu/gemm_tile_shape.h"
#include "ops/gpu/mma.cuh"

namespace hd::gpu::gemm_tiles {

struct KernelArgs {  // GemmProblem in the kernel's integer widths
  int m, n, k, inner;
  int64_t a_outer, a_inner, b_outer, b_inner, c_outer, c_inner;
  int height, width, out_hw, out_width, stride, padding;
  int64_t pixel_stride, image_stride, ldb, ldc;
  float alpha;
  bool pairs;  // C rows and batch offsets even: two neighbours are one 32-bit store
  int splits;  // split-K: the k-steps are shared among this many blocks, which write f32 partial sums
  // k = (kernel row · kw + kernel column) · channels + channel, split at every k-step without a division.
  FastDivisor by_channels, by_kw;
};

// 16 bytes from src, or zeros; src must be readable either way (the callers pass the operand's first
// vector when !ok). Loaded unconditionally and the value selected: a branch around the load cost AMD
// targets an exec-mask branch per vector (s_and_saveexec), and `ok ? *src : uint4{}` made clang select
// between src and the address of a zero temporary on the stack, which put every staged vector in scratch.
__device__ __forceinline__ uint4 load_or_zero(const uint16_t* src, bool ok) {
  const uint4 v = *reinterpret_cast<const uint4*>(src);
  return make_uint4(ok ? v.x : 0u, ok ? v.y : 0u, ok ? v.z : 0u, ok ? v.w : 0u);
}

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
  constexpr bool kVector = kTile.vector, kSplit = kTile.splits > 1;
  constexpr int kThreads = kWM * kWN * Frag::kLanes;
  constexpr int kBK = kStepK, kTileStride = tile_stride(kStepK), kVectorsPerRow = kStepK / 8;
  constexpr int kRowsPerPass = kThreads / kVectorsPerRow;
  constexpr int kAPasses = kBM / kRowsPerPass, kBPasses = kBN / kRowsPerPass;
  constexpr int kWarpM = kBM / kWM, kWarpN = kBN / kWN, kMT = kWarpM / 16, kNT = kWarpN / Frag::kN;
  constexpr bool kAsync = kStages >= 3;
  static_assert(kBM % kRowsPerPass == 0 && kBN % kRowsPerPass == 0 && kWarpM % 16 == 0 && kWarpN % Frag::kN == 0);
  static_assert(!kAsync || kVector, "asynchronous copies move whole 16-byte vectors");
  static_assert(!kTile.pipelined || (kAsync && kStepK % 32 == 0), "pipelined fragments: asynchronous tiles, k-steps of 32 or 64");
  static_assert(kWM * kWN <= Frag::kMaxGroups, "more fragment groups than the layout's emulation has scratch for");
  extern __shared__ uint4 smem_raw[];
  uint16_t* const smem = reinterpret_cast<uint16_t*>(smem_raw);
  const auto a_tile = [&](int stage) HD_INLINE { return smem + stage * (kBM + kBN) * kTileStride; };
  const auto b_tile = [&](int stage) HD_INLINE { return smem + stage * (kBM + kBN) * kTileStride + kBM * kTileStride; };

  const int batch = int(blockIdx.z) / p.splits, split = int(blockIdx.z) % p.splits;
  const int zo = batch / p.inner, zi = batch % p.inner;
  const auto* a_bits = reinterpret_cast<const uint16_t*>(a + zo * p.a_outer + zi * p.a_inner);
  const auto* b_bits = reinterpret_cast<const uint16_t*>(b + zo * p.b_outer + zi * p.b_inner);
  c += zo * p.c_outer + zi * p.c_inner;
  if (residual) residual += zo * p.c_outer + zi * p.c_inner;
  const int m0 = int(blockIdx.x) * kBM, n0 = int(blockIdx.y) * kBN;
  const int tid = int(threadIdx.x), vec = tid % kVectorsPerRow, pass_row = tid / kVectorsPerRow;

  // Where this thread's A rows (output pixels) read from: their image and top-left input position.
  // A row past the end gets a position that no kernel offset brings into the image. a_corner: the
  // element at that position, so that a k-step's vector is the corner plus one offset that every row
  // shares (the loads' address arithmetic is most of a k-step's non-matrix instructions).
  int a_iy[kAPasses], a_ix[kAPasses];
  const uint16_t* a_corner[kAPasses];
#pragma unroll
  for (int i = 0; i < kAPasses; ++i) {
    const int m = m0 + pass_row + i * kRowsPerPass;
    const int img = m / p.out_hw, rem = m % p.out_hw;
    a_iy[i] = m < p.m ? (rem / p.out_width) * p.stride - p.padding : INT_MIN / 2;
    a_ix[i] = (rem % p.out_width) * p.stride - p.padding;
    a_corner[i] = m < p.m ? a_bits + int64_t(img) * p.image_stride + (int64_t(a_iy[i]) * p.width + a_ix[i]) * p.pixel_stride
                          : a_bits;
  }
  // This thread's B rows (output channels) are evenly spaced: one pointer, and the count of passes whose
  // row exists (a pointer and a flag per pass kept the k-step-64 tiles' registers past 255, and spilled).
  const int b_first = n0 + pass_row;
  const int b_passes = b_first < p.n ? (p.n - b_first + kRowsPerPass - 1) / kRowsPerPass : 0;
  const uint16_t* const b_first_row = b_bits + (b_passes > 0 ? int64_t(b_first) * p.ldb : 0);
  const int64_t b_pass_stride = int64_t(kRowsPerPass) * p.ldb;
  const auto a_element = [&](int i, int k) HD_INLINE -> uint16_t {  // gather path: one element of A
    if (k >= p.k) return 0;
    int kk, ch, ky, kx;
    p.by_channels.divide(k, kk, ch);
    p.by_kw.divide(kk, ky, kx);
    const int iy = a_iy[i] + ky, ix = a_ix[i] + kx;
    if (unsigned(iy) >= unsigned(p.height) || unsigned(ix) >= unsigned(p.width)) return 0;
    return a_corner[i][(int64_t(ky) * p.width + kx) * p.pixel_stride + ch];
  };
  // For the 16-byte paths (channels % 8 == 0, so the 8 elements of a vector share one kernel position):
  // calls f(pass, address, valid) for this thread's A vectors of the k-step at k0, then g(...) for B's.
  const auto for_each_vector = [&](int k0, auto f, auto g) HD_INLINE {
    const int k = k0 + vec * 8;
    const bool k_ok = k < p.k;
    int kk, ch, ky, kx;
    p.by_channels.divide(k_ok ? k : 0, kk, ch);
    p.by_kw.divide(kk, ky, kx);
    const int64_t offset = (int64_t(ky) * p.width + kx) * p.pixel_stride + ch;  // from a row's corner
#pragma unroll
    for (int i = 0; i < kAPasses; ++i) {
      const bool ok = k_ok && unsigned(a_iy[i] + ky) < unsigned(p.height) && unsigned(a_ix[i] + kx) < unsigned(p.width);
      f(i, ok ? a_corner[i] + offset : a_bits, ok);
    }
#pragma unroll
    for (int j = 0; j < kBPasses; ++j) {
      const bool ok = k_ok && j < b_passes;
      g(j, ok ? b_first_row + j * b_pass_stride + k : b_bits, ok);
    }
  };
  const auto a_slot = [&](int stage, int i) HD_INLINE { return a_tile(stage) + (pass_row + i * kRowsPerPass) * kTileStride + vec * 8; };
  const auto b_slot = [&](int stage, int j) HD_INLINE { return b_tile(stage) + (pass_row + j * kRowsPerPass) * kTileStride + vec * 8; };

  uint4 a_reg[kAPasses], b_reg[kBPasses];  // the register-staged path's next k-step
  const auto load_registers = [&](int k0) HD_INLINE {
    if constexpr (kVector) {
      for_each_vector(
          k0, [&](int i, const uint16_t* src, bool ok) HD_INLINE { a_reg[i] = load_or_zero(src, ok); },
          [&](int j, const uint16_t* src, bool ok) HD_INLINE { b_reg[j] = load_or_zero(src, ok); });
    } else {
      const int k = k0 + vec * 8;
#pragma unroll
      for (int i = 0; i < kAPasses; ++i) {
        uint16_t e[8];
#pragma unroll
        for (int x = 0; x < 8; ++x) e[x] = a_element(i, k + x);
        a_reg[i] = make_uint4(e[0] | uint32_t(e[1]) << 16, e[2] | uint32_t(e[3]) << 16, e[4] | uint32_t(e[5]) << 16,
                              e[6] | uint32_t(e[7]) << 16);
      }
#pragma unroll
      for (int j = 0; j < kBPasses; ++j) {
        const int n = n0 + pass_row + j * kRowsPerPass;
        uint16_t e[8];
#pragma unroll
        for (int x = 0; x < 8; ++x) e[x] = n < p.n && k + x < p.k ? b_bits[int64_t(n) * p.ldb + k + x] : uint16_t(0);
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
  const auto load_async = [&](int stage, int k0) HD_INLINE {
    for_each_vector(
        k0, [&](int i, const uint16_t* src, bool ok) HD_INLINE { copy_16_async(a_slot(stage, i), src, ok); },
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
  const int all_steps = (p.k + kBK - 1) / kBK, per_split = (all_steps + p.splits - 1) / p.splits;
  const int first = split * per_split, steps = max(0, min(all_steps, first + per_split) - first);
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
          if (q == 0) {
            const int next = s + kStages - 1;
            if (next < steps) load_async(next % kStages, (first + next) * kBK);
            async_commit();
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

  // Epilogue. Each lane's accumulators are C values at the layout's (row, column) positions; where the
  // layout pairs neighbouring columns, both go out in one 32-bit store.
  const int lane = tid % Frag::kLanes;
  constexpr int kStep = Frag::kColumnPairs ? 2 : 1;
#pragma unroll
  for (int i = 0; i < kMT; ++i) {
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
#pragma unroll
      for (int r = 0; r < Frag::kAccumulators; r += kStep) {
        const int row = m0 + wm * kWarpM + i * 16 + Frag::c_row(lane, r);
        const int col = n0 + wn * kWarpN + j * Frag::kN + Frag::c_col(lane, r);
        if (row >= p.m || col >= p.n) continue;
        const bool both = kStep == 2 && col + 1 < p.n;
        if constexpr (kSplit) {
          float* out = partial + (int64_t(batch) * p.splits + split) * int64_t(p.m) * p.n + int64_t(row) * p.n + col;
          out[0] = acc[i][j].r[r];
          if (both) out[1] = acc[i][j].r[r + 1];
        } else {
          // alpha, bias, residual, then one rounding to T.
          float v0 = acc[i][j].r[r] * p.alpha + (bias ? to_float(bias[col]) : 0.f);
          float v1 = both ? acc[i][j].r[r + 1] * p.alpha + (bias ? to_float(bias[col + 1]) : 0.f) : 0.f;
          const int64_t at = int64_t(row) * p.ldc + col;
          if (both && p.pairs) {
            if (residual) {
              const uint32_t res = *reinterpret_cast<const uint32_t*>(residual + at);
              v0 += low_half<T>(res), v1 += high_half<T>(res);
            }
            *reinterpret_cast<uint32_t*>(c + at) = pack2<T>(v0, v1);
          } else {
            if (residual) v0 += to_float(residual[at]);
            c[at] = from_float<T>(v0);
            if (both) {
              if (residual) v1 += to_float(residual[at + 1]);
              c[at + 1] = from_float<T>(v1);
            }
          }
        }
      }
    }
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
template <class T>
__global__ void split_k_reduce_kernel(const float* __restrict__ partial, const T* __restrict__ bias, const T* residual,
                                      T* c, KernelArgs p) {
  const int64_t per_batch = int64_t(p.m) * p.n;
  const int batch = int(blockIdx.y), zo = batch / p.inner, zi = batch % p.inner;
  const int64_t offset = zo * p.c_outer + zi * p.c_inner;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < per_batch; e += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.f;
    for (int s = 0; s < p.splits; ++s) sum += partial[(int64_t(batch) * p.splits + s) * per_batch + e];
    const int row = int(e / p.n), col = int(e % p.n);
    const int64_t at = offset + int64_t(row) * p.ldc + col;
    float v = sum * p.alpha + (bias ? to_float(bias[col]) : 0.f);
    if (residual) v += to_float(residual[at]);
    c[at] = from_float<T>(v);
  }
}


}  // namespace hd::gpu::gemm_tiles
