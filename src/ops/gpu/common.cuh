// The one header every GPU source includes. It picks the vendor mapping, defines the warp width as a
// compile-time constant and the checked-call macro. No kernel includes a vendor header directly.
#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include "ops/gpu/vendor/hip.h"
#else
#include "ops/gpu/vendor/cuda.h"
#endif

#include <algorithm>
#include <cstdint>

#include "core/device.h"
#include "core/error.h"

namespace hd::gpu {

// Threads that execute in lockstep: 64 on AMD CDNA (gfx90a), 32 on RDNA (gfx1030) and on NVIDIA.
// Reductions and lane masks derive from this; the literal 32 never appears in a kernel.
// Device code only: HIP compiles host code once for all targets, where no single width is right, so
// host code that sizes a launch by the warp asks the device (cudaDeviceProp::warpSize).
#if defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#else
inline constexpr int kWarpSize = 32;
#endif
// Checked at compile time for every target CI builds, so a wrong width cannot pass unnoticed.
#if defined(__gfx90a__)
static_assert(kWarpSize == 64, "gfx90a (CDNA2) runs 64-wide wavefronts");
#elif defined(__gfx1030__)
static_assert(kWarpSize == 32, "gfx1030 (RDNA2) runs 32-wide wavefronts by default");
#endif

// The stream of the current device, on which every kernel is launched (gpu_runtime.cu).
cudaStream_t current_stream();

// Blocks of `threads` for a grid-stride loop over `items`: enough to give every item a thread, at
// least one, and at most 65535 (every vendor's limit for a grid's y and z; plenty to fill any GPU).
inline unsigned grid_stride_blocks(int64_t items, int threads) {
  return unsigned(std::clamp<int64_t>((items + threads - 1) / threads, 1, 65535));
}

// Lets `kernel` use `bytes` of dynamic shared memory on `device` (past the default 48 KB). Set once per
// (kernel, device): the attribute outlives the call, and setting it costs a driver call.
void allow_dynamic_shared_memory(const void* kernel, size_t bytes, int device);
template <class Kernel>
void allow_dynamic_shared_memory(Kernel* kernel, size_t bytes, int device) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), bytes, device);
}

// Throws hd::Error naming the statement, file:line and the vendor's message.
[[noreturn]] void throw_gpu_error(cudaError_t status, const char* statement, const char* file, int line);

}  // namespace hd::gpu

#define HD_GPU_CHECK(statement)                                                         \
  do {                                                                                  \
    const cudaError_t hd_status_ = (statement);                                         \
    if (hd_status_ != cudaSuccess) ::hd::gpu::throw_gpu_error(hd_status_, #statement, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: reports a bad launch configuration at its call site.
#define HD_GPU_CHECK_LAUNCH() HD_GPU_CHECK(cudaGetLastError())
