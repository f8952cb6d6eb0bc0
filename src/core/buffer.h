// Buffer: one owning allocation on a device. Host memory is 256-byte aligned, like cudaMalloc's, so
// that arena offsets aligned to 256 are aligned addresses on every device. GPU memory comes from the allocator that the GPU runtime
// registers for its vendor; core itself links no GPU library, so a CPU-only build that asks for a
// GPU gets a clear error rather than a link failure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace hd {

// Whether `p` lies on a `bytes` boundary (16 for vector loads and the vendor libraries' kernels).
inline bool is_aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Implemented by a GPU runtime (src/ops/gpu/) and registered once per vendor.
struct DeviceAllocator {
  void* (*allocate)(Device device, size_t bytes);  // throws Error (kOutOfMemory) on failure
  void (*release)(Device device, void* ptr) noexcept;
  // Page-locked host memory, which the vendor's copies to and from `device` move at full link speed
  // (55 GB/s on the H100 machine, against 7-12 GB/s from ordinary memory); throws like allocate.
  void* (*allocate_pinned_host)(Device device, size_t bytes);
  void (*release_pinned_host)(Device device, void* ptr) noexcept;
};

void register_device_allocator(DeviceType type, const DeviceAllocator* allocator);
// The allocator for `type`; throws kUnsupported naming the build preset to use when there is none.
const DeviceAllocator& device_allocator(DeviceType type);

class Buffer {
 public:
  Buffer() = default;
  Buffer(Device device, size_t bytes);  // throws Error (kOutOfMemory) naming the size
  // Host memory that copies to and from `gpu` move fastest (page-locked by gpu's vendor); ordinary host
  // memory when `gpu` is the CPU. Either way the buffer's device is the CPU.
  static Buffer pinned_host(const Device& gpu, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const Device& device() const { return device_; }

 private:
  void reset() noexcept;

  Device device_;
  Device pinned_for_;  // the GPU whose vendor page-locked this host memory; the CPU when none did
  void* data_ = nullptr;
  size_t size_ = 0;
};

// "1.50 GiB", "12.0 MiB", "512 B": sizes in messages.
std::string format_bytes(size_t bytes);

}  // namespace hd
