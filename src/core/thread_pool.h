// CPU threading: a fixed pool of workers and a blocking parallel_for over an index range.
// The calling thread takes a share of the work too. A parallel_for called from inside a worker runs
// serially on that worker, so nested parallel loops cannot deadlock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hd {

class ThreadPool {
 public:
  // threads == 0 means one per hardware thread. The pool holds threads - 1 workers.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls body(begin, end) over disjoint chunks covering [0, n), each of at least `grain` indices
  // (except the last). Returns when all are done; rethrows the first exception a chunk threw.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

  // The process-wide pool used by the CPU ops, made on first use (from any thread). set_global_threads
  // replaces it (not thread-safe against running ops: call it at start-up, as the CLI's --threads does).
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // The job in flight (one at a time; parallel_for holds job_mutex_ for its whole length).
  std::mutex job_mutex_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace hd
