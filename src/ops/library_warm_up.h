// The vendor libraries' one-time start-up (cuDNN and cuBLASLt: about 0.2 s on the H100 machine) on a
// thread of its own while the caller does work that leaves them idle, such as loading weights: construct
// it before that work; the destructor waits for the start-up to end (and so no thread outlives it).
// Nothing on the CPU, under --kernels own, in builds without GPU kernels, or for a device whose libraries
// this process already started.
#pragma once

#include <memory>

#include "core/device.h"

namespace hd::ops {

class LibraryWarmUp {
 public:
  explicit LibraryWarmUp(const Device& device);
  ~LibraryWarmUp();
  LibraryWarmUp(const LibraryWarmUp&) = delete;
  LibraryWarmUp& operator=(const LibraryWarmUp&) = delete;

 private:
  struct Running;
  std::unique_ptr<Running> running_;  // null: nothing started
};

}  // namespace hd::ops
