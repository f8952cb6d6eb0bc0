#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <span>
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
  size_t limit = 0;                      // set_memory_limit's cap on in_use, or 0
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

// Blocks going back to the vendor: the vendor's free waits for the device while it holds the driver's
// lock on the process's address space. With a GPU per thread (a group's ranks), the device's collectives
// may wait for another GPU whose thread needs that lock (a cudaMalloc) or the pools' to queue its side:
// the known NCCL hang. So they are freed after the pools' lock is let go, on a device that was waited for
// first, without either lock (its thread queues nothing meanwhile). Not while the device captures a
// graph: a wait for the device would break the capture.
std::vector<void*> take_free_locked(DevicePool& pool) {
  std::vector<void*> out;
  for (const auto& [size, block] : pool.free_blocks) {
    out.push_back(block);
    pool.stats.cached -= size;
  }
  pool.free_blocks.clear();
  return out;
}

void free_all(const Device& device, std::span<void* const> blocks, bool capturing) noexcept {
  if (blocks.empty()) return;
  if (!capturing) device_wait_idle(device);
  for (void* block : blocks) device_free(device, block);
}

void* allocate(Device device, size_t bytes) {
  const size_t size = rounded(bytes);
  Pools& p = pools();
  std::unique_lock lock(p.mutex);
  DevicePool& pool = pool_of(p, device);
  if (pool.limit != 0 && pool.stats.in_use + size > pool.limit) {
    throw Error(ErrorKind::kOutOfMemory,
                str_cat("out of memory on ", device.to_string(), " allocating ", format_bytes(bytes), ": ",
                        format_bytes(pool.stats.in_use), " in use by hipDiffusion, and its limit is ",
                        format_bytes(pool.limit), "; try a smaller image or batch, or a higher limit"));
  }
  FreeBlocks& source = pool.capturing == 0 ? pool.free_blocks : pool.private_free[pool.capturing];
  void* block = nullptr;
  if (const auto it = source.find(size); it != source.end()) {
    block = it->second;
    source.erase(it);
    pool.stats.cached -= size;
  } else {
    block = device_malloc(device, size);
    if (block == nullptr) {  // give back what the cache holds, then try once more
      const std::vector<void*> cached = take_free_locked(pool);
      const bool capturing = pool.capturing != 0;
      lock.unlock();
      free_all(device, cached, capturing);
      lock.lock();
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
  std::unique_lock lock(p.mutex);
  DevicePool& pool = p.device[device.index];
  const auto it = pool.blocks.find(block);
  if (it == pool.blocks.end()) return;  // not ours: nothing sensible to do in a destructor
  const Block b = it->second;
  pool.blocks.erase(it);
  pool.stats.in_use -= b.size;
  if (b.pool != 0 && pool.released.count(b.pool)) {  // its graph is gone: back to the vendor
    const bool capturing = pool.capturing != 0;
    lock.unlock();
    free_all(device, std::span<void* const>(&block, 1), capturing);
    return;
  }
  pool.stats.cached += b.size;
  (b.pool == 0 ? pool.free_blocks : pool.private_free[b.pool]).emplace(b.size, block);
}

// Pinned host memory: few, large blocks (a tiled decode's tile state), kept when freed. A request takes
// the smallest free block that holds it; when none does, the free blocks (all too small) go back first,
// so that what the process keeps locked stays near its largest request rather than the sum of them.
struct PinnedHost {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;
  std::map<void*, size_t> sizes;  // every block, handed out or free
};

PinnedHost& pinned_host() {
  static PinnedHost* p = new PinnedHost;  // never destroyed, as pools()
  return *p;
}

void* allocate_pinned_host(Device device, size_t bytes) {
  const size_t size = rounded(bytes);
  PinnedHost& p = pinned_host();
  const std::lock_guard lock(p.mutex);
  if (const auto it = p.free_blocks.lower_bound(size); it != p.free_blocks.end()) {
    void* block = it->second;
    p.free_blocks.erase(it);
    return block;
  }
  for (const auto& [block_size, block] : p.free_blocks) {
    p.sizes.erase(block);
    pinned_host_free(block);
  }
  p.free_blocks.clear();
  void* block = pinned_host_malloc(size);
  HD_CHECK_KIND(block != nullptr, ErrorKind::kOutOfMemory, "cannot lock ", format_bytes(bytes),
                " of host memory for copies with ", device.to_string());
  p.sizes[block] = size;
  return block;
}

void release_pinned_host(Device, void* block) noexcept {
  PinnedHost& p = pinned_host();
  const std::lock_guard lock(p.mutex);
  if (const auto it = p.sizes.find(block); it != p.sizes.end()) p.free_blocks.emplace(it->second, block);
}

constexpr DeviceAllocator kCachingAllocator{allocate, release, allocate_pinned_host, release_pinned_host};

}  // namespace

const DeviceAllocator* caching_allocator() { return &kCachingAllocator; }

MemoryStats memory_stats(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  MemoryStats stats = pool_of(p, device).stats;
  stats.limit = pool_of(p, device).limit;
  return stats;
}

void mark_peak(const Device& device) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  DevicePool& pool = pool_of(p, device);
  pool.stats.peak_since_mark = pool.stats.in_use;
}

void set_memory_limit(const Device& device, size_t bytes) {
  Pools& p = pools();
  const std::lock_guard lock(p.mutex);
  pool_of(p, device).limit = bytes;
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
  std::vector<void*> blocks;
  bool capturing = false;
  {
    const std::lock_guard lock(p.mutex);
    DevicePool& pool = pool_of(p, device);
    capturing = pool.capturing != 0;
    if (const auto it = pool.private_free.find(id); it != pool.private_free.end()) {
      for (const auto& [size, block] : it->second) {
        blocks.push_back(block);
        pool.stats.cached -= size;
      }
      pool.private_free.erase(it);
    }
    pool.released.insert(id);
  }
  free_all(device, blocks, capturing);
}

}  // namespace hd::gpu
