// GEMM and implicit-GEMM convolution, the host side: the candidates of a problem (our tiles on the
// device's fragment layout, gemm_tiles.cuh, and on NVIDIA cuDNN and cuBLASLt), the autotuner's choice
// among them, and the launch; plus a 16-bit transpose.
#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gemm_tiles.cuh"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/tuning/autotuner.h"

namespace hd::gpu {

namespace {

using gemm_tiles::Candidate;
using gemm_tiles::candidates_of;
using gemm_tiles::Fragments;
using gemm_tiles::KernelArgs;
using gemm_tiles::suffix_of;

}  // namespace

// Compiled in the layouts' own files (gemm_tiles_<layout>.cu).
namespace gemm_tiles {
#if !defined(HD_GPU_HIP)
HD_GEMM_TILES_INSTANCES(extern, Fragments::kNvidia)
#endif
HD_GEMM_TILES_INSTANCES(extern, Fragments::kPortable)
HD_GEMM_TILES_INSTANCES(extern, kMfmaHere)
HD_GEMM_TILES_INSTANCES(extern, kWmma11Here)
HD_GEMM_TILES_INSTANCES(extern, kWmma12Here)
}  // namespace gemm_tiles

namespace {

struct Prepared {
  KernelArgs args;
  bool vector;
  Fragments fragments;
  bool libraries;        // the vendor libraries are candidates too (the tuned path)
  bool warpgroup_tiles;  // and Hopper's warpgroup tiles, where the device has them
};

const char* gate_name(GemmGate gate) {
  switch (gate) {
    case GemmGate::kNone:
      return "";
    case GemmGate::kGeluErf:
      return " geglu";
    case GemmGate::kGeluTanh:
      return " geglu-tanh";
  }
  return "";
}

// Without libraries (a test's forced layout, or --kernels own) a problem is tuned apart from the tuned
// path on the same layout, whose candidates include the libraries; NVIDIA's fragment layer without
// Hopper's warpgroup tiles (KernelPath::kFragments, or --kernels fragments) apart again. A sized key
// (ops::sized_key): the same weights at another batch or image size are its neighbours, whose choice a first
// use may take.
std::string tuning_key(const GemmProblem& p, const Prepared& prepared) {
  const bool fragment_layer_only = !prepared.warpgroup_tiles && prepared.fragments == Fragments::kNvidia;
  const std::string family = str_cat(
      "gemm ", dtype_name(p.dtype), prepared.vector ? " vector" : " gather", suffix_of(prepared.fragments),
      prepared.libraries ? "" : " tiles only", fragment_layer_only ? " (fragment layer)" : "", " on ",
      device_name(p.device.index), ": channels ", p.channels, " (pixel stride ", p.pixel_stride, ") kernel ",
      p.kh, "x", p.kw, " stride ", p.stride, " padding ", p.padding, " -> ", p.n, p.bias ? " bias" : "",
      p.residual ? " residual" : "", gate_name(p.gate),
      p.padding_batch_step != 0 ? " padded per problem" : "", p.c_group_rows != 0 ? " C in row groups" : "",
      p.upsampled_conv_weights != nullptr ? " (upsampled)" : "");
  const std::string size = str_cat("batch ", p.outer, "x", p.inner, " images ", p.images, "x", p.height, "x",
                                   p.width, " -> ", p.out_height, "x", p.out_width);
  return ops::sized_key(family, p.outer * p.inner * p.m(), size);
}

// Milliseconds per run of `launch`: one warm-up run, then the fastest of three batches of five (kFull).
// A single short batch let clock ramps and stray work decide: two tunings of the same UNet on one H100
// disagreed on 20 of its 61 choices, with the same candidate timed up to 2x apart, and the step time
// with them. kBrief (the quick policy, which times few candidates) takes one run after the warm-up, and
// when that ran under a millisecond, one batch of three: a run that long is measured well alone (the
// host's launch work inside it is a few percent), and timing the VAE's large convolutions four times
// each made a large part of a batch's first tuning. (The warm-up itself is never the measure: a library
// builds its plan or loads its kernel inside it.)
template <class F>
double time_runs(F launch, ops::TimingEffort effort) {
  cudaEvent_t start, stop;
  HD_GPU_CHECK(cudaEventCreate(&start));
  HD_GPU_CHECK(cudaEventCreate(&stop));
  launch();
  const bool full = effort == ops::TimingEffort::kFull;
  int batches = 3, runs = 5;
  if (!full) {
    HD_GPU_CHECK(cudaEventRecord(start, current_stream()));
    launch();
    HD_GPU_CHECK(cudaEventRecord(stop, current_stream()));
    HD_GPU_CHECK(cudaEventSynchronize(stop));
    float one_ms = 0.f;
    HD_GPU_CHECK(cudaEventElapsedTime(&one_ms, start, stop));
    if (one_ms >= 1.0f) {
      HD_GPU_CHECK(cudaEventDestroy(start));
      HD_GPU_CHECK(cudaEventDestroy(stop));
      return double(one_ms);
    }
    batches = 1;
    runs = 3;
  }
  float best = 0.f;
  for (int batch = 0; batch < batches; ++batch) {
    HD_GPU_CHECK(cudaEventRecord(start, current_stream()));
    for (int i = 0; i < runs; ++i) launch();
    HD_GPU_CHECK(cudaEventRecord(stop, current_stream()));
    HD_GPU_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    HD_GPU_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = batch == 0 ? ms : std::min(best, ms);
  }
  HD_GPU_CHECK(cudaEventDestroy(start));
  HD_GPU_CHECK(cudaEventDestroy(stop));
  return double(best) / runs;
}

// Milliseconds per run of candidate `c` on `p`, into a buffer of its own: C may be the residual, which
// repeated runs would otherwise add up. -1 when the candidate fails on this problem.
double time_candidate(const GemmProblem& p, const Candidate& c, ops::TimingEffort effort) {
  const int64_t extent = (p.outer - 1) * p.c_batch.outer + (p.inner - 1) * p.c_batch.inner +
                         p.c_row_offset(p.m() - 1) + p.c_columns();
  const Buffer trial(p.device, size_t(extent) * dtype_size(p.dtype));
  try {
    return time_runs([&] { c.launch(p, trial.data()); }, effort);
  } catch (const Error&) {
    (void)cudaGetLastError();
    return -1.0;
  }
}

// The layout a path runs on this device: the device's matrix units unless a test asks for another (an
// AMD layout is then its instruction on the AMD GPU that has it, and its emulation anywhere else).
Fragments fragments_for(KernelPath path, int device) {
  const MatrixUnit unit = device_matrix_unit(device);
  if (path == KernelPath::kPortable) return Fragments::kPortable;
  const bool native = amd_layout_of(path) == unit;  // a forced AMD layout on the GPU that has it
  switch (amd_layout_of(path)) {
    case MatrixUnit::kAmdMfma: return native ? Fragments::kMfma : Fragments::kMfmaEmulated;
    case MatrixUnit::kAmdWmma11: return native ? Fragments::kWmma11 : Fragments::kWmma11Emulated;
    case MatrixUnit::kAmdWmma12: return native ? Fragments::kWmma12 : Fragments::kWmma12Emulated;
    case MatrixUnit::kNvidiaMma:
    case MatrixUnit::kNone: break;  // kTuned: the device's own
  }
  switch (unit) {
    case MatrixUnit::kNvidiaMma: return Fragments::kNvidia;
    case MatrixUnit::kAmdMfma: return Fragments::kMfma;
    case MatrixUnit::kAmdWmma11: return Fragments::kWmma11;
    case MatrixUnit::kAmdWmma12: return Fragments::kWmma12;
    case MatrixUnit::kNone: break;
  }
  return Fragments::kPortable;
}

Prepared prepare(const GemmProblem& p, KernelPath path) {
  const int64_t m = p.m(), k = p.k();
  HD_CHECK_KIND(p.dtype == DType::kF16 || p.dtype == DType::kBF16, ErrorKind::kUnsupported,
                "gemm: the GPU kernels take f16 or bf16, got ", dtype_name(p.dtype));
  HD_CHECK_KIND(m < INT_MAX && p.n < INT_MAX && k < INT_MAX && p.height * p.width < INT_MAX, ErrorKind::kUnsupported,
                "gemm: a problem of ", m, " x ", p.n, " x ", k, " exceeds the kernels' 32-bit indices");
  HD_CHECK_KIND(p.outer * p.inner <= 65535, ErrorKind::kUnsupported, "gemm: a batch of ", p.outer * p.inner,
                " problems exceeds 65535");
  HD_CHECK(p.c_group_rows >= 0 && p.c_group_rows < INT_MAX, "gemm: C's rows in groups of ", p.c_group_rows);
  HD_CHECK(p.gate == GemmGate::kNone || (p.outer * p.inner == 1 && p.residual == nullptr && p.n % 2 == 0 &&
                                         p.ldc == p.n / 2 && p.c_group_rows == 0),
           "gemm: GEGLU takes one product of an even width, no residual and C dense: got ", p.outer * p.inner,
           " products, width ", p.n, ", C rows ", p.ldc, " apart", p.residual ? ", a residual" : "");
  const KernelArgs args{int(m), int(p.n), int(k), int(p.inner), p.a_batch.outer, p.a_batch.inner, p.b_batch.outer,
                        p.b_batch.inner, p.c_batch.outer, p.c_batch.inner, int(p.height), int(p.width),
                        int(p.out_height * p.out_width), int(p.out_width), p.stride, p.padding,
                        p.pixel_stride, p.height * p.width * p.pixel_stride, p.ldb, p.ldc, p.alpha,
                        p.ldc % 2 == 0 && p.c_batch.outer % 2 == 0 && p.c_batch.inner % 2 == 0 && is_aligned(p.c, 4) &&
                            (!p.residual || is_aligned(p.residual, 4)),
                        1, FastDivisor(int(p.channels)), FastDivisor(p.kw)};
  // 16-byte loads need every row and batch start of A and B on a 16-byte boundary.
  const bool vector = p.channels % 8 == 0 && p.pixel_stride % 8 == 0 && p.a_batch.outer % 8 == 0 &&
                      p.a_batch.inner % 8 == 0 && is_aligned(p.a, 16) && p.ldb % 8 == 0 && p.b_batch.outer % 8 == 0 &&
                      p.b_batch.inner % 8 == 0 && is_aligned(p.b, 16);
  HD_GPU_CHECK(cudaSetDevice(p.device.index));
  const ops::KernelChoice choice = ops::kernel_choice();
  // The libraries take neither problems padded apart nor C's rows in groups (the phases of an upsampled
  // convolution): such a problem reaches them through its unfused candidate.
  const bool own_layout = p.padding_batch_step != 0 || p.c_group_rows != 0;
  const bool libraries = path == KernelPath::kTuned && choice == ops::KernelChoice::kAll && !own_layout;
  const bool warpgroup_tiles = path == KernelPath::kTuned && choice != ops::KernelChoice::kFragments;
  Prepared prepared{args, vector, fragments_for(path, p.device.index), libraries, warpgroup_tiles};
  prepared.args.gelu_tanh = p.gate == GemmGate::kGeluTanh;
  prepared.args.padding_batch_step = p.padding_batch_step;
  prepared.args.c_grouped = p.c_group_rows != 0;
  prepared.args.pairs = prepared.args.pairs && p.c_group_stride % 2 == 0;
  prepared.args.by_c_group_rows = FastDivisor(int(std::max<int64_t>(p.c_group_rows, 1)));
  prepared.args.c_group_stride = p.c_group_stride;
  return prepared;
}

// A GEGLU problem computed in two passes: the projection through the candidates of the plain product
// (tuned on its own, the vendor libraries among them where the path has them) into scratch, then the
// GEGLU kernel. It takes every GEGLU problem, and is what the fused tiles are timed against.
Candidate unfused_candidate(KernelPath path) {
  return {"unfused",
          [path](const GemmProblem& q, void* c) {
            GemmProblem projection = q;
            projection.gate = GemmGate::kNone;
            projection.ldc = q.n;
            projection.c =
                scratch(q.device, size_t(q.m() * q.n) * dtype_size(q.dtype), ScratchSlot::kProjection);
            gemm(projection, path);
            const Tensor p_view = Tensor::contiguous(projection.c, q.dtype, Shape{q.m(), q.n}, q.device);
            gpu::geglu(
                p_view,
                q.gate == GemmGate::kGeluTanh ? ops::GeluApproximation::kTanh : ops::GeluApproximation::kNone,
                Tensor::contiguous(c, q.dtype, Shape{q.m(), q.n / 2}, q.device));
          },
          true, false};
}

// The phases of an upsampled convolution (upsample_conv_gemm) computed as the convolution itself: A
// upsampled into scratch (ScratchSlot::kProjection, held while the convolution's own candidate uses
// kGemm), then the 3x3 convolution through its own tuned choice (the libraries among its candidates where
// the path has them). What the phase tiles are timed against, by the exhaustive policy only: the best
// phase tile took 0.41-0.51 of its time on SD's and SDXL's upsamplers but the smallest (0.88 at 8x8) on an
// H200 with cuDNN among its candidates (2026-11-29), and timing it under the quick policy tunes the
// convolution as well, which made SDXL's first image 0.2-0.3 s longer.
Candidate unfused_upsample_candidate(KernelPath path) {
  return {"unfused",
          [path](const GemmProblem& q, void* c) {
            const int64_t channels = q.channels, height = 2 * q.height, width = 2 * q.width;
            void* upsampled =
                scratch(q.device, size_t(q.images * height * width * channels) * dtype_size(q.dtype),
                        ScratchSlot::kProjection);
            gpu::upsample_nearest_2x(
                Tensor::contiguous(const_cast<void*>(q.a), q.dtype,
                                   Shape{q.images, q.height, q.width, channels}, q.device),
                Tensor::contiguous(upsampled, q.dtype, Shape{q.images, height, width, channels}, q.device));
            GemmProblem conv = q;
            conv.outer = conv.inner = 1;
            conv.a_batch = conv.b_batch = conv.c_batch = {};
            conv.padding_batch_step = 0;
            conv.c_group_rows = conv.c_group_stride = 0;
            conv.upsampled_conv_weights = nullptr;
            conv.a = upsampled;
            conv.height = conv.out_height = height;
            conv.width = conv.out_width = width;
            conv.pixel_stride = channels;
            conv.kh = conv.kw = 3;
            conv.padding = 1;
            conv.b = q.upsampled_conv_weights;
            conv.ldb = 9 * channels;
            conv.c = c;
            conv.ldc = q.n;
            gemm(conv, path);
          },
          false, false};
}

// Calls f with the candidates of p (their element type and fragment path resolved).
template <class F>
void with_candidates(const GemmProblem& p, const Prepared& prepared, KernelPath path, F f) {
  with_element_type(p.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    if constexpr (!std::is_same_v<T, float>) {
      // Each build offers the layouts its targets can use (their instances are compiled in
      // gemm_tiles_<layout>.cu): NVIDIA's and the AMD layouts' emulations (for the tests) in CUDA builds,
      // AMD's own in HIP builds; the portable one everywhere.
      const auto offer = [&]<Fragments L>() {
        std::vector<Candidate> list = candidates_of<T, L>(p, prepared.args, prepared.vector,
                                                          prepared.libraries, prepared.warpgroup_tiles);
        if (p.gate != GemmGate::kNone) list.push_back(unfused_candidate(path));
        if (p.upsampled_conv_weights != nullptr) list.push_back(unfused_upsample_candidate(path));
        return f(list);
      };
      switch (prepared.fragments) {
        case Fragments::kPortable: return offer.template operator()<Fragments::kPortable>();
#if defined(HD_GPU_HIP)
        case Fragments::kMfma: return offer.template operator()<Fragments::kMfma>();
        case Fragments::kWmma11: return offer.template operator()<Fragments::kWmma11>();
        case Fragments::kWmma12: return offer.template operator()<Fragments::kWmma12>();
        default: break;
#else
        case Fragments::kNvidia: return offer.template operator()<Fragments::kNvidia>();
        case Fragments::kMfmaEmulated: return offer.template operator()<Fragments::kMfmaEmulated>();
        case Fragments::kWmma11Emulated: return offer.template operator()<Fragments::kWmma11Emulated>();
        case Fragments::kWmma12Emulated: return offer.template operator()<Fragments::kWmma12Emulated>();
        default: break;
#endif
      }
      throw Error(ErrorKind::kUnsupported, str_cat("gemm: the fragment layout '", suffix_of(prepared.fragments),
                                                   "' is not built for this vendor"));
    }
  });
}

// ---- the hot path: a signature's launch remembered ----

// Everything of a problem that decides its tuning key, its candidates and their kernel arguments (shape,
// strides, which operands exist, their alignment, the path); never its pointers.
using Signature = std::array<int64_t, 31>;

Signature signature_of(const GemmProblem& p, KernelPath path) {
  const auto bit = [](bool set, int position) { return int64_t(set) << position; };
  const int64_t operands =
      bit(is_aligned(p.a, 16), 0) | bit(is_aligned(p.b, 16), 1) | bit(is_aligned(p.c, 16), 2) |
      bit(is_aligned(p.c, 4), 3) | bit(is_aligned(p.bias, 16), 4) | bit(is_aligned(p.residual, 16), 5) |
      bit(is_aligned(p.residual, 4), 6) | bit(p.bias != nullptr, 7) | bit(p.residual != nullptr, 8) |
      bit(p.residual != nullptr && p.residual == p.c, 9) | bit(p.upsampled_conv_weights != nullptr, 10);
  uint32_t alpha = 0;
  std::memcpy(&alpha, &p.alpha, sizeof(alpha));
  // The fields in GemmProblem's order, a few to a line.
  // clang-format off
  return {int64_t(p.dtype), p.device.index, int64_t(path), p.outer, p.inner, p.n,
          p.a_batch.outer, p.a_batch.inner, p.images, p.height, p.width, p.channels, p.pixel_stride,
          p.out_height, p.out_width, p.kh, p.kw, p.stride, p.padding,
          p.ldb, p.b_batch.outer, p.b_batch.inner, p.ldc, p.c_batch.outer, p.c_batch.inner,
          int64_t(alpha), int64_t(p.gate), p.padding_batch_step, p.c_group_rows, p.c_group_stride, operands};
  // clang-format on
}

struct SignatureHash {
  size_t operator()(const Signature& s) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (const int64_t v : s) h = (h ^ uint64_t(v)) * 1099511628211ull;
    return size_t(h);
  }
};

using Launch = std::function<void(const GemmProblem&, void*)>;

// A problem whose signature ran before runs the same candidate again without its candidate list, tuning
// key or the tuner's lookup being built (strings and allocations on every call the UNet's graph does
// not replay: the VAE, the text encoders, the Python ops; their cost was not measured). What the tuner
// may since have changed (tuning_generation) empties it.
class RememberedLaunches {
 public:
  std::shared_ptr<const Launch> find(const Signature& s) {
    const std::lock_guard lock(mutex_);
    if (generation_ != ops::tuning_generation()) launches_.clear(), generation_ = ops::tuning_generation();
    const auto it = launches_.find(s);
    return it == launches_.end() ? nullptr : it->second;
  }
  void remember(const Signature& s, const Launch& launch) {
    const std::lock_guard lock(mutex_);
    if (launches_.size() >= kMaxLaunches) launches_.clear();  // a caller of ever new shapes: bounded
    launches_[s] = std::make_shared<const Launch>(launch);
  }
  void forget(const Signature& s) {
    const std::lock_guard lock(mutex_);
    launches_.erase(s);
  }

 private:
  static constexpr size_t kMaxLaunches = 4096;
  std::mutex mutex_;
  uint64_t generation_ = 0;
  std::unordered_map<Signature, std::shared_ptr<const Launch>, SignatureHash> launches_;
};

RememberedLaunches& remembered_launches() {
  static RememberedLaunches launches;
  return launches;
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

void gemm(const GemmProblem& p, KernelPath path) {
  if (p.m() == 0 || p.n == 0 || p.outer * p.inner == 0) return;
  const Signature signature = signature_of(p, path);
  if (const std::shared_ptr<const Launch> launch = remembered_launches().find(signature)) {
    HD_GPU_CHECK(cudaSetDevice(p.device.index));
    try {
      (*launch)(p, p.c);
      return;
    } catch (const Error& e) {  // as a cached choice that cannot run, below
      if (e.kind() != ErrorKind::kUnsupported) throw;
      (void)cudaGetLastError();
      remembered_launches().forget(signature);
    }
  }
  const Prepared prepared = prepare(p, path);
  with_candidates(p, prepared, path, [&](const std::vector<Candidate>& list) {
    std::vector<std::string> names;
    std::vector<bool> quick, library_picks;
    for (const Candidate& c : list)
      names.push_back(c.name), quick.push_back(c.quick), library_picks.push_back(c.library_pick);
    const std::string key = tuning_key(p, prepared);
    const int chosen = ops::choose_fastest(
        key, names,
        [&](int i, ops::TimingEffort effort) { return time_candidate(p, list[size_t(i)], effort); }, quick,
        library_picks);
    try {
      list[size_t(chosen)].launch(p, p.c);
      remembered_launches().remember(signature, list[size_t(chosen)].launch);
    } catch (const Error& e) {
      // A cached library choice this process cannot run (another library version, with fewer engines
      // for the shape): chosen again without it, and the new choice appended to the cache.
      if (e.kind() != ErrorKind::kUnsupported) throw;
      (void)cudaGetLastError();
      ops::forget_choice(key);
      const int again = ops::choose_fastest(
          key, names,
          [&](int i, ops::TimingEffort effort) {
            return i == chosen ? -1.0 : time_candidate(p, list[size_t(i)], effort);
          },
          quick, library_picks);
      list[size_t(again)].launch(p, p.c);
      remembered_launches().remember(signature, list[size_t(again)].launch);
    }
  });
}

std::vector<std::string> gemm_candidates(const GemmProblem& p, KernelPath path) {
  std::vector<std::string> names;
  if (p.m() == 0 || p.n == 0 || p.outer * p.inner == 0) return names;
  with_candidates(p, prepare(p, path), path, [&](const std::vector<Candidate>& list) {
    for (const Candidate& c : list) names.push_back(c.name);
  });
  return names;
}

void gemm_with(const GemmProblem& p, const std::string& candidate, KernelPath path) {
  bool ran = false;
  with_candidates(p, prepare(p, path), path, [&](const std::vector<Candidate>& list) {
    for (const Candidate& c : list) {
      if (c.name != candidate) continue;
      c.launch(p, p.c);
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
