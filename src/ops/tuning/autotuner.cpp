#include "ops/tuning/autotuner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/startup_trace.h"

namespace hd::ops {

namespace {

struct Choice {
  std::string candidate;
  bool exhaustive = true;  // chosen among every candidate, fully timed
};

struct TunerState {
  std::mutex mutex;
  std::string path = default_tune_cache_path();
  bool loaded = false;
  std::unordered_map<std::string, Choice> choices;  // key -> choice
  std::unordered_map<std::string, std::string> notes;  // key -> a library's answer
  TuningStats stats;

  void load_locked() {
    const StartupSpan span("tuning cache read");
    loaded = true;
    if (path.empty()) return;
    std::ifstream in(path);
    if (!in) return;  // no cache yet: everything is tuned on first use
    std::string line;
    while (std::getline(in, line)) {
      const size_t a = line.find('\t');
      const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
      if (b == std::string::npos) continue;  // a torn or foreign line: that key is simply retuned
      const size_t c = line.find('\t', b + 1);
      if (c == std::string::npos && line.compare(b + 1, std::string::npos, "note") == 0) {
        notes[line.substr(0, a)] = line.substr(a + 1, b - a - 1);  // "<key>\t<value>\tnote"
        continue;
      }
      const std::string tag = c == std::string::npos ? "" : line.substr(c + 1);
      if (!tag.empty() && tag != "quick") continue;  // a foreign tag: retuned
      choices[line.substr(0, a)] = Choice{line.substr(a + 1, b - a - 1), tag.empty()};
    }
  }

  // One write(2) of the whole line on a descriptor opened for appending: the kernel places it at the
  // end in one piece, whatever other processes append at the same time.
  void append_locked(const std::string& line) const {
    if (path.empty()) return;
    // A cache that cannot be written only costs the timing again next run: never an error.
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
};

TunerState& state() {
  static TunerState s;
  return s;
}

// -1: not yet read from $HD_KERNELS; else the KernelChoice.
std::atomic<int> g_kernel_choice{-1};
// -1: not yet read from $HD_TUNE; else the TunePolicy.
std::atomic<int> g_tune_policy{-1};

// A setting a front end may set and the environment otherwise gives: `slot` once set, else `variable`
// parsed (an unset or empty variable gives `fallback`), remembered.
template <class E>
E setting(std::atomic<int>& slot, const char* variable, E fallback, E (*parse)(std::string_view, std::string_view)) {
  const int known = slot;
  if (known >= 0) return E(known);
  const char* text = std::getenv(variable);
  const E value = text && *text ? parse(text, variable) : fallback;
  slot = int(value);
  return value;
}

}  // namespace

KernelChoice parse_kernel_choice(std::string_view text, std::string_view source) {
  if (text == "own") return KernelChoice::kOwn;
  if (text == "all") return KernelChoice::kAll;
  throw Error(ErrorKind::kInvalidInput, str_cat(source, " must be 'own' (our kernels only) or 'all' (with the vendor "
                                                "libraries), got '", text, "'"));
}

void set_kernel_choice(KernelChoice choice) { g_kernel_choice = int(choice); }

KernelChoice kernel_choice() { return setting(g_kernel_choice, "HD_KERNELS", KernelChoice::kAll, parse_kernel_choice); }

const char* kernel_choice_name(KernelChoice choice) { return choice == KernelChoice::kOwn ? "own" : "all"; }

TunePolicy parse_tune_policy(std::string_view text, std::string_view source) {
  if (text == "quick") return TunePolicy::kQuick;
  if (text == "exhaustive") return TunePolicy::kExhaustive;
  throw Error(ErrorKind::kInvalidInput, str_cat(source, " must be 'quick' (a few likely kernels, timed briefly) or "
                                                "'exhaustive' (every kernel, timed fully), got '", text, "'"));
}

void set_tune_policy(TunePolicy policy) { g_tune_policy = int(policy); }

TunePolicy tune_policy() { return setting(g_tune_policy, "HD_TUNE", TunePolicy::kQuick, parse_tune_policy); }

const char* tune_policy_name(TunePolicy policy) { return policy == TunePolicy::kQuick ? "quick" : "exhaustive"; }

std::string default_tune_cache_path() {
  if (const char* explicit_path = std::getenv("HD_TUNE_CACHE")) return explicit_path;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/hipdiffusion/tuning.tsv";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/hipdiffusion/tuning.tsv";
  return "";
}

void set_tune_cache_path(std::string path) {
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  s.path = std::move(path);
  s.choices.clear();
  s.notes.clear();
  s.loaded = false;
}

std::string tune_cache_path() {
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  return s.path;
}

namespace {
thread_local const char* no_tuning_reason = nullptr;  // this thread's innermost NoTuningScope's
}

NoTuningScope::NoTuningScope(const char* why) : previous_(no_tuning_reason) { no_tuning_reason = why; }
NoTuningScope::~NoTuningScope() { no_tuning_reason = previous_; }

int choose_fastest(const std::string& key, const std::vector<std::string>& candidates,
                   const std::function<double(int, TimingEffort)>& time_ms, const std::vector<bool>& quick) {
  HD_ASSERT(!candidates.empty());
  HD_ASSERT(quick.empty() || quick.size() == candidates.size());
  if (candidates.size() == 1) return 0;
  const TunePolicy policy = tune_policy();
  TunerState& s = state();
  {
    const std::lock_guard lock(s.mutex);
    if (!s.loaded) s.load_locked();
    if (const auto it = s.choices.find(key);
        it != s.choices.end() && (policy == TunePolicy::kQuick || it->second.exhaustive)) {
      for (size_t i = 0; i < candidates.size(); ++i)
        if (candidates[i] == it->second.candidate) return int(i);
    }
  }
  HD_CHECK_KIND(no_tuning_reason == nullptr, ErrorKind::kUnsupported, "autotuner: ", key,
                " has no kernel chosen yet and cannot be tuned ", no_tuning_reason);
  // Timed outside the lock: the candidates launch kernels and wait for them.
  const auto start = std::chrono::steady_clock::now();
  const bool some_quick = std::find(quick.begin(), quick.end(), true) != quick.end();
  const bool narrowed = policy == TunePolicy::kQuick && some_quick;
  const TimingEffort effort = policy == TunePolicy::kQuick ? TimingEffort::kBrief : TimingEffort::kFull;
  static const bool trace = std::getenv("HD_TUNE_TRACE") != nullptr;
  int best = -1;
  double best_ms = 0.0;
  // Under the quick policy, the quick candidates; the others only when none of those can run.
  for (const bool first_pass : {true, false}) {
    if (!first_pass && (best >= 0 || !narrowed)) break;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (narrowed && quick[i] != first_pass) continue;
      const auto timing_start = std::chrono::steady_clock::now();
      const double ms = time_ms(int(i), effort);
      if (trace) {  // $HD_TUNE_TRACE: what each candidate ran in, and what timing it cost (set-up included)
        std::fprintf(stderr, "tune\t%s\t%s\t%.4f ms\t%.1f ms to time\n", key.c_str(), candidates[i].c_str(), ms,
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - timing_start).count());
      }
      if (ms >= 0.0 && (best < 0 || ms < best_ms)) best = int(i), best_ms = ms;
    }
  }
  HD_CHECK_KIND(best >= 0, ErrorKind::kUnsupported, "autotuner: no candidate kernel can run ", key);
  const bool exhaustive = policy == TunePolicy::kExhaustive;
  const std::lock_guard lock(s.mutex);
  s.stats.keys_tuned += 1;
  s.stats.milliseconds += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  s.choices[key] = Choice{candidates[size_t(best)], exhaustive};
  std::ostringstream line;
  line << key << '\t' << candidates[size_t(best)] << '\t' << best_ms << (exhaustive ? "" : "\tquick") << '\n';
  s.append_locked(line.str());
  return best;
}

int choose_fastest(const std::string& key, const std::vector<std::string>& candidates,
                   const std::function<double(int)>& time_ms) {
  return choose_fastest(key, candidates, [&](int i, TimingEffort) { return time_ms(i); });
}

void forget_choice(const std::string& key) {
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  s.choices.erase(key);
}

std::string library_note(const std::string& key) {
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  if (!s.loaded) s.load_locked();
  const auto it = s.notes.find(key);
  return it == s.notes.end() ? std::string() : it->second;
}

void remember_library_note(const std::string& key, const std::string& value) {
  HD_ASSERT(key.find_first_of("\t\n") == std::string::npos && value.find_first_of("\t\n") == std::string::npos);
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  if (!s.loaded) s.load_locked();
  auto [it, added] = s.notes.try_emplace(key, value);
  if (!added && it->second == value) return;
  it->second = value;
  s.append_locked(key + '\t' + value + "\tnote\n");
}

TuningStats tuning_stats() {
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  return s.stats;
}

}  // namespace hd::ops
