// GPU memory below the caching allocator: the vendor's allocation calls (gpu_runtime.cu) and the cache
// in front of them (caching_allocator.cpp). Plain C++, no vendor headers.
#pragma once

#include <cstddef>

#include "core/buffer.h"

namespace hd::gpu {

// The vendor's allocation on `device`: nullptr when the device is out of memory (the error is cleared).
void* device_malloc(const Device& device, size_t bytes);
void device_free(const Device& device, void* ptr) noexcept;
// Waits until `device` has finished everything queued on it (errors are left to the next checked call).
void device_wait_idle(const Device& device) noexcept;
void device_memory_info(const Device& device, size_t* free_bytes, size_t* total_bytes);
// The vendor's page-locked host memory, usable with every device: nullptr when the host cannot lock that
// much (the error is cleared).
void* pinned_host_malloc(size_t bytes);
void pinned_host_free(void* ptr) noexcept;

// The allocator that core's Buffer uses for this vendor: freed blocks are kept and handed out again for
// requests of the same rounded size, so that the steady state of a denoising loop calls the vendor's
// allocator (which synchronises the device on free) not at all. Reuse is safe without events because
// every op runs in order on one stream. Pinned host memory is cached too (locking it costs 0.3 s per
// 512 MiB on the H100 machine): a freed block serves any later request it is large enough for.
const DeviceAllocator* caching_allocator();

struct MemoryStats {
  size_t in_use = 0, peak_in_use = 0, cached = 0;  // bytes handed out, their maximum, bytes held free
  size_t peak_since_mark = 0;                      // the maximum of in_use since mark_peak
  size_t limit = 0;                                // set_memory_limit's cap, or 0
};
MemoryStats memory_stats(const Device& device);
// Starts a new peak_since_mark window (at what is in use now).
void mark_peak(const Device& device);
// Allocations that would take in_use past `bytes` fail with kOutOfMemory (0: no limit).
void set_memory_limit(const Device& device, size_t bytes);

// Private pools, for graph capture: between begin_private_pool and end_private_pool, allocations on
// `device` come from a new pool of their own, and blocks of that pool return to it when freed (even
// after the capture ends). release_private_pool gives the pool's free blocks back to the vendor and frees
// its remaining blocks as they are released.
int begin_private_pool(const Device& device);
void end_private_pool(const Device& device);
void release_private_pool(const Device& device, int pool);

}  // namespace hd::gpu
