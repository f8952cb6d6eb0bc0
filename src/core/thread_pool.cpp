#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace hd {

namespace {
thread_local bool t_inside_pool = false;
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
std::mutex& global_mutex() {
  static std::mutex mutex;
  return mutex;
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::global() {
  // Made on first use, which may come from several threads at once (each GPU's thread loading its copy
  // of a model): without the lock two pools were made and one freed while the other thread used it.
  std::lock_guard lock(global_mutex());
  auto& slot = global_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(0);
  return *slot;
}

void ThreadPool::set_global_threads(int threads) {
  std::lock_guard lock(global_mutex());
  global_slot() = std::make_unique<ThreadPool>(threads);
}

// Takes chunks until none are left. Called by workers and by the thread that called parallel_for.
void ThreadPool::run_chunks() {
  for (;;) {
    int64_t begin;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= n_ || error_) return;
      begin = next_;
      next_ += chunk_;
    }
    try {
      (*body_)(begin, std::min(begin + chunk_, n_));
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    run_chunks();
    {
      std::lock_guard lock(mutex_);
      --active_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || t_inside_pool || n <= grain) {
    body(0, n);
    return;
  }
  std::lock_guard job(job_mutex_);
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    n_ = n;
    // About four chunks per thread balances uneven chunks without much locking.
    chunk_ = std::max(grain, (n + 4 * size() - 1) / (4 * size()));
    next_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  t_inside_pool = true;
  run_chunks();
  t_inside_pool = false;
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0 && (next_ >= n_ || error_); });
    error = error_;
    body_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace hd
