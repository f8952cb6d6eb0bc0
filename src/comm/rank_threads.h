// One thread per rank, as a process drives several GPUs (or the tests their stand-ins).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace hd::comm {

// What tells run_ranks that ranks which exchange are stuck: `progress` (read from another thread) grows
// while they move, and `timeout` passes without it growing. A rank waiting for a collective that another
// rank never joins waits in the library (NCCL's kernels spin) or in a synchronisation behind it, for ever;
// the watchdog ends that with an error. The timeout is for the host's view of progress: a host that has
// queued all of its steps waits in one synchronisation for as long as the device runs them.
struct Watchdog {
  std::function<uint64_t()> progress;
  std::chrono::milliseconds timeout{0};  // 0: no watchdog
  // Whether ranks still exchange (none: what is left, a decode, may take as long as it takes); empty:
  // always. The timeout restarts when it turns true again.
  std::function<bool()> exchanging{};
};

// Runs work(rank) for every rank in [0, ranks) on a thread of its own and returns when all have ended.
// The first rank to throw has on_failure(rank, message) called at once (a group's fail or abort, which
// ends the other ranks' waits), and its exception is rethrown here once every thread has ended. With a
// watchdog, no progress for its timeout calls on_failure(-1, message) (no rank failed: the group is
// stuck) and that error is the one rethrown, however the ranks end.
void run_ranks(int ranks, const std::function<void(int rank)>& work,
               const std::function<void(int rank, const std::string& message)>& on_failure = {},
               const Watchdog& watchdog = {});

// The exchanges' watchdog timeout: HD_EXCHANGE_TIMEOUT (seconds, 0.001 or more) where set, else 300 s. A
// bad value is an error that names the variable. The host sees progress when exchanges are queued, so the
// timeout must exceed the longest device work a rank queues before it waits (a request's remaining steps).
std::chrono::milliseconds exchange_timeout();

}  // namespace hd::comm
