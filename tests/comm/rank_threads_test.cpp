// A thread per rank: the first failure ends the group and is the one rethrown; the watchdog ends ranks
// that stop exchanging (and leaves moving ones be); its timeout comes from HD_EXCHANGE_TIMEOUT.
#include "comm/rank_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "test_util.h"

namespace hd::comm {
namespace {

using namespace std::chrono_literals;

// Ranks that wait until the group is failed, as ranks inside a collective that another never joins.
struct StuckRanks {
  std::mutex m;
  std::condition_variable cv;
  bool failed = false;
  int failed_rank = 0;
  std::string why;

  void wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return failed; });
  }
  void fail(int rank, const std::string& message) {
    const std::lock_guard lock(m);
    failed = true, failed_rank = rank, why = message;
    cv.notify_all();
  }
};

TEST(RankThreads, TheFirstFailureEndsTheOthersAndIsRethrown) {
  StuckRanks group;
  test::expect_error_containing(
      [&] {
        run_ranks(3, [&](int rank) {
          if (rank == 1) throw Error(ErrorKind::kRuntime, "rank one broke");
          group.wait();
        }, [&](int rank, const std::string& why) { group.fail(rank, why); });
      },
      "rank one broke");
  EXPECT_EQ(group.failed_rank, 1);
}

TEST(RankThreads, TheWatchdogEndsRanksThatStopExchanging) {
  StuckRanks group;
  const auto start = std::chrono::steady_clock::now();
  test::expect_error_containing(
      [&] {
        run_ranks(2, [&](int) { group.wait(); }, [&](int rank, const std::string& why) { group.fail(rank, why); },
                  Watchdog{[] { return uint64_t(7); }, 200ms});
      },
      "no progress in 0.2 s: 2 ranks' exchanges stopped");
  EXPECT_EQ(group.failed_rank, -1) << "no rank failed: the group is stuck";
  EXPECT_NE(group.why.find("HD_EXCHANGE_TIMEOUT"), std::string::npos);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
}

TEST(RankThreads, TheWatchdogLeavesRanksThatExchangeBe) {
  // Each rank exchanges every 20 ms for 400 ms, twice the watchdog's timeout.
  std::atomic<uint64_t> exchanges{0};
  bool failed = false;
  run_ranks(2, [&](int) {
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(20ms);
      exchanges.fetch_add(1);
    }
  }, [&](int, const std::string&) { failed = true; }, Watchdog{[&] { return exchanges.load(); }, 200ms});
  EXPECT_FALSE(failed);
  EXPECT_EQ(exchanges.load(), 40u);
}

TEST(RankThreads, ARanksOwnFailureStaysTheOneReportedPastTheTimeout) {
  // Rank 0 fails; rank 1 stays stuck past the watchdog's timeout (its group ignores that failure) and is
  // freed later by another thread: the error is rank 0's. Progress moves until rank 0 has thrown, so the
  // watchdog cannot fire first however late the threads start.
  StuckRanks group;
  std::atomic<bool> thrown{false};
  std::atomic<uint64_t> ticks{0};
  std::thread freer;
  test::expect_error_containing(
      [&] {
        run_ranks(2, [&](int rank) {
          if (rank == 0) {
            thrown = true;
            throw Error(ErrorKind::kRuntime, "rank zero broke");
          }
          group.wait();
        }, [&](int rank, const std::string& why) {
          if (rank == 0) {
            freer = std::thread([&] { std::this_thread::sleep_for(300ms); group.fail(-2, "freed"); });
          } else {
            group.fail(rank, why);  // not expected: frees rank 1 so that a failure cannot hang the test
          }
        }, Watchdog{[&] { return thrown ? uint64_t(0) : ++ticks; }, 100ms, {}});
      },
      "rank zero broke");
  if (freer.joinable()) freer.join();
  EXPECT_EQ(group.failed_rank, -2) << "the watchdog does not fail a group a rank has failed already";
}

TEST(RankThreads, ExchangeTimeoutComesFromTheEnvironment) {
  const char* saved = std::getenv("HD_EXCHANGE_TIMEOUT");
  const std::string kept = saved ? saved : "";
  unsetenv("HD_EXCHANGE_TIMEOUT");
  EXPECT_EQ(exchange_timeout(), std::chrono::milliseconds(300000));
  setenv("HD_EXCHANGE_TIMEOUT", "2.5", 1);
  EXPECT_EQ(exchange_timeout(), std::chrono::milliseconds(2500));
  for (const char* bad : {"abc", "-1", "0", "0.0001", "5s"}) {
    setenv("HD_EXCHANGE_TIMEOUT", bad, 1);
    test::expect_error_containing([] { (void)exchange_timeout(); }, "HD_EXCHANGE_TIMEOUT must be a positive");
  }
  if (saved) setenv("HD_EXCHANGE_TIMEOUT", kept.c_str(), 1);
  else unsetenv("HD_EXCHANGE_TIMEOUT");
}

}  // namespace
}  // namespace hd::comm
