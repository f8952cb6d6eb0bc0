#include "core/startup_trace.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace hd {

namespace {

double seconds_of(const timespec& t) { return double(t.tv_sec) + double(t.tv_nsec) * 1e-9; }

// The process's start in CLOCK_BOOTTIME seconds: field 22 of /proc/self/stat, in clock ticks since boot.
// Negative where /proc cannot tell.
double process_start_boottime() {
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return -1.0;
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) return double(std::strtoull(field.c_str(), nullptr, 10)) / double(sysconf(_SC_CLK_TCK));
  }
  return -1.0;
}

double boottime_now() {
  timespec t{};
  clock_gettime(CLOCK_BOOTTIME, &t);
  return seconds_of(t);
}

}  // namespace

bool startup_trace_on() {
  static const bool on = [] {
    const char* v = std::getenv("HD_TRACE_STARTUP");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  }();
  return on;
}

void startup_mark(std::string_view what) {
  if (!startup_trace_on()) return;
  static std::mutex mutex;
  static const double start = process_start_boottime();
  static double previous = start < 0 ? boottime_now() : start;
  const std::lock_guard lock(mutex);
  const double now = boottime_now();
  std::fprintf(stderr, "startup %7.3f s (+%6.1f ms) %.*s\n", start < 0 ? 0.0 : now - start, (now - previous) * 1e3,
               int(what.size()), what.data());
  previous = now;
}

StartupSpan::StartupSpan(std::string what) {
  if (!startup_trace_on()) return;
  what_ = std::move(what);
  start_ = std::chrono::steady_clock::now();
}

StartupSpan::~StartupSpan() {
  if (what_.empty()) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  char buf[48];
  std::snprintf(buf, sizeof buf, ": %.1f ms", ms);
  startup_mark(what_ + buf);
}

}  // namespace hd
