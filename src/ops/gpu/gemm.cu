// Implicit-GEMM convolution / GEMM on the matrix-fragment layer (mma.cuh).
//
// A block computes a kBM x kBN tile of C with kWM x kWN fragment groups, each owning a
// (kBM/kWM) x (kBN/kWN) sub-tile of 16x8 accumulators. The k dimension streams through shared memory in
// steps of 32: double-buffered through registers (every target), or with 3-4 steps in flight through
// asynchronous copies (NVIDIA sm_80+, async_copy.cuh). A's rows are output pixels; their k-th element is
// found by splitting k into (kernel row, kernel column, channel), so the im2col matrix never exists. With
// channels a multiple of 8, every 16-byte vector of A lies inside one pixel and is one load (the "vector"
// kernels); otherwise (the 3- and 4-channel first convolutions) elements are gathered one by one.
// Problems with few output tiles and a long k can split k among blocks (split-K) and add the partial sums
// in a second kernel, in a fixed order.
#include <algorithm>
#include <climits>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/mma.cuh"
#if defined(HD_WITH_CUDNN) || defined(HD_WITH_CUBLASLT)
#include "ops/gpu/nvidia/vendor_gemm.h"
#endif
#include "ops/tuning/autotuner.h"

namespace hd::gpu {

namespace {

constexpr int kBK = 32;                // k per pipeline step
constexpr int kTileStride = kBK + 8;   // shared row length in 16-bit elements: 16 bytes of padding
constexpr int kVectorsPerRow = kBK / 8;

struct KernelArgs {  // GemmProblem in the kernel's integer widths
  int m, n, k, inner;
  int64_t a_outer, a_inner, b_outer, b_inner, c_outer, c_inner;
  int height, width, channels, out_hw, out_width, kw, stride, padding;
  int64_t pixel_stride, image_stride, ldb, ldc;
  float alpha;
  bool pairs;  // C rows and batch offsets even: two neighbours are one 32-bit store
  int splits;  // split-K: the k-steps are shared among this many blocks, which write f32 partial sums
};

// kStages == 2: the next k-step's tiles wait in registers while the tensor units work on the current
// one (every target). kStages >= 3: kStages - 1 k-steps are in flight at once through asynchronous
// copies straight into shared memory (16-byte vectors only; synchronous where the hardware has none).
// kSplit: the block adds up only its share of the k-steps and writes them, unscaled, to `partial`
// ([batch][split][m][n] f32); split_k_reduce_kernel finishes the sum and applies the epilogue.
// Frag: the fragment layout (mma.cuh): 32-lane 16x8 fragments (NVIDIA's matrix units, or the portable
// shuffles) or 64-lane 16x16 ones (AMD's MFMA, or its emulation).
template <class T, int kBM, int kBN, int kWM, int kWN, int kStages, bool kVector, class Frag, bool kSplit>
__global__ void __launch_bounds__(kWM* kWN* Frag::kLanes)
    gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ bias, const T* residual, T* c,
                float* __restrict__ partial, KernelArgs p) {
  constexpr int kThreads = kWM * kWN * Frag::kLanes;
  constexpr int kRowsPerPass = kThreads / kVectorsPerRow;
  constexpr int kAPasses = kBM / kRowsPerPass, kBPasses = kBN / kRowsPerPass;
  constexpr int kWarpM = kBM / kWM, kWarpN = kBN / kWN, kMT = kWarpM / 16, kNT = kWarpN / Frag::kN;
  constexpr bool kAsync = kStages >= 3;
  static_assert(kBM % kRowsPerPass == 0 && kBN % kRowsPerPass == 0 && kWarpM % 16 == 0 && kWarpN % Frag::kN == 0);
  static_assert(!kAsync || kVector, "asynchronous copies move whole 16-byte vectors");
  static_assert(kWM * kWN <= Frag::kMaxGroups, "more fragment groups than the layout's emulation has scratch for");
  extern __shared__ uint4 smem_raw[];
  uint16_t* const smem = reinterpret_cast<uint16_t*>(smem_raw);
  const auto a_tile = [&](int stage) { return smem + stage * (kBM + kBN) * kTileStride; };
  const auto b_tile = [&](int stage) { return smem + stage * (kBM + kBN) * kTileStride + kBM * kTileStride; };

  const int batch = int(blockIdx.z) / p.splits, split = int(blockIdx.z) % p.splits;
  const int zo = batch / p.inner, zi = batch % p.inner;
  const auto* a_bits = reinterpret_cast<const uint16_t*>(a + zo * p.a_outer + zi * p.a_inner);
  const auto* b_bits = reinterpret_cast<const uint16_t*>(b + zo * p.b_outer + zi * p.b_inner);
  c += zo * p.c_outer + zi * p.c_inner;
  if (residual) residual += zo * p.c_outer + zi * p.c_inner;
  const int m0 = int(blockIdx.x) * kBM, n0 = int(blockIdx.y) * kBN;
  const int tid = int(threadIdx.x), vec = tid % kVectorsPerRow, pass_row = tid / kVectorsPerRow;

  // Where this thread's A rows (output pixels) read from: their image and top-left input position.
  // A row past the end gets a position that no kernel offset brings into the image.
  int64_t a_image[kAPasses];
  int a_iy[kAPasses], a_ix[kAPasses];
  for (int i = 0; i < kAPasses; ++i) {
    const int m = m0 + pass_row + i * kRowsPerPass;
    const int img = m / p.out_hw, rem = m % p.out_hw;
    a_image[i] = int64_t(img) * p.image_stride;
    a_iy[i] = m < p.m ? (rem / p.out_width) * p.stride - p.padding : INT_MIN / 2;
    a_ix[i] = (rem % p.out_width) * p.stride - p.padding;
  }
  const auto a_element = [&](int i, int k) -> uint16_t {  // gather path: one element of A
    if (k >= p.k) return 0;
    const int ch = k % p.channels, kk = k / p.channels;
    const int iy = a_iy[i] + kk / p.kw, ix = a_ix[i] + kk % p.kw;
    if (unsigned(iy) >= unsigned(p.height) || unsigned(ix) >= unsigned(p.width)) return 0;
    return a_bits[a_image[i] + (int64_t(iy) * p.width + ix) * p.pixel_stride + ch];
  };
  // For the 16-byte paths (channels % 8 == 0, so the 8 elements of a vector share one kernel position):
  // calls f(pass, address, valid) for this thread's A vectors of the k-step at k0, then g(...) for B's.
  const auto for_each_vector = [&](int k0, auto f, auto g) {
    const int k = k0 + vec * 8;
    const bool k_ok = k < p.k;
    const int ch = k_ok ? k % p.channels : 0, kk = k_ok ? k / p.channels : 0;
    const int ky = kk / p.kw, kx = kk % p.kw;
    for (int i = 0; i < kAPasses; ++i) {
      const int iy = a_iy[i] + ky, ix = a_ix[i] + kx;
      const bool ok = k_ok && unsigned(iy) < unsigned(p.height) && unsigned(ix) < unsigned(p.width);
      f(i, ok ? a_bits + a_image[i] + (int64_t(iy) * p.width + ix) * p.pixel_stride + ch : a_bits, ok);
    }
    for (int j = 0; j < kBPasses; ++j) {
      const int n = n0 + pass_row + j * kRowsPerPass;
      const bool ok = k_ok && n < p.n;
      g(j, ok ? b_bits + int64_t(n) * p.ldb + k : b_bits, ok);
    }
  };
  const auto a_slot = [&](int stage, int i) { return a_tile(stage) + (pass_row + i * kRowsPerPass) * kTileStride + vec * 8; };
  const auto b_slot = [&](int stage, int j) { return b_tile(stage) + (pass_row + j * kRowsPerPass) * kTileStride + vec * 8; };

  uint4 a_reg[kAPasses], b_reg[kBPasses];  // the register-staged path's next k-step
  const auto load_registers = [&](int k0) {
    if constexpr (kVector) {
      for_each_vector(
          k0, [&](int i, const uint16_t* src, bool ok) { a_reg[i] = ok ? *reinterpret_cast<const uint4*>(src) : uint4{}; },
          [&](int j, const uint16_t* src, bool ok) { b_reg[j] = ok ? *reinterpret_cast<const uint4*>(src) : uint4{}; });
    } else {
      const int k = k0 + vec * 8;
      for (int i = 0; i < kAPasses; ++i) {
        uint16_t e[8];
        for (int x = 0; x < 8; ++x) e[x] = a_element(i, k + x);
        a_reg[i] = make_uint4(e[0] | uint32_t(e[1]) << 16, e[2] | uint32_t(e[3]) << 16, e[4] | uint32_t(e[5]) << 16,
                              e[6] | uint32_t(e[7]) << 16);
      }
      for (int j = 0; j < kBPasses; ++j) {
        const int n = n0 + pass_row + j * kRowsPerPass;
        uint16_t e[8];
        for (int x = 0; x < 8; ++x) e[x] = n < p.n && k + x < p.k ? b_bits[int64_t(n) * p.ldb + k + x] : uint16_t(0);
        b_reg[j] = make_uint4(e[0] | uint32_t(e[1]) << 16, e[2] | uint32_t(e[3]) << 16, e[4] | uint32_t(e[5]) << 16,
                              e[6] | uint32_t(e[7]) << 16);
      }
    }
  };
  const auto store_registers = [&](int stage) {
    for (int i = 0; i < kAPasses; ++i) *reinterpret_cast<uint4*>(a_slot(stage, i)) = a_reg[i];
    for (int j = 0; j < kBPasses; ++j) *reinterpret_cast<uint4*>(b_slot(stage, j)) = b_reg[j];
  };
  const auto load_async = [&](int stage, int k0) {
    for_each_vector(
        k0, [&](int i, const uint16_t* src, bool ok) { copy_16_async(a_slot(stage, i), src, ok); },
        [&](int j, const uint16_t* src, bool ok) { copy_16_async(b_slot(stage, j), src, ok); });
  };

  const int group = tid / Frag::kLanes, wm = group / kWN, wn = group % kWN;
  FragmentC acc[kMT][kNT];
  for (auto& row : acc)
    for (auto& f : row) f = FragmentC{{0.f, 0.f, 0.f, 0.f}};
  const auto multiply = [&](int stage) {
    for (int kk = 0; kk < kBK; kk += 16) {
      typename Frag::A af[kMT];
      typename Frag::B bf[kNT];
      for (int i = 0; i < kMT; ++i) af[i] = Frag::load_a(a_tile(stage), kTileStride, wm * kWarpM + i * 16, kk);
      for (int j = 0; j < kNT; ++j) bf[j] = Frag::load_b(b_tile(stage), kTileStride, wn * kWarpN + j * Frag::kN, kk);
      for (int i = 0; i < kMT; ++i)
        for (int j = 0; j < kNT; ++j) Frag::template mma<T>(acc[i][j], af[i], bf[j]);
    }
  };

  // This block's k-steps: all of them, or its split's share.
  const int all_steps = (p.k + kBK - 1) / kBK, per_split = (all_steps + p.splits - 1) / p.splits;
  const int first = split * per_split, steps = max(0, min(all_steps, first + per_split) - first);
  if constexpr (kAsync) {
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < steps) load_async(s, (first + s) * kBK);
      async_commit();  // empty groups too: the wait below counts groups
    }
    for (int s = 0; s < steps; ++s) {
      async_wait<kStages - 2>();  // step s has landed (for this thread) ...
      __syncthreads();            // ... for every thread, and step s-1's stage is no longer read
      const int next = s + kStages - 1;
      if (next < steps) load_async(next % kStages, (first + next) * kBK);
      async_commit();
      multiply(s % kStages);
    }
  } else if (steps > 0) {
    load_registers(first * kBK);
    store_registers(0);
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
      if (s + 1 < steps) load_registers((first + s + 1) * kBK);  // in flight while the tensor units work
      multiply(s & 1);
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
  for (int i = 0; i < kMT; ++i) {
    for (int j = 0; j < kNT; ++j) {
      for (int r = 0; r < 4; r += kStep) {
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

// A way to compute a problem, writing C to the pointer it is given (p.c, or a tuning buffer).
struct Candidate {
  std::string name;
  std::function<void(void* c)> launch;
};

constexpr size_t shared_bytes(int bm, int bn, int stages) {
  return size_t(stages) * size_t(bm + bn) * kTileStride * sizeof(uint16_t);
}

template <class T, int kBM, int kBN, int kWM, int kWN, int kStages, bool kVector, class Frag, int kSplits>
void launch_tile(const GemmProblem& p, const KernelArgs& base, void* c) {
  KernelArgs args = base;
  args.splits = kSplits;
  const int64_t batch = p.outer * p.inner;
  const dim3 grid(unsigned((args.m + kBM - 1) / kBM), unsigned((args.n + kBN - 1) / kBN), unsigned(batch * kSplits));
  constexpr size_t kShared = shared_bytes(kBM, kBN, kStages);
  const auto kernel = gemm_kernel<T, kBM, kBN, kWM, kWN, kStages, kVector, Frag, (kSplits > 1)>;
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

// The fragment layouts our tiles are built on: NVIDIA's tensor cores, the portable shuffles (what AMD
// targets without matrix cores run), AMD's MFMA, and MFMA's layout emulated (tests on any GPU).
enum class Fragments { kNvidia, kPortable, kMfma, kMfmaEmulated };
template <Fragments F>
using FragmentsOf = std::conditional_t<
    F == Fragments::kNvidia || F == Fragments::kPortable, Fragments16x8<F == Fragments::kPortable>,
    Fragments16x16<F == Fragments::kMfmaEmulated>>;
// In candidate names and tuning keys: the NVIDIA tensor-core tiles keep the plain names.
const char* suffix_of(Fragments f) {
  switch (f) {
    case Fragments::kNvidia: return "";
    case Fragments::kPortable: return "-portable";
    case Fragments::kMfma: return "-mfma";
    case Fragments::kMfmaEmulated: return "-mfma-emulated";
  }
  return "";
}

// The candidates for a problem. Our tile shapes: larger tiles reuse more of each load, smaller ones fill
// the GPU when the problem is small; register-staged (every target) and, on NVIDIA, with 3-4 k-steps in
// flight through asynchronous copies; split-K for problems whose output has fewer tiles than the GPU
// has multiprocessors but a long k. The gather kernel serves only the few-channel first convolutions.
// Then, on NVIDIA builds that have them, cuDNN for convolutions and cuBLASLt for dense products.
template <class T, Fragments F>
std::vector<Candidate> candidates_of(const GemmProblem& p, const KernelArgs& args, bool vector) {
  using Frag = FragmentsOf<F>;
  const std::string suffix = suffix_of(F);
  std::vector<Candidate> list;
  const auto add = [&](std::string name, void (*launch)(const GemmProblem&, const KernelArgs&, void*)) {
    list.push_back({std::move(name), [&p, args, launch](void* c) { launch(p, args, c); }});
  };
  if (!vector) {
    add("gather64x64" + suffix, launch_tile<T, 64, 64, 2, 2, 2, false, Frag, 1>);
    return list;
  }
  add("mma128x128" + suffix, launch_tile<T, 128, 128, 2, 2, 2, true, Frag, 1>);
  add("mma128x64" + suffix, launch_tile<T, 128, 64, 2, 2, 2, true, Frag, 1>);
  add("mma64x128" + suffix, launch_tile<T, 64, 128, 2, 2, 2, true, Frag, 1>);
  add("mma64x64" + suffix, launch_tile<T, 64, 64, 2, 2, 2, true, Frag, 1>);
  const int64_t tiles = ((args.m + 63) / 64) * ((args.n + 63) / 64) * p.outer * p.inner;
  const bool small_output = tiles < multiprocessor_count(p.device.index) && args.k >= 16 * kBK;
  if (small_output) {
    add("mma64x64-split4" + suffix, launch_tile<T, 64, 64, 2, 2, 2, true, Frag, 4>);
    add("mma64x64-split8" + suffix, launch_tile<T, 64, 64, 2, 2, 2, true, Frag, 8>);
  }
  if constexpr (F != Fragments::kNvidia) {
    return list;  // asynchronous copies and NVIDIA's libraries go with the NVIDIA tensor-core path
  } else {
    add("async3-128x128", launch_tile<T, 128, 128, 2, 2, 3, true, Frag, 1>);
    add("async3-128x256w8", launch_tile<T, 128, 256, 2, 4, 3, true, Frag, 1>);
    add("async3-256x128w8", launch_tile<T, 256, 128, 4, 2, 3, true, Frag, 1>);
    add("async4-64x128", launch_tile<T, 64, 128, 2, 2, 4, true, Frag, 1>);
    add("async4-128x64", launch_tile<T, 128, 64, 2, 2, 4, true, Frag, 1>);
    if (small_output) {
      add("async4-64x64-split4", launch_tile<T, 64, 64, 2, 2, 4, true, Frag, 4>);
      add("async4-64x64-split8", launch_tile<T, 64, 64, 2, 2, 4, true, Frag, 8>);
    }
#if defined(HD_WITH_CUDNN)
    if (cudnn_can_run(p)) list.push_back({"cudnn", [&p](void* c) { cudnn_conv(p, c); }});
    // Convolutions only: a dense product (a one-pixel-high image, 1x1 kernel) is cuBLASLt's.
    if (p.height > 1 || p.kh > 1) {
      for (int rank = 0, count = cudnn_graph_candidates(p); rank < count; ++rank)
        list.push_back({"cudnn-graph-" + std::to_string(rank), [&p, rank](void* c) { cudnn_graph_conv(p, rank, c); }});
    }
#endif
#if defined(HD_WITH_CUBLASLT)
    if (cublaslt_can_run(p)) list.push_back({"cublaslt", [&p](void* c) { cublaslt_gemm(p, c); }});
#endif
    return list;
  }
}

std::string cached_device_name(int index) {
  static std::mutex mutex;
  static std::string names[16];
  if (index < 0 || index >= 16) return device_name(index);
  const std::lock_guard lock(mutex);
  if (names[index].empty()) names[index] = device_name(index);
  return names[index];
}

std::string tuning_key(const GemmProblem& p, bool vector, Fragments fragments) {
  return str_cat("gemm ", dtype_name(p.dtype), vector ? " vector" : " gather", suffix_of(fragments), " on ",
                 cached_device_name(p.device.index),
                 ": batch ", p.outer, "x", p.inner, " images ", p.images, "x", p.height, "x", p.width, "x", p.channels,
                 " (pixel stride ", p.pixel_stride, ") kernel ", p.kh, "x", p.kw, " stride ", p.stride, " padding ",
                 p.padding, " -> ", p.out_height, "x", p.out_width, "x", p.n, p.bias ? " bias" : "",
                 p.residual ? " residual" : "");
}

// Milliseconds per run of `launch`: one warm-up run, then the fastest of three batches of five. A single
// short batch let clock ramps and stray work decide: two tunings of the same UNet on one H100 disagreed
// on 20 of its 61 choices, with the same candidate timed up to 2x apart, and the step time with them.
template <class F>
double time_runs(F launch) {
  cudaEvent_t start, stop;
  HD_GPU_CHECK(cudaEventCreate(&start));
  HD_GPU_CHECK(cudaEventCreate(&stop));
  launch();
  constexpr int kBatches = 3, kRuns = 5;
  float best = 0.f;
  for (int batch = 0; batch < kBatches; ++batch) {
    HD_GPU_CHECK(cudaEventRecord(start, current_stream()));
    for (int i = 0; i < kRuns; ++i) launch();
    HD_GPU_CHECK(cudaEventRecord(stop, current_stream()));
    HD_GPU_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    HD_GPU_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = batch == 0 ? ms : std::min(best, ms);
  }
  HD_GPU_CHECK(cudaEventDestroy(start));
  HD_GPU_CHECK(cudaEventDestroy(stop));
  return double(best) / kRuns;
}

// Milliseconds per run of candidate `c` on `p`, into a buffer of its own: C may be the residual, which
// repeated runs would otherwise add up. -1 when the candidate fails on this problem.
double time_candidate(const GemmProblem& p, const Candidate& c) {
  const int64_t extent = (p.outer - 1) * p.c_batch.outer + (p.inner - 1) * p.c_batch.inner + (p.m() - 1) * p.ldc + p.n;
  const Buffer trial(p.device, size_t(extent) * dtype_size(p.dtype));
  try {
    return time_runs([&] { c.launch(trial.data()); });
  } catch (const Error&) {
    (void)cudaGetLastError();
    return -1.0;
  }
}

struct Prepared {
  KernelArgs args;
  bool vector;
  Fragments fragments;
};

// The layout a path runs on this device: the device's matrix units unless a test asks for another.
Fragments fragments_for(GemmPath path, int device) {
  switch (path) {
    case GemmPath::kPortable: return Fragments::kPortable;
    case GemmPath::kMfmaLayout: return device_matrix_unit(device) == MatrixUnit::kAmdMfma ? Fragments::kMfma
                                                                                          : Fragments::kMfmaEmulated;
    case GemmPath::kTuned: break;
  }
  switch (device_matrix_unit(device)) {
    case MatrixUnit::kNvidiaMma: return Fragments::kNvidia;
    case MatrixUnit::kAmdMfma: return Fragments::kMfma;
    case MatrixUnit::kNone: break;
  }
  return Fragments::kPortable;
}

Prepared prepare(const GemmProblem& p, GemmPath path) {
  const int64_t m = p.m(), k = p.k();
  HD_CHECK_KIND(p.dtype == DType::kF16 || p.dtype == DType::kBF16, ErrorKind::kUnsupported,
                "gemm: the GPU kernels take f16 or bf16, got ", dtype_name(p.dtype));
  HD_CHECK_KIND(m < INT_MAX && p.n < INT_MAX && k < INT_MAX && p.height * p.width < INT_MAX, ErrorKind::kUnsupported,
                "gemm: a problem of ", m, " x ", p.n, " x ", k, " exceeds the kernels' 32-bit indices");
  HD_CHECK_KIND(p.outer * p.inner <= 65535, ErrorKind::kUnsupported, "gemm: a batch of ", p.outer * p.inner,
                " problems exceeds 65535");
  const KernelArgs args{int(m), int(p.n), int(k), int(p.inner), p.a_batch.outer, p.a_batch.inner, p.b_batch.outer,
                        p.b_batch.inner, p.c_batch.outer, p.c_batch.inner, int(p.height), int(p.width),
                        int(p.channels), int(p.out_height * p.out_width), int(p.out_width), p.kw, p.stride, p.padding,
                        p.pixel_stride, p.height * p.width * p.pixel_stride, p.ldb, p.ldc, p.alpha,
                        p.ldc % 2 == 0 && p.c_batch.outer % 2 == 0 && p.c_batch.inner % 2 == 0 && is_aligned(p.c, 4) &&
                            (!p.residual || is_aligned(p.residual, 4)),
                        1};
  // 16-byte loads need every row and batch start of A and B on a 16-byte boundary.
  const bool vector = p.channels % 8 == 0 && p.pixel_stride % 8 == 0 && p.a_batch.outer % 8 == 0 &&
                      p.a_batch.inner % 8 == 0 && is_aligned(p.a, 16) && p.ldb % 8 == 0 && p.b_batch.outer % 8 == 0 &&
                      p.b_batch.inner % 8 == 0 && is_aligned(p.b, 16);
  HD_GPU_CHECK(cudaSetDevice(p.device.index));
  return {args, vector, fragments_for(path, p.device.index)};
}

// Calls f with the candidates of p (their element type and fragment path resolved).
template <class F>
void with_candidates(const GemmProblem& p, const Prepared& prepared, F f) {
  with_element_type(p.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    if constexpr (!std::is_same_v<T, float>) {
      // Each build instantiates the layouts its targets can use: NVIDIA's (and MFMA's emulation, for the
      // tests), or AMD's; the portable one everywhere.
      switch (prepared.fragments) {
        case Fragments::kPortable: return f(candidates_of<T, Fragments::kPortable>(p, prepared.args, prepared.vector));
#if defined(HD_GPU_HIP)
        case Fragments::kMfma: return f(candidates_of<T, Fragments::kMfma>(p, prepared.args, prepared.vector));
        case Fragments::kNvidia:
        case Fragments::kMfmaEmulated: break;
#else
        case Fragments::kNvidia: return f(candidates_of<T, Fragments::kNvidia>(p, prepared.args, prepared.vector));
        case Fragments::kMfmaEmulated:
          return f(candidates_of<T, Fragments::kMfmaEmulated>(p, prepared.args, prepared.vector));
        case Fragments::kMfma: break;
#endif
      }
      throw Error(ErrorKind::kUnsupported, str_cat("gemm: the fragment layout '", suffix_of(prepared.fragments),
                                                   "' is not built for this vendor"));
    }
  });
}

}  // namespace

GemmProblem dense_gemm(DType dtype, const Device& device, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                       const void* b, int64_t ldb, void* c, int64_t ldc) {
  GemmProblem p;
  p.dtype = dtype;
  p.device = device;
  p.n = n;
  p.a = a;
  p.width = p.out_width = m;
  p.channels = k;
  p.pixel_stride = lda;
  p.b = b;
  p.ldb = ldb;
  p.c = c;
  p.ldc = ldc;
  return p;
}

void gemm(const GemmProblem& p, GemmPath path) {
  if (p.m() == 0 || p.n == 0 || p.outer * p.inner == 0) return;
  const Prepared prepared = prepare(p, path);
  with_candidates(p, prepared, [&](const std::vector<Candidate>& list) {
    std::vector<std::string> names;
    for (const Candidate& c : list) names.push_back(c.name);
    const int chosen = ops::choose_fastest(tuning_key(p, prepared.vector, prepared.fragments), names,
                                           [&](int i) { return time_candidate(p, list[size_t(i)]); });
    list[size_t(chosen)].launch(p.c);
  });
}

std::vector<std::string> gemm_candidates(const GemmProblem& p, GemmPath path) {
  std::vector<std::string> names;
  if (p.m() == 0 || p.n == 0 || p.outer * p.inner == 0) return names;
  with_candidates(p, prepare(p, path), [&](const std::vector<Candidate>& list) {
    for (const Candidate& c : list) names.push_back(c.name);
  });
  return names;
}

void gemm_with(const GemmProblem& p, const std::string& candidate, GemmPath path) {
  bool ran = false;
  with_candidates(p, prepare(p, path), [&](const std::vector<Candidate>& list) {
    for (const Candidate& c : list) {
      if (c.name != candidate) continue;
      c.launch(p.c);
      ran = true;
    }
  });
  HD_CHECK_KIND(ran, ErrorKind::kUnsupported, "gemm: no candidate '", candidate, "' for this problem");
}

// ---- transpose ----

namespace {

constexpr int kTransposeTile = 32;

__global__ void transpose_kernel(const uint16_t* __restrict__ in, int64_t ld_in, int64_t in_outer, int64_t in_inner,
                                 int inner, int rows, int cols, uint16_t* __restrict__ out) {
  __shared__ uint16_t tile[kTransposeTile][kTransposeTile + 1];
  const int z = int(blockIdx.z);
  in += (z / inner) * in_outer + (z % inner) * in_inner;
  out += int64_t(z) * rows * cols;
  const int r0 = int(blockIdx.y) * kTransposeTile, c0 = int(blockIdx.x) * kTransposeTile;
  for (int r = int(threadIdx.y); r < kTransposeTile; r += int(blockDim.y)) {
    const int row = r0 + r, col = c0 + int(threadIdx.x);
    if (row < rows && col < cols) tile[r][threadIdx.x] = in[int64_t(row) * ld_in + col];
  }
  __syncthreads();
  for (int cc = int(threadIdx.y); cc < kTransposeTile; cc += int(blockDim.y)) {
    const int col = c0 + cc, row = r0 + int(threadIdx.x);
    if (row < rows && col < cols) out[int64_t(col) * rows + row] = tile[threadIdx.x][cc];
  }
}

}  // namespace

void transpose_16bit(const void* in, int64_t ld_in, BatchStrides in_batch, int64_t outer, int64_t inner, int64_t rows,
                     int64_t cols, void* out, const Device& device) {
  if (rows == 0 || cols == 0 || outer * inner == 0) return;
  HD_CHECK_KIND(rows < INT_MAX && cols < INT_MAX && outer * inner <= 65535, ErrorKind::kUnsupported,
                "transpose: ", outer * inner, " matrices of ", rows, " x ", cols, " exceed the kernel's limits");
  HD_GPU_CHECK(cudaSetDevice(device.index));
  const dim3 grid(unsigned((cols + kTransposeTile - 1) / kTransposeTile),
                  unsigned((rows + kTransposeTile - 1) / kTransposeTile), unsigned(outer * inner));
  transpose_kernel<<<grid, dim3(kTransposeTile, 8), 0, current_stream()>>>(
      static_cast<const uint16_t*>(in), ld_in, in_batch.outer, in_batch.inner, int(inner), int(rows), int(cols),
      static_cast<uint16_t*>(out));
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
