#include "ops/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "ops/ops.h"

namespace hd::ops {

namespace {

std::atomic<bool> enabled{false};
std::mutex mutex;
std::map<std::string, OpTotal>& totals() {
  static auto* t = new std::map<std::string, OpTotal>;
  return *t;
}
thread_local int depth = 0;  // ops open on this thread: only the outermost is timed

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void set_profiling(bool on) {
  const std::lock_guard lock(mutex);
  totals().clear();
  enabled = on;
}

bool profiling() { return enabled; }

std::vector<OpTotal> profile_totals() {
  const std::lock_guard lock(mutex);
  std::vector<OpTotal> out;
  for (const auto& [name, total] : totals()) out.push_back(total);
  std::sort(out.begin(), out.end(), [](const OpTotal& a, const OpTotal& b) { return a.ms > b.ms; });
  return out;
}

OpScope::OpScope(const char* op, const Device& device) : device_(device) {
  if (!enabled) return;
  if (depth == 0) {
    synchronize(device_);  // what was queued before is not this op's (may throw: nothing counted yet)
    op_ = op;
    start_ns_ = now_ns();
  }
  ++depth;
  counted_ = true;
}

OpScope::~OpScope() {
  if (!counted_) return;
  --depth;
  if (op_ == nullptr) return;
  try {
    synchronize(device_);
  } catch (...) {
    return;  // the op's own error is on its way; a destructor adds none
  }
  const double ms = double(now_ns() - start_ns_) / 1e6;
  const std::lock_guard lock(mutex);
  OpTotal& t = totals()[op_];
  t.op = op_;
  t.calls += 1;
  t.ms += ms;
}

}  // namespace hd::ops
