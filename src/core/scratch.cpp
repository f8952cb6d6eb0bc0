#include "core/scratch.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "core/buffer.h"

namespace hd {

void* scratch(const Device& device, size_t bytes) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, Buffer> buffers;  // (device type, index) -> buffer
  const std::lock_guard lock(mutex);
  Buffer& b = buffers[{int(device.type), device.index}];
  if (b.size() < bytes) {
    b = Buffer();  // free first: the old and the new need not fit together
    b = Buffer(device, std::max(bytes, size_t(1) << 20));
  }
  return b.data();
}

}  // namespace hd
