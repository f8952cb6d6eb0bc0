// Implicit-GEMM convolution / GEMM on the matrix-fragment layer (mma.cuh).
//
// A block computes a kBM x kBN tile of C with kWM x kWN fragment groups, each owning a
// (kBM/kWM) x (kBN/kWN) sub-tile of the layout's accumulator fragments (16x8 or 16x16). The k dimension
// streams through shared memory in steps of kBK (32, or 64 for the large NVIDIA tiles: half the barriers
// and address arithmetic per multiply): double-buffered through registers (every target), or with 3-4
// steps in flight through asynchronous copies (NVIDIA sm_80+, async_copy.cuh). A's rows are output pixels; their k-th element is
// found by splitting k into (kernel row, kernel column, channel), so the im2col matrix never exists. With
// channels a multiple of 8, every 16-byte vector of A lies inside one pixel and is one load (the "vector"
// kernels); otherwise (the 3- and 4-channel first convolutions) elements are gathered one by one.
// Problems with few output tiles and a long k can split k among blocks (split-K) and add the partial sums
// in a second kernel, in a fixed order.
//
// This header holds the kernel and the candidates of one fragment layout (candidates_of). Each layout's
// instances are compiled in a file of their own (gemm_tiles_<layout>.cu), so that they build in
// parallel; gemm.cu holds the host side (tuning, dispatch) and instantiates none of them.
#pragma once

#include <algorithm>
#include <climits>
#include <functional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/fast_divisor.h"
#include "ops/gpu/mma.cuh"
#if defined(HD_WITH_CUDNN) || defined(HD_WITH_CUBLASLT)
#include "ops/gpu/nvidia/vendor_gemm.h"
#endif
#if defined(HD_WITH_HIPBLASLT) || defined(HD_WITH_ROCBLAS) || defined(HD_WITH_MIOPEN)
#include "ops/gpu/amd/vendor_gemm.h"
#endif

namespace hd::gpu::gemm_tiles {

constexpr int kDefaultStepK = 32;  // k per pipeline step, unless a tile names another (kStepK)
// A shared row: kStepK 16-bit elements and 16 bytes of padding, so that the eight rows one ldmatrix (or
// one AMD fragment load) reads fall into different banks (row pitches of 80 and 144 bytes both do).
__host__ __device__ constexpr int tile_stride(int step_k) { return step_k + 8; }

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

// kStages == 2: the next k-step's tiles wait in registers while the tensor units work on the current
// one (every target). kStages >= 3: kStages - 1 k-steps are in flight at once through asynchronous
// copies straight into shared memory (16-byte vectors only; synchronous where the hardware has none).
// kSplit: the block adds up only its share of the k-steps and writes them, unscaled, to `partial`
// ([batch][split][m][n] f32); split_k_reduce_kernel finishes the sum and applies the epilogue.
// Frag: the fragment layout (mma.cuh): 32-lane 16x8 fragments (NVIDIA's matrix units, or the portable
// shuffles), 64-lane 16x16 ones (AMD's MFMA) or 32-lane 16x16 ones (AMD's WMMA), or an AMD layout's
// emulation.
template <class T, int kBM, int kBN, int kWM, int kWN, int kStages, bool kVector, class Frag, bool kSplit, int kStepK>
__device__ __forceinline__ void gemm_block(const T* __restrict__ a, const T* __restrict__ b,
                                           const T* __restrict__ bias, const T* residual, T* c,
                                           float* __restrict__ partial, const KernelArgs& p) {
  constexpr int kThreads = kWM * kWN * Frag::kLanes;
  constexpr int kBK = kStepK, kTileStride = tile_stride(kStepK), kVectorsPerRow = kStepK / 8;
  constexpr int kRowsPerPass = kThreads / kVectorsPerRow;
  constexpr int kAPasses = kBM / kRowsPerPass, kBPasses = kBN / kRowsPerPass;
  constexpr int kWarpM = kBM / kWM, kWarpN = kBN / kWN, kMT = kWarpM / 16, kNT = kWarpN / Frag::kN;
  constexpr bool kAsync = kStages >= 3;
  static_assert(kBM % kRowsPerPass == 0 && kBN % kRowsPerPass == 0 && kWarpM % 16 == 0 && kWarpN % Frag::kN == 0);
  static_assert(!kAsync || kVector, "asynchronous copies move whole 16-byte vectors");
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
  // `between` runs once, after the first 16 k's products are issued: the asynchronous path issues the
  // next k-step's copies there, so that the tensor units start on this step before the copies' address
  // arithmetic, not after it.
  const auto multiply = [&](int stage, auto between) HD_INLINE {
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      if (kk == 16) between();
      typename Frag::A af[kMT];
      typename Frag::B bf[kNT];
#pragma unroll
      for (int i = 0; i < kMT; ++i) af[i] = Frag::load_a(a_tile(stage), kTileStride, wm * kWarpM + i * 16, kk);
      if constexpr (Frag::kPairedB && kNT % 2 == 0) {  // two neighbouring fragments in one load
#pragma unroll
        for (int j = 0; j < kNT; j += 2)
          Frag::load_b_pair(b_tile(stage), kTileStride, wn * kWarpN + j * Frag::kN, kk, bf[j], bf[j + 1]);
      } else {
#pragma unroll
        for (int j = 0; j < kNT; ++j) bf[j] = Frag::load_b(b_tile(stage), kTileStride, wn * kWarpN + j * Frag::kN, kk);
      }
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j) Frag::template mma<T>(acc[i][j], af[i], bf[j]);
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
    for (int s = 0; s < steps; ++s) {
      async_wait<kStages - 2>();  // step s has landed (for this thread) ...
      __syncthreads();            // ... for every thread, and step s-1's stage is no longer read
      const int next = s + kStages - 1;
      multiply(s % kStages, [&] {  // the stage step s-1 read, which every thread has left (the barrier)
        if (next < steps) load_async(next % kStages, (first + next) * kBK);
        async_commit();
      });
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
template <class T, int kBM, int kBN, int kWM, int kWN, int kStages, bool kVector, class Frag, bool kSplit, int kStepK>
__global__ void __launch_bounds__(kWM* kWN* Frag::kLanes)
    gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ bias, const T* residual, T* c,
                float* __restrict__ partial, KernelArgs p) {
  if constexpr (Frag::kOnThisTarget) {
    gemm_block<T, kBM, kBN, kWM, kWN, kStages, kVector, Frag, kSplit, kStepK>(a, b, bias, residual, c, partial, p);
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

// ---- host side: candidates, tuning, launch ----

// A way to compute a problem, writing C to the pointer it is given (p.c, or a tuning buffer). The launch
// holds nothing of one call's problem but what its shape decides, so that it serves every problem of the
// same signature (gemm.cu remembers it for the next call).
struct Candidate {
  std::string name;
  std::function<void(const GemmProblem& p, void* c)> launch;
  bool quick = false;  // timed under the quick tuning policy (ops/tuning/autotuner.h)
  bool library_pick = false;  // a vendor library's own first pick (the autotuner's library_picks)
};

constexpr size_t shared_bytes(int bm, int bn, int stages, int step_k) {
  return size_t(stages) * size_t(bm + bn) * tile_stride(step_k) * sizeof(uint16_t);
}

template <class T, int kBM, int kBN, int kWM, int kWN, int kStages, bool kVector, class Frag, int kSplits,
          int kStepK = kDefaultStepK>
void launch_tile(const GemmProblem& p, const KernelArgs& base, void* c) {
  KernelArgs args = base;
  args.splits = kSplits;
  const int64_t batch = p.outer * p.inner;
  const dim3 grid(unsigned((args.m + kBM - 1) / kBM), unsigned((args.n + kBN - 1) / kBN), unsigned(batch * kSplits));
  constexpr size_t kShared = shared_bytes(kBM, kBN, kStages, kStepK);
  const auto kernel = gemm_kernel<T, kBM, kBN, kWM, kWN, kStages, kVector, Frag, (kSplits > 1), kStepK>;
  allow_dynamic_shared_memory(kernel, kShared, p.device.index);
  if constexpr (kSplits == 1) {
    kernel<<<grid, kWM * kWN * Frag::kLanes, kShared, current_stream()>>>(
        static_cast<const T*>(p.a), static_cast<const T*>(p.b), static_cast<const T*>(p.bias),
        static_cast<const T*>(p.residual), static_cast<T*>(c), nullptr, args);
    HD_GPU_CHECK_LAUNCH();
  } else {
    const Buffer partial(p.device, size_t(batch * kSplits) * size_t(args.m) * size_t(args.n) * sizeof(float));
    kernel<<<grid, kWM * kWN * Frag::kLanes, kShared, current_stream()>>>(
        static_cast<const T*>(p.a), static_cast<const T*>(p.b), nullptr, nullptr, static_cast<T*>(c),
        static_cast<float*>(partial.data()), args);
    HD_GPU_CHECK_LAUNCH();
    const int64_t per_batch = int64_t(args.m) * args.n;
    const dim3 reduce_grid(unsigned(std::clamp<int64_t>((per_batch + 255) / 256, 1, 4096)), unsigned(batch));
    split_k_reduce_kernel<T><<<reduce_grid, 256, 0, current_stream()>>>(
        static_cast<const float*>(partial.data()), static_cast<const T*>(p.bias), static_cast<const T*>(p.residual),
        static_cast<T*>(c), args);
    HD_GPU_CHECK_LAUNCH();
  }
}

// The fragment layouts our tiles are built on (mma.cuh): NVIDIA's tensor cores, the portable shuffles
// (what AMD targets without matrix cores run), AMD's MFMA (CDNA) and WMMA (RDNA3, RDNA4), and each AMD
// layout emulated (so that the tests on NVIDIA run the AMD kernels' indexing).
enum class Fragments {
  kNvidia, kPortable, kMfma, kMfmaEmulated, kWmma11, kWmma11Emulated, kWmma12, kWmma12Emulated
};
template <Fragments F>
struct FragmentsOfT;
template <> struct FragmentsOfT<Fragments::kNvidia> { using type = Fragments16x8<false>; };
template <> struct FragmentsOfT<Fragments::kPortable> { using type = Fragments16x8<true>; };
template <> struct FragmentsOfT<Fragments::kMfma> { using type = Fragments16x16<false>; };
template <> struct FragmentsOfT<Fragments::kMfmaEmulated> { using type = Fragments16x16<true>; };
template <> struct FragmentsOfT<Fragments::kWmma11> { using type = FragmentsWmma<11, false>; };
template <> struct FragmentsOfT<Fragments::kWmma11Emulated> { using type = FragmentsWmma<11, true>; };
template <> struct FragmentsOfT<Fragments::kWmma12> { using type = FragmentsWmma<12, false>; };
template <> struct FragmentsOfT<Fragments::kWmma12Emulated> { using type = FragmentsWmma<12, true>; };
template <Fragments F>
using FragmentsOf = typename FragmentsOfT<F>::type;
// In candidate names and tuning keys: the NVIDIA tensor-core tiles keep the plain names.
inline const char* suffix_of(Fragments f) {
  switch (f) {
    case Fragments::kNvidia: return "";
    case Fragments::kPortable: return "-portable";
    case Fragments::kMfma: return "-mfma";
    case Fragments::kMfmaEmulated: return "-mfma-emulated";
    case Fragments::kWmma11: return "-wmma11";
    case Fragments::kWmma11Emulated: return "-wmma11-emulated";
    case Fragments::kWmma12: return "-wmma12";
    case Fragments::kWmma12Emulated: return "-wmma12-emulated";
  }
  return "";
}

// The candidates for a problem. Our tile shapes: larger tiles reuse more of each load, smaller ones fill
// the GPU when the problem is small; register-staged (every target) and, on NVIDIA, with 3-4 k-steps in
// flight through asynchronous copies; split-K for problems whose output has fewer tiles than the GPU
// has multiprocessors but a long k. The gather kernel serves only the few-channel first convolutions.
// Then, with `libraries` (the tuned path, never a test's chosen layout), the vendor libraries the build
// has: on NVIDIA cuDNN for convolutions and cuBLASLt for dense products; on AMD MIOpen for convolutions
// and hipBLASLt for dense products, or rocBLAS where hipBLASLt has no kernel.
// The quick candidates (what a shape's first use times under the default policy): the libraries' own
// heuristic picks (cuDNN's legacy pick and its graph engines that need no compiling, cuBLASLt; MIOpen's
// first solution, hipBLASLt, rocBLAS) and our shape rule's tiles: the large square tile with the most reuse, a half-height one for
// outputs too small to fill the GPU with it, and split-K where even those leave it idle (on NVIDIA: the
// k-step-64 tiles that won most shapes on an H100, below).
template <class T, Fragments F>
std::vector<Candidate> candidates_of(const GemmProblem& p, const KernelArgs& args, bool vector, bool libraries) {
  using Frag = FragmentsOf<F>;
  const std::string suffix = suffix_of(F);
  std::vector<Candidate> list;
  const auto add = [&](std::string name, void (*launch)(const GemmProblem&, const KernelArgs&, void*),
                       bool quick) {
    list.push_back({std::move(name), [args, launch](const GemmProblem& q, void* c) { launch(q, args, c); },
                    quick, false});
  };
  if (!vector) {
    add("gather64x64" + suffix, launch_tile<T, 64, 64, 2, 2, 2, false, Frag, 1>, true);
    return list;
  }
  const int64_t tiles = ((args.m + 63) / 64) * ((args.n + 63) / 64) * p.outer * p.inner;
  const bool small_output = tiles < multiprocessor_count(p.device.index) && args.k >= 16 * kDefaultStepK;
  constexpr bool kOwnRule = F != Fragments::kNvidia;  // on NVIDIA the asynchronous tiles below take the rule
  if constexpr (Frag::kAccumulators == 8) {
    // WMMA holds a 16x16 fragment's C in 8 registers per lane: 2x2 groups on 128x128 would keep 128
    // accumulators per lane, which with the operands spilled on gfx1100; 4x2 groups keep 64.
    add("mma128x128w8" + suffix, launch_tile<T, 128, 128, 4, 2, 2, true, Frag, 1>, kOwnRule);
  } else {
    add("mma128x128" + suffix, launch_tile<T, 128, 128, 2, 2, 2, true, Frag, 1>, kOwnRule);
  }
  add("mma128x64" + suffix, launch_tile<T, 128, 64, 2, 2, 2, true, Frag, 1>, false);
  add("mma64x128" + suffix, launch_tile<T, 64, 128, 2, 2, 2, true, Frag, 1>, kOwnRule);
  add("mma64x64" + suffix, launch_tile<T, 64, 64, 2, 2, 2, true, Frag, 1>, false);
  if (small_output) {
    add("mma64x64-split4" + suffix, launch_tile<T, 64, 64, 2, 2, 2, true, Frag, 4>, kOwnRule);
    add("mma64x64-split8" + suffix, launch_tile<T, 64, 64, 2, 2, 2, true, Frag, 8>, false);
  }
  if constexpr (F != Fragments::kNvidia) {
    // Asynchronous copies and NVIDIA's libraries go with the NVIDIA tensor-core path. AMD's go with every
    // layout an AMD GPU runs on the tuned path, the portable one of gfx1030 included.
    if (!libraries) return list;
#if defined(HD_WITH_MIOPEN)
    // Convolutions only, as cuDNN's graph: a dense product is hipBLASLt's or rocBLAS's.
    if (p.height > 1 || p.kh > 1) {
      bool first = true;
      for (const uint64_t id : miopen_solutions(p)) {
        list.push_back({"miopen-" + std::to_string(id),
                        [id](const GemmProblem& q, void* c) { miopen_conv(q, id, c); }, first, first});
        first = false;
      }
    }
#endif
#if defined(HD_WITH_HIPBLASLT)
    if (hipblaslt_can_run(p)) {
      list.push_back({"hipblaslt", [](const GemmProblem& q, void* c) { hipblaslt_gemm(q, c); }, true, true});
      return list;
    }
#endif
#if defined(HD_WITH_ROCBLAS)
    // hipBLASLt has no kernel for this problem
    if (rocblas_can_run(p))
      list.push_back({"rocblas", [](const GemmProblem& q, void* c) { rocblas_gemm(q, c); }, true, true});
#endif
    return list;
  } else {
    // k-steps of 64: half the barriers, waits and address arithmetic per multiply, for twice the shared
    // memory (256x128 with 3 stages: 162 KiB, within an A100's and an H100's limit, not an RTX 4090's).
    // On an H100 (2026-11-24, bench/gpu_kernels_bench.cpp) they won every UNet and VAE convolution but
    // the smallest: 256x128 the large outputs (8192^3: 309-317 TFLOP/s against 260 for 128x128 in
    // k-steps of 32), 128x128 in 8 groups most of SD1.5's UNet (37 of its 84 shapes), 64x128 in 4
    // stages the middle ones, split in 2 or 4 where its tiles leave multiprocessors idle. The shape
    // rule's quick tiles are those, or k-step-32 versions where the device's shared memory does not
    // take them.
    const size_t shared_limit = max_block_shared_bytes(p.device.index);
    const bool large_k64 = shared_bytes(256, 128, 3, 64) <= shared_limit;
    const bool middle_k64 = shared_bytes(64, 128, 4, 64) <= shared_limit;
    add("async3-128x128", launch_tile<T, 128, 128, 2, 2, 3, true, Frag, 1>, !large_k64);
    add("async3-128x256w8", launch_tile<T, 128, 256, 2, 4, 3, true, Frag, 1>, false);
    add("async3-256x128w8", launch_tile<T, 256, 128, 4, 2, 3, true, Frag, 1>, false);
    add("async4-64x128", launch_tile<T, 64, 128, 2, 2, 4, true, Frag, 1>, !middle_k64);
    add("async4-128x64", launch_tile<T, 128, 64, 2, 2, 4, true, Frag, 1>, false);
    // 8 groups of 64x32 on 128x128: half the accumulators a warp, so that two blocks (16 warps) share a
    // multiprocessor where the 4-group tile's registers allow two blocks of 4 (the profile: 12.5%
    // occupancy and 8 cycles between a warp's instructions on the large tiles).
    add("async3-128x128w8", launch_tile<T, 128, 128, 2, 4, 3, true, Frag, 1>, !middle_k64);
    if (middle_k64) {
      add("async3-128x128w8k64", launch_tile<T, 128, 128, 2, 4, 3, true, Frag, 1, 64>, true);
      add("async3-128x128k64", launch_tile<T, 128, 128, 2, 2, 3, true, Frag, 1, 64>, false);
      add("async4-64x128k64", launch_tile<T, 64, 128, 2, 2, 4, true, Frag, 1, 64>, true);
      // Split k for outputs of fewer 64x128 tiles than twice the multiprocessors (SD's 16x16 and 8x8
      // levels) with a long k.
      const int64_t middle_tiles = ((args.m + 63) / 64) * ((args.n + 127) / 128) * p.outer * p.inner;
      if (middle_tiles < 2 * multiprocessor_count(p.device.index) && args.k >= 32 * kDefaultStepK) {
        add("async4-64x128k64-split2", launch_tile<T, 64, 128, 2, 2, 4, true, Frag, 2, 64>, true);
        add("async4-64x128k64-split4", launch_tile<T, 64, 128, 2, 2, 4, true, Frag, 4, 64>, true);
      }
    }
    if (large_k64) {
      add("async3-128x256w8k64", launch_tile<T, 128, 256, 2, 4, 3, true, Frag, 1, 64>, false);
      add("async3-256x128w8k64", launch_tile<T, 256, 128, 4, 2, 3, true, Frag, 1, 64>, true);
    }
    if (small_output) {
      add("async4-64x64-split4", launch_tile<T, 64, 64, 2, 2, 4, true, Frag, 4>, true);
      add("async4-64x64-split8", launch_tile<T, 64, 64, 2, 2, 4, true, Frag, 8>, false);
    }
    if (!libraries) return list;
#if defined(HD_WITH_CUDNN)
    // cuDNN's legacy pick is quick although the exhaustive policy never chose it for SD1.5 on an H100:
    // it stands in for the compiling graph engines where the others cannot fuse the residual. Without it
    // the quick policy's UNet step was 32% slower, not 7%. Where a precompiled graph engine can take the
    // whole problem (no residual), the quick policy leaves it out: it won none of those shapes of an
    // SD1.5 batch of 4 on the H100, and asking its heuristics cost 5 ms a shape.
    const bool graph_takes_all = (p.height > 1 || p.kh > 1) && cudnn_graph_can_run(p) && p.residual == nullptr;
    if (cudnn_can_run(p))
      list.push_back({"cudnn", [](const GemmProblem& q, void* c) { cudnn_conv(q, c); }, !graph_takes_all,
                      !graph_takes_all});
    // Convolutions only: a dense product (a one-pixel-high image, 1x1 kernel) is cuBLASLt's. The names
    // are offered without asking cuDNN's heuristics (a cached choice needs none); a rank beyond what
    // they return fails when timed and is skipped. The engines that compile their kernels are left to
    // the exhaustive policy: compiling them stalled a first image by 10 s on an H100. So are the others
    // for a convolution with a residual: none of them took one on the H100 (cuDNN 9; 144 tried in three
    // first images), and trying cost 0.1 s of each first image.
    if ((p.height > 1 || p.kh > 1) && cudnn_graph_can_run(p)) {
      for (const CudnnEngines family : {CudnnEngines::kPrecompiled, CudnnEngines::kRuntimeCompiled}) {
        const bool precompiled = family == CudnnEngines::kPrecompiled;
        for (int rank = 0; rank < kCudnnGraphCandidates; ++rank)
          list.push_back(
              {(precompiled ? "cudnn-graph-" : "cudnn-graph-rtc-") + std::to_string(rank),
               [family, rank](const GemmProblem& q, void* c) { cudnn_graph_conv(q, family, rank, c); },
               precompiled && p.residual == nullptr, precompiled && p.residual == nullptr && rank == 0});
      }
    }
#endif
#if defined(HD_WITH_CUBLASLT)
    if (cublaslt_can_run(p))
      list.push_back({"cublaslt", [](const GemmProblem& q, void* c) { cublaslt_gemm(q, c); }, true, true});
#endif
    return list;
  }
}

// Each layout's file instantiates candidates_of for f16 and bf16 (gemm_tiles_<layout>.cu); every other
// file only declares them.
#define HD_GEMM_TILES_INSTANCES(prefix, F)                                                                  \
  prefix template std::vector<Candidate> candidates_of<__half, F>(const GemmProblem&, const KernelArgs&, bool, bool); \
  prefix template std::vector<Candidate> candidates_of<Bf16, F>(const GemmProblem&, const KernelArgs&, bool, bool);

#if defined(HD_GPU_HIP)
inline constexpr bool kAmdEmulated = false;  // AMD builds: each AMD layout's instruction
#else
inline constexpr bool kAmdEmulated = true;   // CUDA builds: the AMD layouts' emulations, for the tests
#endif
inline constexpr Fragments kMfmaHere = kAmdEmulated ? Fragments::kMfmaEmulated : Fragments::kMfma;
inline constexpr Fragments kWmma11Here = kAmdEmulated ? Fragments::kWmma11Emulated : Fragments::kWmma11;
inline constexpr Fragments kWmma12Here = kAmdEmulated ? Fragments::kWmma12Emulated : Fragments::kWmma12;

}  // namespace hd::gpu::gemm_tiles
