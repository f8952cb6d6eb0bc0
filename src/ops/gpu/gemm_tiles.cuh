// The candidates of one fragment layout for a GEMM problem (candidates_of): our tiles (the kernel in
// gemm_kernel.cuh, each an instance of gemm_tile_shape.h's table) and the vendor libraries the build has.
// Each layout's instances are compiled in a file of their own (gemm_tiles_<layout>.cu), so that they
// build in parallel; gemm.cu holds the host side (tuning, dispatch) and instantiates none of them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gemm_candidate.h"
#include "ops/gpu/gemm_kernel.cuh"
#include "ops/gpu/gpu_runtime.h"
#if defined(HD_WITH_CUDNN) || defined(HD_WITH_CUBLASLT)
#include "ops/gpu/nvidia/vendor_gemm.h"
#endif
#if defined(HD_WITH_WGMMA)
#include "ops/gpu/nvidia/gemm_wgmma.h"
#endif
#if defined(HD_WITH_HIPBLASLT) || defined(HD_WITH_ROCBLAS) || defined(HD_WITH_MIOPEN)
#include "ops/gpu/amd/vendor_gemm.h"
#endif

namespace hd::gpu::gemm_tiles {

// ---- host side: candidates, tuning, launch ----

template <class T, class Tile, class Frag>
void launch_tile(const GemmProblem& p, const KernelArgs& args, void* c) {
  constexpr TileShape kTile = Tile::shape;
  launch_tiles<T>(gemm_kernel<T, Tile, Frag>, p, args, c, kTile.bm, kTile.bn, kTile.splits,
                  kTile.groups() * Frag::kLanes, kTile.shared_bytes());
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

// Hopper's warpgroup tiles for p where they are wanted and built (none unless the device is sm_90).
template <class T>
std::vector<Candidate> warpgroup_candidates(const GemmProblem& p, const KernelArgs& args, bool wanted) {
#if defined(HD_WITH_WGMMA)
  if (wanted) return wgmma_candidates<T>(p, args);
#else
  (void)p, (void)args, (void)wanted;
#endif
  return {};
}

// The candidates for a problem. Our tile shapes: larger tiles reuse more of each load, smaller ones fill
// the GPU when the problem is small; register-staged (every target) and, on NVIDIA, with 3-4 k-steps in
// flight through asynchronous copies; split-K for problems whose output has fewer tiles than the GPU
// has multiprocessors but a long k. The gather kernel serves only the few-channel first convolutions.
// With `warpgroup_tiles` (the tuned path on NVIDIA), Hopper's warpgroup tiles where the device has them.
// Then, with `libraries` (the tuned path, never a test's chosen layout), the vendor libraries the build
// has: on NVIDIA cuDNN for convolutions and cuBLASLt for dense products; on AMD MIOpen for convolutions
// and hipBLASLt for dense products, or rocBLAS where hipBLASLt has no kernel.
// The quick candidates (what a shape's first use times under the default policy): the libraries' own
// heuristic picks (cuDNN's legacy pick and its graph engines that need no compiling, cuBLASLt; MIOpen's
// first solution, hipBLASLt, rocBLAS) and our shape rule's tiles: the large square tile with the most reuse,
// a half-height one for outputs too small to fill the GPU with it, and split-K where even those leave it idle
// (on NVIDIA: the k-step-64 tiles that won most shapes on an H100, below).
template <class T, Fragments F>
std::vector<Candidate> candidates_of(const GemmProblem& p, const KernelArgs& args, bool vector,
                                     bool libraries, bool warpgroup_tiles) {
  using Frag = FragmentsOf<F>;
  const std::string suffix = suffix_of(F);
  std::vector<Candidate> list;
  // The NVIDIA tiles' largest need more shared memory than some devices give a block (an RTX 4090 99 KiB);
  // AMD's tiles take at most 40 KiB, under every AMD GPU's 64.
  const size_t shared_limit = F == Fragments::kNvidia ? max_block_shared_bytes(p.device.index) : SIZE_MAX;
  const auto add = [&]<class Tile>(Tile, bool quick) {  // a tile of gemm_tile_shape.h's table
    if (Tile::shape.shared_bytes() > shared_limit) return;
    list.push_back({tile_name(Tile::shape) + suffix,
                    [args](const GemmProblem& q, void* c) { launch_tile<T, Tile, Frag>(q, args, c); }, quick, false});
  };
  if (p.gate != GemmGate::kNone) {
    // GEGLU in the epilogue: the tiles that have it, where the projection is whole chunks of 16-byte
    // vectors (gemm.cu adds the unfused candidate, which takes any problem). Register-staged on every
    // layout (the 8-group 128x128 where WMMA's accumulators need it); on NVIDIA the k-step-64 tiles, the
    // plain projections' winners among them, and Hopper's warpgroup tiles; a register-staged one where
    // the device's shared memory takes no k-step-64 tile (an RTX 4090's 99 KiB).
    if (!vector || args.n % kGateChunk != 0) return list;
    if constexpr (F != Fragments::kNvidia) {
      if constexpr (Frag::kAccumulators == 8) {
        add(tiles::Gated<tiles::Mma128x128w8>{}, true);
      } else {
        add(tiles::Gated<tiles::Mma128x128>{}, true);
      }
      add(tiles::Gated<tiles::Mma64x128>{}, true);
    } else {
      std::vector<Candidate> warpgroup = warpgroup_candidates<T>(p, args, warpgroup_tiles);
      const bool fragment_quick = warpgroup.empty();
      const bool k64_fits = tiles::Async3_128x128w8k64::shape.shared_bytes() <= shared_limit;
      add(tiles::Gated<tiles::Mma128x128>{}, fragment_quick && !k64_fits);
      add(tiles::Gated<tiles::Async3_128x128w8k64>{}, fragment_quick);  // won SD1.5's 64x64 projection plain
      add(tiles::Gated<tiles::Async3_128x128w8k64Pipelined>{}, fragment_quick);
      add(tiles::Gated<tiles::Async3_256x128w8k64Pipelined>{}, fragment_quick);
      add(tiles::Gated<tiles::Async3_128x256w8k64Pipelined>{}, false);
      add(tiles::Gated<tiles::Async3_128x160w8k64Pipelined>{}, fragment_quick);
      for (Candidate& c : warpgroup) list.push_back(std::move(c));
    }
    return list;
  }
  if (!vector) {
    add(tiles::Gather64x64{}, true);
    return list;
  }
  const int64_t output_tiles = ((args.m + 63) / 64) * ((args.n + 63) / 64) * p.outer * p.inner;
  const bool small_output = output_tiles < multiprocessor_count(p.device.index) && args.k >= 16 * kDefaultStepK;
  constexpr bool kOwnRule = F != Fragments::kNvidia;  // on NVIDIA the asynchronous tiles below take the rule
  if constexpr (Frag::kAccumulators == 8) {
    // WMMA holds a 16x16 fragment's C in 8 registers per lane: 2x2 groups on 128x128 would keep 128
    // accumulators per lane, which with the operands spilled on gfx1100; 4x2 groups keep 64.
    add(tiles::Mma128x128w8{}, kOwnRule);
  } else {
    add(tiles::Mma128x128{}, kOwnRule);
  }
  add(tiles::Mma128x64{}, false);
  add(tiles::Mma64x128{}, kOwnRule);
  add(tiles::Mma64x64{}, false);
  // Pipelined fragments on the register-staged tiles: not quick until a run on an AMD GPU says where they
  // win (none has run here); the exhaustive policy times them on the user's GPU.
  // Only the 8-group 128x128 one: it was the fastest register-staged tile on the large shapes of an H100
  // (VAE convolutions 1.1x the best other), while 64x128 and 64x64 pipelined lost and 64x128 spilled
  // (2026-11-26; AMD unmeasured).
  add(tiles::Mma128x128w8Pipelined{}, false);
  if (small_output) {
    add(tiles::SplitK<tiles::Mma64x64, 4>{}, kOwnRule);
    add(tiles::SplitK<tiles::Mma64x64, 8>{}, false);
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
    // memory (256x128 with 3 stages: 162 KiB, within an A100's and an H100's limit, not an RTX 4090's;
    // `add` leaves out what the device's limit does not take). The quick tiles, from an H100's exhaustive
    // tuning of SD1.5 with our kernels only (2026-11-26, 84 shapes): with pipelined fragments 128x160
    // (won 13), 128x128 in 8 groups (13), 64x160 (7, and 9 split), 64x128 (7) and 256x128 (7); without,
    // 128x128 in 8 groups (4: its 127 registers let two blocks share a multiprocessor, which the short
    // products, k = 320, need) and 64x128 split in 2 or 4 (10) where its tiles leave multiprocessors
    // idle. Where the k-step-64 tiles do not fit, k-step-32 versions are quick instead.
    std::vector<Candidate> warpgroup = warpgroup_candidates<T>(p, args, warpgroup_tiles);
    // Where Hopper's warpgroup tiles run, they won every shape of SD1.5 and SDXL on an H100 but the
    // small split-K ones (2026-11-26), so the fragment-layer tiles are timed only by the exhaustive policy.
    const bool fragment_quick = warpgroup.empty();
    const bool large_k64 = tiles::Async3_256x128w8k64::shape.shared_bytes() <= shared_limit;
    const bool middle_k64 = tiles::Async4_64x128k64::shape.shared_bytes() <= shared_limit;
    add(tiles::Async3_128x128{}, fragment_quick && !large_k64);
    add(tiles::Async3_128x256w8{}, false);
    add(tiles::Async3_256x128w8{}, false);
    add(tiles::Async4_64x128{}, fragment_quick && !middle_k64);
    add(tiles::Async4_128x64{}, false);
    // 8 groups of 64x32 on 128x128: half the accumulators a warp, so that two blocks (16 warps) share a
    // multiprocessor where the 4-group tile's registers allow two blocks of 4 (the profile: 12.5%
    // occupancy and 8 cycles between a warp's instructions on the large tiles).
    add(tiles::Async3_128x128w8{}, fragment_quick && !middle_k64);
    add(tiles::Async3_128x128w8k64{}, fragment_quick);
    add(tiles::Async3_128x128k64{}, false);
    add(tiles::Async4_64x128k64{}, false);
    add(tiles::Async3_128x128w8k64Pipelined{}, fragment_quick);
    add(tiles::Async4_64x128k64Pipelined{}, fragment_quick);
    add(tiles::Async3_128x160w8k64Pipelined{}, fragment_quick);
    add(tiles::Async3_64x160k64Pipelined{}, fragment_quick);
    // Split k for outputs of fewer 64x128 tiles than twice the multiprocessors (SD's 16x16 and 8x8
    // levels) with a long k.
    const int64_t middle_tiles = ((args.m + 63) / 64) * ((args.n + 127) / 128) * p.outer * p.inner;
    if (middle_tiles < 2 * multiprocessor_count(p.device.index) && args.k >= 32 * kDefaultStepK) {
      add(tiles::SplitK<tiles::Async4_64x128k64, 2>{}, true);
      add(tiles::SplitK<tiles::Async4_64x128k64, 4>{}, true);
      add(tiles::SplitK<tiles::Async3_64x160k64Pipelined, 2>{}, fragment_quick);
      add(tiles::SplitK<tiles::Async3_64x160k64Pipelined, 4>{}, false);
    }
    add(tiles::Async3_128x256w8k64{}, false);
    add(tiles::Async3_256x128w8k64{}, false);
    add(tiles::Async3_128x256w8k64Pipelined{}, false);
    add(tiles::Async3_256x128w8k64Pipelined{}, fragment_quick);
    if (small_output) {
      add(tiles::SplitK<tiles::Async4_64x64, 4>{}, true);
      add(tiles::SplitK<tiles::Async4_64x64, 8>{}, false);
    }
    for (Candidate& c : warpgroup) list.push_back(std::move(c));
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
#define HD_GEMM_TILES_INSTANCES(prefix, F)                                                                   \
  prefix template std::vector<Candidate> candidates_of<__half, F>(const GemmProblem&, const KernelArgs&,     \
                                                                  bool, bool, bool);                         \
  prefix template std::vector<Candidate> candidates_of<Bf16, F>(const GemmProblem&, const KernelArgs&, bool, \
                                                                bool, bool);

#if defined(HD_GPU_HIP)
inline constexpr bool kAmdEmulated = false;  // AMD builds: each AMD layout's instruction
#else
inline constexpr bool kAmdEmulated = true;   // CUDA builds: the AMD layouts' emulations, for the tests
#endif
inline constexpr Fragments kMfmaHere = kAmdEmulated ? Fragments::kMfmaEmulated : Fragments::kMfma;
inline constexpr Fragments kWmma11Here = kAmdEmulated ? Fragments::kWmma11Emulated : Fragments::kWmma11;
inline constexpr Fragments kWmma12Here = kAmdEmulated ? Fragments::kWmma12Emulated : Fragments::kWmma12;

}  // namespace hd::gpu::gemm_tiles
