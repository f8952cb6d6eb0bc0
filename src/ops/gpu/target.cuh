// What the target being compiled offers, named once: the wave width and the matrix-instruction family.
// Every other GPU file asks these macros and constants instead of spelling architecture tests itself.
//
// In device code, exactly one of the family macros below is defined (or none: the portable path):
//   HD_NVIDIA_MMA      NVIDIA sm_80 and newer: mma.sync, ldmatrix, cp.async
//                      (and HD_NVIDIA_WGMMA beside it for sm_90a: Hopper's warpgroup instructions;
//                      HD_NVIDIA_VECTOR_ATOMICS for sm_90+: float4 atomic adds)
//   HD_AMD_MFMA        AMD CDNA2/CDNA3 (gfx90a, gfx942): v_mfma_* on 64-lane wavefronts
//   HD_AMD_WMMA_GFX11  AMD RDNA3 (gfx1100/1101/1102): v_wmma_* on wave32, operands duplicated per half-wave
//   HD_AMD_WMMA_GFX12  AMD RDNA4 (gfx1200/1201): v_wmma_*_gfx12 on wave32, its own register map
// Host code is compiled once for all targets, so these are never defined there: host code asks the
// device at run time (gpu_runtime.h, device_matrix_unit).
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIP_PLATFORM_AMD__)
#define HD_NVIDIA_MMA 1
#endif
// NVIDIA sm_90 and newer: atomicAdd of a float2 or float4 in global memory is one instruction.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIP_PLATFORM_AMD__)
#define HD_NVIDIA_VECTOR_ATOMICS 1
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HD_NVIDIA_WGMMA 1
#endif
#if defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__)
#define HD_AMD_MFMA 1
#endif
#if defined(__GFX11__)
#define HD_AMD_WMMA_GFX11 1
#endif
#if defined(__GFX12__)
#define HD_AMD_WMMA_GFX12 1
#endif

// On a device lambda (`[&](int i) HD_INLINE { ... }`): always inlined. A kernel's small arrays (the
// staged tile vectors, the accumulators) can stay in registers only while no call stands between them
// and the code that indexes them: behind a call they must live in memory, which on AMD is scratch.
#if defined(__clang__)
#define HD_INLINE __attribute__((always_inline))
#else
#define HD_INLINE
#endif

// Stops the kernel: the body of instances a target does not offer (never launched there).
#if defined(__HIP_PLATFORM_AMD__)
#define HD_TRAP() __builtin_trap()
#else
#define HD_TRAP() __trap()
#endif

namespace hd::gpu {

// Threads that execute in lockstep: 64 on AMD's GCN/CDNA (gfx9: gfx90a, gfx942), 32 on RDNA (gfx10,
// gfx11, gfx12, which run wave32 unless asked for wave64, and this build never asks) and on NVIDIA.
// Reductions and lane masks derive from this; the literal 32 never appears in a kernel. Our own
// constant because clang 22 (ROCm 7) no longer defines __AMDGCN_WAVEFRONT_SIZE and warpSize is no
// longer a compile-time constant. Device code only: host code that sizes a launch by the wave asks the
// device (cudaDeviceProp::warpSize).
#if defined(__GFX9__)
inline constexpr int kWarpSize = 64;
#else
inline constexpr int kWarpSize = 32;
#endif

// Checked at compile time for every target CI builds, so a wrong width cannot pass unnoticed.
#if defined(__gfx90a__) || defined(__gfx942__)
static_assert(kWarpSize == 64, "CDNA (gfx90a, gfx942) runs 64-wide wavefronts");
#elif defined(__gfx1030__) || defined(__GFX11__) || defined(__GFX12__)
static_assert(kWarpSize == 32, "RDNA (gfx10/11/12) runs 32-wide wavefronts in this build");
#endif
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE)
static_assert(kWarpSize == __AMDGCN_WAVEFRONT_SIZE, "the compiler's wave size disagrees with ours");
#endif

}  // namespace hd::gpu
