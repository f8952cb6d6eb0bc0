// One thread per rank, as a process drives several GPUs (or the tests their stand-ins).
#pragma once

#include <functional>
#include <string>

namespace hd::comm {

// Runs work(rank) for every rank in [0, ranks) on a thread of its own and returns when all have ended.
// The first rank to throw has on_failure(rank, message) called at once (a group's fail or abort, which
// ends the other ranks' waits), and its exception is rethrown here once every thread has ended.
void run_ranks(int ranks, const std::function<void(int rank)>& work,
               const std::function<void(int rank, const std::string& message)>& on_failure = {});

}  // namespace hd::comm
