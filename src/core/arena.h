// Activation arena: one block allocated up front, handed out by a bump pointer.
//
// Why: the GPU runtime captures a whole UNet forward into a CUDA/HIP graph once and replays it every
// step. A graph stores raw addresses, so every call with the same shapes must see the same addresses.
// A bump allocator that is reset before each forward gives exactly that, with no allocator calls (and
// no synchronisation) inside the forward. Scratch that is only needed for part of a forward is
// returned with mark()/release(), stack-wise.
#pragma once

#include <string_view>
#include <utility>

#include "core/buffer.h"
#include "core/tensor.h"

namespace hd {

class Arena {
 public:
  static constexpr size_t kAlignment = 256;  // GPU vector loads and cache lines both want this

  Arena(Device device, size_t capacity_bytes);
  // An arena over a block allocated elsewhere (pinned host memory: Buffer::pinned_host).
  explicit Arena(Buffer block) : block_(std::move(block)) {}

  // A dense tensor from the arena. `what` names it in the error when the arena is exhausted.
  Tensor allocate(Shape shape, DType dtype, std::string_view what);

  size_t mark() const { return offset_; }
  void release(size_t mark);  // frees everything allocated after `mark`
  void reset() { offset_ = 0; }

  size_t used() const { return offset_; }
  size_t peak() const { return peak_; }
  size_t capacity() const { return block_.size(); }
  const Device& device() const { return block_.device(); }

 private:
  Buffer block_;
  size_t offset_ = 0;
  size_t peak_ = 0;
};

}  // namespace hd
