// NCCL (NVIDIA) or RCCL (AMD, the same API) between the GPUs of one process, one thread per GPU: the
// communicators of a group made at once (ncclCommInitAll). Built where CMake finds the library
// (HD_WITH_NCCL); elsewhere `nccl_available` is false and making a group is a kUnsupported error.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace hd::comm {

// Whether this build has NCCL/RCCL, and its version ("NCCL 2.28.3"); "" without.
bool nccl_available();
std::string nccl_version();

// One communicator per device, rank i on devices[i] (distinct GPUs of this build's vendor). Each is used
// by one thread only (its rank's).
class NcclGroup {
 public:
  explicit NcclGroup(std::span<const Device> devices);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return int(communicators_.size()); }
  Communicator& communicator(int rank) const;
  // Ends every rank's pending and later collectives with an error (ncclCommAbort): what a failing rank
  // does so that the others do not wait for it for ever, and what a watchdog does (rank -1).
  void abort(int rank, const std::string& why);

 private:
  std::vector<std::unique_ptr<Communicator>> communicators_;
};

}  // namespace hd::comm
