#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "ops/gpu/device_memory.h"

namespace hd::gpu {

namespace {

constexpr int kMaxDevices = 64;

// Small blocks round to 512 bytes, large ones to 2 MiB: a repeated shape finds its block again, and the
// rounding wastes at most a few percent of a large activation.
size_t rounded(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20;
  if (bytes < kLarge) return (std::max<size_t>(bytes, 1) + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

struct DevicePool {
  std::multimap<size_t, void*> free_blocks;  // rounded size -> block
  std::map<void*, size_t> sizes;             // every block handed out -> its rounded size
  MemoryStats stats;
};

struct Pools {
  std::mutex mutex;
  DevicePool device[kMaxDevices];
};

// Never destroyed: tensors held in other statics (the scratch buffers) are freed at exit, possibly after
// a function-local static pool would already be gone.
Pools& pools() {
  static Pools* p = new Pools;
  return *p;
}

DevicePool& pool_of(Pools& p, const Device& device) {
  HD_CHECK(device.index >= 0 && device.index < kMaxDevices, "device index ", device.index, " out of range");
  return p.device[device.index];
}

void release_free_locked(DevicePool& pool, const Device& device) {
  for (const auto& [size, block] : pool.free_blocks) {
    device_free(device, block);
    pool.stats.cached -= size;
  }
  pool.free_blocks.clear();
}

void* allocate(Device device, size_t bytes) {
  const size_t size = rounded(bytes);
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = pool_of(p, device);
  void* block = nullptr;
  if (const auto it = pool.free_blocks.find(size); it != pool.free_blocks.end()) {
    block = it->second;
    pool.free_blocks.erase(it);
    pool.stats.cached -= size;
  } else {
    block = device_malloc(device, size);
    if (block == nullptr) {  // give back what the cache holds, then try once more
      release_free_locked(pool, device);
      block = device_malloc(device, size);
    }
    if (block == nullptr) {
      size_t free = 0, total = 0;
      device_memory_info(device, &free, &total);
      throw Error(ErrorKind::kOutOfMemory,
                  str_cat("out of memory on ", device.to_string(), " allocating ", format_bytes(bytes), " (",
                          format_bytes(pool.stats.in_use), " in use by hipDiffusion, ", format_bytes(free), " free of ",
                          format_bytes(total), "); try a smaller image or batch"));
    }
  }
  pool.sizes[block] = size;
  pool.stats.in_use += size;
  pool.stats.peak_in_use = std::max(pool.stats.peak_in_use, pool.stats.in_use);
  return block;
}

void release(Device device, void* block) noexcept {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = p.device[device.index];
  const auto it = pool.sizes.find(block);
  if (it == pool.sizes.end()) return;  // not ours: nothing sensible to do in a destructor
  pool.stats.in_use -= it->second;
  pool.stats.cached += it->second;
  pool.free_blocks.emplace(it->second, block);
  pool.sizes.erase(it);
}

constexpr DeviceAllocator kCachingAllocator{allocate, release};

}  // namespace

const DeviceAllocator* caching_allocator() { return &kCachingAllocator; }

MemoryStats memory_stats(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  return pool_of(p, device).stats;
}

void reset_peak_memory(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = pool_of(p, device);
  pool.stats.peak_in_use = pool.stats.in_use;
}

void release_cached_memory(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  release_free_locked(pool_of(p, device), device);
}

}  // namespace hd::gpu
