#include "core/scratch.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "core/buffer.h"

namespace hd {

namespace {
thread_local ScratchProvider* provider = nullptr;  // this thread's innermost ScratchProvider
}

ScratchProvider::ScratchProvider() : previous_(provider) { provider = this; }
ScratchProvider::~ScratchProvider() { provider = previous_; }

void* scratch(const Device& device, size_t bytes, ScratchSlot slot) {
  if (provider != nullptr) return provider->allocate(device, bytes);
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int>, Buffer> buffers;  // (device type, index, slot) -> buffer
  const std::lock_guard lock(mutex);
  Buffer& b = buffers[{int(device.type), device.index, int(slot)}];
  if (b.size() < bytes) {
    // The old buffer is kept, not freed: a captured GPU graph may hold its address and replay it later.
    // Growth at least doubles, so what is kept stays below the size of the current buffer.
    static std::vector<Buffer> outgrown;
    outgrown.push_back(std::move(b));
    b = Buffer(device, std::max({bytes, 2 * outgrown.back().size(), size_t(1) << 20}));
  }
  return b.data();
}

}  // namespace hd
