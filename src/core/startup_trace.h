// Where a process's first seconds go. With HD_TRACE_STARTUP=1 in the environment, each mark prints one
// line to stderr: seconds since the process started (the kernel's start time, so that loading shared
// libraries before main counts; 10 ms resolution) and since the previous mark. Spans print their own
// length when they end. Off by default, when a mark costs one branch.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace hd {

bool startup_trace_on();
void startup_mark(std::string_view what);

// Times its scope and marks its end as "WHAT: N ms".
class StartupSpan {
 public:
  explicit StartupSpan(std::string what);
  ~StartupSpan();
  StartupSpan(const StartupSpan&) = delete;
  StartupSpan& operator=(const StartupSpan&) = delete;

 private:
  std::string what_;  // empty: not tracing
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hd
