// The one header every GPU source includes. It picks the vendor mapping, names the target (target.cuh:
// wave width, matrix-instruction family) and defines the checked-call macro. No kernel includes a vendor
// header directly.
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
#include "ops/gpu/target.cuh"

namespace hd::gpu {

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

// The blocks of `kernel` (`threads` each, `shared_bytes` of dynamic shared memory) that `device` (the
// current one) holds at once: its occupancy per multiprocessor times their count. Asked of the driver
// once per (kernel, device): launches that size their grid by it ask on every call.
int resident_blocks(const void* kernel, int threads, size_t shared_bytes, int device);
template <class Kernel>
int resident_blocks(Kernel* kernel, int threads, size_t shared_bytes, int device) {
  return resident_blocks(reinterpret_cast<const void*>(kernel), threads, shared_bytes, device);
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
