#include "comm/rank_threads.h"

#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hd::comm {

void run_ranks(int ranks, const std::function<void(int rank)>& work,
               const std::function<void(int rank, const std::string& message)>& on_failure) {
  std::mutex m;
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
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace hd::comm
