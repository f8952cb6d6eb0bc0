#include "comm/device_group.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "comm/in_process_group.h"
#include "comm/nccl_group.h"
#include "comm/rank_threads.h"
#include "core/error.h"

namespace hd::comm {

DeviceGroup::DeviceGroup(std::span<const Device> devices) {
  HD_CHECK(!devices.empty(), "a group of no devices");
  const int ranks = int(devices.size());
  std::set<int> distinct;
  for (const Device& d : devices) distinct.insert(d.index);
  if (ranks > 1 && devices[0].is_gpu() && int(distinct.size()) == ranks) {
    nccl_ = std::make_unique<NcclGroup>(devices);
    for (int r = 0; r < ranks; ++r) ranks_.push_back(&nccl_->communicator(r));
    return;
  }
  // Ranks sharing one GPU would capture their UNet graphs on one stream at once: a GPU takes one rank.
  HD_CHECK_KIND(devices[0].is_cpu() || ranks == 1, ErrorKind::kUnsupported,
                "the devices name a GPU more than once: each GPU takes one rank");
  // Its own waits give up no sooner than the watchdog (HD_EXCHANGE_TIMEOUT), which names the cause.
  in_process_ = std::make_unique<InProcessGroup>(ranks, std::max<std::chrono::milliseconds>(std::chrono::seconds(300),
                                                                                            exchange_timeout()));
  for (int r = 0; r < ranks; ++r) {
    in_process_ranks_.push_back(in_process_->communicator(r, devices[size_t(r)]));
    ranks_.push_back(in_process_ranks_.back().get());
  }
}

DeviceGroup::~DeviceGroup() = default;

std::string DeviceGroup::exchange_name() const {
  return nccl_ ? nccl_version() : std::string("in-process group");
}

uint64_t DeviceGroup::activity() const {
  uint64_t sum = 0;
  for (const Communicator* r : ranks_) sum += r->activity();
  return sum;
}

void DeviceGroup::fail(int rank, const std::string& why) {
  if (nccl_) nccl_->abort(rank, why);
  if (in_process_) in_process_->fail(rank, why);
}

}  // namespace hd::comm
