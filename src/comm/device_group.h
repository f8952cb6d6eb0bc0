// The ranks of a list of devices, one per device: NCCL/RCCL between distinct GPUs (several), an in-process
// group otherwise (the CPU named several times: the tests' stand-in for GPUs; or a single rank).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace hd::comm {

class InProcessGroup;
class NcclGroup;

class DeviceGroup {
 public:
  // Devices of one kind; a GPU named twice is refused (two ranks would share its one stream).
  explicit DeviceGroup(std::span<const Device> devices);
  ~DeviceGroup();
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  int size() const { return int(ranks_.size()); }
  Communicator& rank(int r) const { return *ranks_[size_t(r)]; }
  // Every rank's Communicator::activity, summed (from any thread).
  uint64_t activity() const;
  // How the exchanges travel: "NCCL 2.28.3", "in-process group".
  std::string exchange_name() const;
  // Ends every rank's pending and later exchanges with an error naming `rank` and `why` (rank -1: no
  // rank failed, the group is stuck: `why` alone).
  void fail(int rank, const std::string& why);

 private:
  std::unique_ptr<NcclGroup> nccl_;
  std::unique_ptr<InProcessGroup> in_process_;
  std::vector<std::unique_ptr<Communicator>> in_process_ranks_;
  std::vector<Communicator*> ranks_;
};

}  // namespace hd::comm
