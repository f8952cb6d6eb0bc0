#include "core/buffer.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>

#include "core/error.h"

namespace hd {

namespace {
// 256, not just a cache line: the arena hands out 256-aligned offsets from one Buffer.
constexpr size_t kHostAlignment = 256;
// Large host buffers (weights, activations of the CPU path) start on a huge-page boundary and ask the
// kernel for transparent huge pages: a 2 MiB page faults in once instead of 512 times, and the process
// frees it as fast at exit (SD1.5's 4.3 GB of f32 weights: about a million 4 KiB pages otherwise).
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeFrom = size_t(8) << 20;

void* host_allocate(size_t bytes) {
  const size_t alignment = bytes >= kHugeFrom ? kHugePage : kHostAlignment;
  // The size is not rounded up to whole huge pages: a buffer's last partial one would be resident in
  // full (0.4 GB more at SD1.5's peak on the CPU).
  void* p = nullptr;
  if (posix_memalign(&p, alignment, bytes) != 0) return nullptr;
#if defined(MADV_HUGEPAGE)
  // Advice only: where the system has no huge pages (or refuses), the buffer is ordinary memory.
  if (alignment == kHugePage) (void)madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return p;
}
const DeviceAllocator* g_allocators[3] = {};
}  // namespace

void register_device_allocator(DeviceType type, const DeviceAllocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

const DeviceAllocator& device_allocator(DeviceType type) {
  const DeviceAllocator* a = g_allocators[static_cast<int>(type)];
  if (a == nullptr) {
    const char* preset = type == DeviceType::kCuda ? "cuda" : "hip";
    throw Error(ErrorKind::kUnsupported,
                str_cat("this build of hipDiffusion has no ", preset,
                        " support; configure with `cmake --preset ", preset, "`"));
  }
  return *a;
}

std::string format_bytes(size_t bytes) {
  char text[32];
  if (bytes >= (size_t(1) << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  } else if (bytes >= (size_t(1) << 20)) {
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(size_t(1) << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof text, "%.1f KiB", double(bytes) / 1024.0);
  } else {
    std::snprintf(text, sizeof text, "%zu B", bytes);
  }
  return text;
}

Buffer::Buffer(Device device, size_t bytes) : device_(device), size_(bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    data_ = host_allocate(bytes);
    HD_CHECK_KIND(data_ != nullptr, ErrorKind::kOutOfMemory, "out of host memory allocating ",
                  format_bytes(bytes));
  } else {
    data_ = device_allocator(device.type).allocate(device, bytes);
  }
}

Buffer Buffer::pinned_host(const Device& gpu, size_t bytes) {
  if (gpu.is_cpu() || bytes == 0) return Buffer(Device::cpu(), bytes);
  Buffer b;
  b.data_ = device_allocator(gpu.type).allocate_pinned_host(gpu, bytes);
  b.size_ = bytes;
  b.pinned_for_ = gpu;
  return b;
}

Buffer::~Buffer() { reset(); }

Buffer::Buffer(Buffer&& other) noexcept
    : device_(other.device_),
      pinned_for_(other.pinned_for_),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    pinned_for_ = other.pinned_for_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void Buffer::reset() noexcept {
  if (data_ == nullptr) return;
  if (pinned_for_.is_gpu()) {
    g_allocators[static_cast<int>(pinned_for_.type)]->release_pinned_host(pinned_for_, data_);
  } else if (device_.is_cpu()) {
    std::free(data_);
  } else {
    g_allocators[static_cast<int>(device_.type)]->release(device_, data_);
  }
  data_ = nullptr;
  size_ = 0;
  pinned_for_ = Device::cpu();
}

}  // namespace hd
