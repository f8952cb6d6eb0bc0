// Memory for an op's temporaries (GroupNorm's partial sums on the GPU): one growing buffer per device,
// valid until the next call for that device. Ops on one device run in order (one stream), so a later op
// may reuse what an earlier one left. The arena takes this over once the GPU pipeline plans its memory.
// (Host code only: it lives in core so that no GPU compiler sees the standard containers behind it.)
#pragma once

#include <cstddef>

#include "core/device.h"

namespace hd {

// Which of a device's scratch buffers: an op's own temporaries, or those of the GEMM candidate that
// computes a product (split-K's partial sums, a library's workspace), which an op may run while it holds
// its own (matmul.cpp's operand copies); and the projection of a GEGLU product computed in two passes
// (gemm.cu's unfused candidate), which holds it while the product's own candidate uses kGemm. Lasting
// buffers rather than one per call, so that a pass's peak memory does not depend on which candidate the
// autotuner chose for each shape.
enum class ScratchSlot { kOp, kGemm, kProjection };

void* scratch(const Device& device, size_t bytes, ScratchSlot slot = ScratchSlot::kOp);

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
