// GPU work recorded once and replayed as one launch (a CUDA / HIP graph), for code above the ops layer
// that names no vendor. The work's allocations come from a memory pool of the capture's own, so tensors
// it allocated and the caller keeps (its outputs) stay valid and are rewritten by every replay, and no
// memory it uses is handed to other work in between. The work must not wait for the device (no copies to
// the host) and must have run once uncaptured, so that every kernel choice was already tuned.
#pragma once

#include <functional>
#include <memory>

#include "core/device.h"

namespace hd::ops {

class CapturedWork {
 public:
  // Throws (kUnsupported) for the CPU and in builds without GPU kernels.
  static CapturedWork capture(const Device& device, const std::function<void()>& work);
  void replay() const;

 private:
  std::shared_ptr<void> graph_;
};

}  // namespace hd::ops
