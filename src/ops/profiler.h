// Per-op time, for `hipdiffusion bench --profile`: while profiling is on, each op waits for its device
// before and after it runs, and its wall time is added to its name's total (an op called from inside
// another counts only in the outer one). The waits serialise host and device, so the totals add up to
// more than an unprofiled run takes; what they show is where the time goes. Off by default, when an op
// pays one branch for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace hd::ops {

void set_profiling(bool on);  // also clears the totals
bool profiling();

struct OpTotal {
  std::string op;
  int64_t calls = 0;
  double ms = 0;
};
std::vector<OpTotal> profile_totals();  // slowest first

// Times its scope as `op` (a string literal) on `device` while profiling is on.
class OpScope {
 public:
  OpScope(const char* op, const Device& device);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* op_ = nullptr;  // null: not timing (profiling off, or inside another op)
  bool counted_ = false;      // this scope is in the thread's depth
  Device device_;
  int64_t start_ns_ = 0;
};

}  // namespace hd::ops
