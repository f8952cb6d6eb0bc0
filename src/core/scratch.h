// Memory for an op's temporaries (GroupNorm's partial sums on the GPU): one growing buffer per device,
// valid until the next call for that device. Ops on one device run in order (one stream), so a later op
// may reuse what an earlier one left. The arena takes this over once the GPU pipeline plans its memory.
// (Host code only: it lives in core so that no GPU compiler sees the standard containers behind it.)
#pragma once

#include <cstddef>

#include "core/device.h"

namespace hd {

void* scratch(const Device& device, size_t bytes);

// A caller's allocator for scratch memory (PyTorch's caching allocator, from the extension): while one
// lives, scratch() on this thread asks it instead of the shared buffer. What it hands out must stay valid
// for the ops queued in its lifetime (PyTorch's allocator keeps memory freed on a stream for that stream's
// later work, which is how the extension uses it). Scopes nest.
class ScratchProvider {
 public:
  ScratchProvider();
  virtual ~ScratchProvider();
  ScratchProvider(const ScratchProvider&) = delete;
  ScratchProvider& operator=(const ScratchProvider&) = delete;
  virtual void* allocate(const Device& device, size_t bytes) = 0;

 private:
  ScratchProvider* previous_;
};

}  // namespace hd
