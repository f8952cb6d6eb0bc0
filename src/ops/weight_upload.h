// Weights on their way to a GPU. The host writes each tensor, converted and re-laid-out, into page-locked
// staging memory and the copy to the device is queued at once, so that the link moves one tensor while
// the host prepares the next; copies from page-locked memory also run at the link's full speed (55 GB/s
// on the H100 machine, against 7-12 GB/s from ordinary memory). Where the system will not lock more
// memory, ordinary host memory and waited-for copies take over (slower, never an error).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"

namespace hd::ops {

class WeightUploader {
 public:
  explicit WeightUploader(const Device& gpu);
  ~WeightUploader();  // waits for the copies in flight (the staging memory goes back only then)
  WeightUploader(const WeightUploader&) = delete;
  WeightUploader& operator=(const WeightUploader&) = delete;

  // A `shape` tensor of `dtype` on the GPU whose bytes `fill(host)` writes (dense, row-major); returns
  // once the copy is queued, in order with every later op on the GPU's stream.
  OwnedTensor upload(const Shape& shape, DType dtype, const std::function<void(void* host)>& fill);
  // Returns when every queued copy has landed and releases the staging memory of tensors too large
  // for a slot.
  void finish();

 private:
  void* staging_for(size_t bytes);

  Device gpu_;
  bool pinned_ = true;  // false once the system refused to lock more memory
  Buffer slots_[2];
  bool in_flight_[2] = {false, false};
  int slot_ = 0;
  size_t used_ = 0;            // bytes of the current slot taken since it was last waited for
  std::vector<Buffer> large_;  // one buffer each for tensors larger than a slot, until finish()
  size_t large_bytes_ = 0;
};

}  // namespace hd::ops
