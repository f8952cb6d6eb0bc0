// N ranks as threads of one process: the stand-in for N GPUs that the tests use where a machine has fewer
// (CPU tensors, or every rank's tensors on one GPU, copied on the device). Every wait for another rank
// has a timeout, and a rank that fails ends every other rank's waits with an error that names it (a GPU
// rank's wait for its own device has none).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace hd::comm {

class InProcessGroup {
 public:
  explicit InProcessGroup(int ranks, std::chrono::milliseconds timeout = std::chrono::seconds(300));
  int size() const;
  // Rank `rank`'s communicator, its tensors on `device`: the CPU, or one GPU shared by every rank (what a
  // rank posts is read by the others through that GPU's copies).
  std::unique_ptr<Communicator> communicator(int rank, const Device& device = Device::cpu());
  // Ends the group: every wait of every rank, now and later, throws an error naming `rank` and `why`
  // (rank -1: a watchdog, `why` alone).
  void fail(int rank, const std::string& why);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hd::comm
