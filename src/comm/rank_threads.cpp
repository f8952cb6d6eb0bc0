#include "comm/rank_threads.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace hd::comm {

void run_ranks(int ranks, const std::function<void(int rank)>& work,
               const std::function<void(int rank, const std::string& message)>& on_failure,
               const Watchdog& watchdog) {
  std::mutex m;
  std::condition_variable ended_cv;
  int ended = 0;  // under m
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(size_t(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        work(rank);
      } catch (...) {
        std::string what = "an exception that is not a std::exception";
        try {
          throw;
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        bool is_first = false;
        {
          const std::lock_guard<std::mutex> lock(m);
          is_first = first == nullptr;
          if (is_first) first = std::current_exception();
        }
        // Only the first failure ends the group: the others' errors are its echo.
        if (is_first && on_failure) on_failure(rank, what);
      }
      const std::lock_guard<std::mutex> lock(m);
      ++ended;
      ended_cv.notify_all();
    });
  }
  if (watchdog.timeout.count() > 0 && watchdog.progress) {
    uint64_t seen = watchdog.progress();
    auto since = std::chrono::steady_clock::now();
    bool fired = false;
    std::unique_lock lock(m);
    while (ended < ranks) {
      const auto poll = std::min<std::chrono::milliseconds>(watchdog.timeout / 4 + std::chrono::milliseconds(1),
                                                            std::chrono::seconds(1));
      if (ended_cv.wait_for(lock, poll, [&] { return ended == ranks; }) || fired) continue;
      const uint64_t now_seen = watchdog.progress();
      if (now_seen != seen || (watchdog.exchanging && !watchdog.exchanging())) {
        seen = now_seen;
        since = std::chrono::steady_clock::now();
        continue;
      }
      if (std::chrono::steady_clock::now() - since < watchdog.timeout) continue;
      fired = true;
      if (first) continue;  // a rank failed already, and its error stays the one reported
      const std::string why = str_cat("no progress in ", watchdog.timeout.count() / 1000.0, " s: ", ranks,
                                      " ranks' exchanges stopped (a rank that never joined a collective, or a "
                                      "stuck device); HD_EXCHANGE_TIMEOUT sets the limit");
      // The watchdog's error is the one reported: the ranks' own, once aborted, are its echo. Said at once
      // too: a rank stuck where the abort cannot reach keeps this call from returning.
      first = std::make_exception_ptr(Error(ErrorKind::kRuntime, why));
      lock.unlock();
      std::fprintf(stderr, "hipdiffusion: %s; ending the group's exchanges\n", why.c_str());
      if (on_failure) on_failure(-1, why);
      lock.lock();
    }
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

std::chrono::milliseconds exchange_timeout() {
  const char* text = std::getenv("HD_EXCHANGE_TIMEOUT");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  HD_CHECK(end != text && *end == '\0' && seconds >= 0.001 && seconds < 1e7, "HD_EXCHANGE_TIMEOUT must be a ",
           "positive number of seconds (a millisecond at least), not '", text, "'");
  return std::chrono::milliseconds(int64_t(seconds * 1000));
}

}  // namespace hd::comm
