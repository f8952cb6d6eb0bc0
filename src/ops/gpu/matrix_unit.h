// The families of matrix units the kernels' fragment layer (mma.cuh) drives, named once for the host
// (which unit a device has: gpu_runtime.h) and for the layouts (which unit each layout is written for).
#pragma once

namespace hd::gpu {

// NVIDIA's tensor cores (sm_80+, mma.sync), AMD CDNA's MFMA (gfx90a, gfx942, gfx950), RDNA3's WMMA (gfx11),
// RDNA4's WMMA (gfx12), or none (the portable path: gfx10 and older NVIDIA GPUs).
enum class MatrixUnit { kNone, kNvidiaMma, kAmdMfma, kAmdWmma11, kAmdWmma12 };

// Which kernels an op runs. kTuned: the device's fastest: its own matrix unit, Hopper's warpgroup kernels
// where the device has them and, for products, the vendor libraries, chosen by the autotuner. For tests:
// kFragments, the device's own matrix unit through the fragment layer only (what NVIDIA GPUs before
// Hopper run); or one fragment layout forced: kPortable, the portable path (what AMD GPUs without matrix
// cores run); kMfmaLayout, kWmma11Layout, kWmma12Layout, the layout of CDNA's MFMA, RDNA3's or RDNA4's
// WMMA: the instruction on the AMD GPU that has it, emulated anywhere else, so that NVIDIA runs the AMD
// kernels' own indexing.
enum class KernelPath { kTuned, kFragments, kPortable, kMfmaLayout, kWmma11Layout, kWmma12Layout };

// The AMD unit whose layout a forced path names; kNone for kTuned, kFragments and kPortable.
constexpr MatrixUnit amd_layout_of(KernelPath path) {
  switch (path) {
    case KernelPath::kMfmaLayout: return MatrixUnit::kAmdMfma;
    case KernelPath::kWmma11Layout: return MatrixUnit::kAmdWmma11;
    case KernelPath::kWmma12Layout: return MatrixUnit::kAmdWmma12;
    case KernelPath::kTuned:
    case KernelPath::kFragments:
    case KernelPath::kPortable: break;
  }
  return MatrixUnit::kNone;
}

}  // namespace hd::gpu
