#include <algorithm>
#include <map>
#include <mutex>
#include <set>
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

using FreeBlocks = std::multimap<size_t, void*>;  // rounded size -> block

struct Block {
  size_t size;  // rounded
  int pool;     // 0: the shared pool; else a private pool (graph capture)
};

struct DevicePool {
  FreeBlocks free_blocks;                // the shared pool's
  std::map<int, FreeBlocks> private_free;  // each private pool's
  std::set<int> released;                // private pools whose graph is gone
  std::map<void*, Block> blocks;         // every block handed out
  int capturing = 0;                     // the private pool new allocations come from, or 0
  MemoryStats stats;
};

int next_private_pool = 1;  // guarded by Pools::mutex

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
  FreeBlocks& source = pool.capturing == 0 ? pool.free_blocks : pool.private_free[pool.capturing];
  void* block = nullptr;
  if (const auto it = source.find(size); it != source.end()) {
    block = it->second;
    source.erase(it);
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
  pool.blocks[block] = Block{size, pool.capturing};
  pool.stats.in_use += size;
  pool.stats.peak_in_use = std::max(pool.stats.peak_in_use, pool.stats.in_use);
  pool.stats.peak_since_mark = std::max(pool.stats.peak_since_mark, pool.stats.in_use);
  return block;
}

void release(Device device, void* block) noexcept {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = p.device[device.index];
  const auto it = pool.blocks.find(block);
  if (it == pool.blocks.end()) return;  // not ours: nothing sensible to do in a destructor
  const Block b = it->second;
  pool.blocks.erase(it);
  pool.stats.in_use -= b.size;
  if (b.pool != 0 && pool.released.count(b.pool)) {  // its graph is gone: back to the vendor
    device_free(device, block);
    return;
  }
  pool.stats.cached += b.size;
  (b.pool == 0 ? pool.free_blocks : pool.private_free[b.pool]).emplace(b.size, block);
}

constexpr DeviceAllocator kCachingAllocator{allocate, release};

}  // namespace

const DeviceAllocator* caching_allocator() { return &kCachingAllocator; }

MemoryStats memory_stats(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  return pool_of(p, device).stats;
}

void mark_peak(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = pool_of(p, device);
  pool.stats.peak_since_mark = pool.stats.in_use;
}

int begin_private_pool(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = pool_of(p, device);
  HD_CHECK(pool.capturing == 0, "a graph is already being captured on ", device.to_string());
  pool.capturing = next_private_pool++;
  return pool.capturing;
}

void end_private_pool(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  pool_of(p, device).capturing = 0;
}

void release_private_pool(const Device& device, int id) {
  if (id == 0) return;
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = pool_of(p, device);
  if (const auto it = pool.private_free.find(id); it != pool.private_free.end()) {
    for (const auto& [size, block] : it->second) {
      device_free(device, block);
      pool.stats.cached -= size;
    }
    pool.private_free.erase(it);
  }
  pool.released.insert(id);
}

}  // namespace hd::gpu
