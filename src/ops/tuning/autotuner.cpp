#include "ops/tuning/autotuner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
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

// How a choice was made: by timing every candidate fully, by timing the quick few briefly, or by taking
// a near neighbour's (autotuner.h).
enum class Origin { kExhaustive, kQuick, kNear };

// `read` marks what the cache file held when this process read it: only that serves as a neighbour
// (autotuner.h says why).
struct Choice {
  std::string candidate;
  Origin origin = Origin::kExhaustive;
  bool read = false;
};

struct Note {
  std::string value;
  bool near = false;
  bool read = false;
};

// A sized key's family and work (sized_key's form); false for any other key.
bool parse_sized(std::string_view key, std::string_view* family, double* work) {
  const size_t at = key.rfind(" @ ");
  if (at == std::string_view::npos) return false;
  const std::string_view rest = key.substr(at + 3);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (error != std::errc() || value <= 0) return false;
  *family = key.substr(0, at);
  *work = double(value);
  return true;
}

// The entry of `entries` nearest to `key` in work among its family's, within kNearWorkRatio, that
// `usable` accepts (ties go to the smaller key, so that every process picks the same); null when none.
// `ratio`, when given, receives the larger work over the smaller.
template <class Map, class Usable>
const typename Map::value_type* nearest(const Map& entries, std::string_view key, Usable usable,
                                        double* ratio = nullptr) {
  std::string_view family;
  double work = 0.0;
  if (!parse_sized(key, &family, &work)) return nullptr;
  const typename Map::value_type* best = nullptr;
  double best_ratio = 0.0;
  for (const auto& entry : entries) {
    std::string_view other_family;
    double other_work = 0.0;
    if (!parse_sized(entry.first, &other_family, &other_work) || other_family != family || !usable(entry.second))
      continue;
    const double r = std::max(work, other_work) / std::min(work, other_work);
    if (r > kNearWorkRatio) continue;
    if (!best || r < best_ratio || (r == best_ratio && entry.first < best->first)) best = &entry, best_ratio = r;
  }
  if (ratio != nullptr) *ratio = best_ratio;
  return best;
}

struct TunerState {
  std::mutex mutex;
  std::string path = default_tune_cache_path();
  bool loaded = false;
  std::unordered_map<std::string, Choice> choices;  // key -> choice
  std::unordered_map<std::string, Note> notes;      // key -> a library's answer
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
      const std::string_view third =
          std::string_view(line).substr(b + 1, c == std::string::npos ? c : c - b - 1);
      const std::string_view tag = c == std::string::npos ? "" : std::string_view(line).substr(c + 1);
      std::string key = line.substr(0, a), value = line.substr(a + 1, b - a - 1);
      if (third == "note") {  // "<key>\t<value>\tnote", "\tnear" after a neighbour's
        if (tag.empty() || tag == "near") notes[std::move(key)] = Note{std::move(value), !tag.empty(), true};
        continue;
      }
      const Origin origin = tag.empty()      ? Origin::kExhaustive
                            : tag == "quick" ? Origin::kQuick
                                             : Origin::kNear;
      if (!tag.empty() && tag != "quick" && tag != "near") continue;  // a foreign tag: retuned
      choices[std::move(key)] = Choice{std::move(value), origin, true};
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

std::atomic<uint64_t> g_generation{0};  // tuning_generation()

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

// $HD_TUNE_NEAR=0 leaves near neighbours out of the quick policy: what measures their effect (the step
// time of a cache tuned with them beside one tuned without).
bool near_choices_allowed() {
  static const bool allowed = [] {
    const char* text = std::getenv("HD_TUNE_NEAR");
    return !(text && std::string_view(text) == "0");
  }();
  return allowed;
}

}  // namespace

KernelChoice parse_kernel_choice(std::string_view text, std::string_view source) {
  if (text == "own") return KernelChoice::kOwn;
  if (text == "all") return KernelChoice::kAll;
  if (text == "fragments") return KernelChoice::kFragments;
  throw Error(ErrorKind::kInvalidInput,
              str_cat(source,
                      " must be 'own' (our kernels only), 'fragments' (ours on the fragment layer only) or "
                      "'all' (with the vendor libraries), got '",
                      text, "'"));
}

void set_kernel_choice(KernelChoice choice) {
  g_kernel_choice = int(choice);
  ++g_generation;
}

KernelChoice kernel_choice() { return setting(g_kernel_choice, "HD_KERNELS", KernelChoice::kAll, parse_kernel_choice); }

const char* kernel_choice_name(KernelChoice choice) {
  return choice == KernelChoice::kOwn ? "own" : choice == KernelChoice::kFragments ? "fragments" : "all";
}

TunePolicy parse_tune_policy(std::string_view text, std::string_view source) {
  if (text == "quick") return TunePolicy::kQuick;
  if (text == "exhaustive") return TunePolicy::kExhaustive;
  throw Error(ErrorKind::kInvalidInput, str_cat(source, " must be 'quick' (a few likely kernels, timed briefly) or "
                                                "'exhaustive' (every kernel, timed fully), got '", text, "'"));
}

void set_tune_policy(TunePolicy policy) {
  g_tune_policy = int(policy);
  ++g_generation;
}

TunePolicy tune_policy() { return setting(g_tune_policy, "HD_TUNE", TunePolicy::kQuick, parse_tune_policy); }

const char* tune_policy_name(TunePolicy policy) { return policy == TunePolicy::kQuick ? "quick" : "exhaustive"; }

std::string sized_key(std::string_view family, int64_t work, std::string_view size) {
  HD_ASSERT(work > 0 && family.find_first_of("\t\n") == std::string_view::npos &&
            size.find_first_of("\t\n") == std::string_view::npos);
  return str_cat(family, " @ ", work, " ", size);
}

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
  ++g_generation;
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
                   const std::function<double(int, TimingEffort)>& time_ms, const std::vector<bool>& quick,
                   const std::vector<bool>& library_picks) {
  HD_ASSERT(!candidates.empty());
  HD_ASSERT(quick.empty() || quick.size() == candidates.size());
  HD_ASSERT(library_picks.empty() || library_picks.size() == candidates.size());
  if (candidates.size() == 1) return 0;
  const TunePolicy policy = tune_policy();
  TunerState& s = state();
  int near = -1;     // under the quick policy, the index of a near neighbour's choice
  bool far = false;  // that neighbour is more than kNearDirectRatio away
  {
    const std::lock_guard lock(s.mutex);
    if (!s.loaded) s.load_locked();
    if (const auto it = s.choices.find(key);
        it != s.choices.end() && (policy == TunePolicy::kQuick || it->second.origin == Origin::kExhaustive)) {
      for (size_t i = 0; i < candidates.size(); ++i)
        if (candidates[i] == it->second.candidate) return int(i);
    }
    if (policy == TunePolicy::kQuick && near_choices_allowed()) {
      double ratio = 0.0;
      if (const auto* neighbour = nearest(
              s.choices, key, [](const Choice& c) { return c.read && c.origin != Origin::kNear; }, &ratio)) {
        const auto found = std::find(candidates.begin(), candidates.end(), neighbour->second.candidate);
        if (found != candidates.end()) near = int(found - candidates.begin());
        far = ratio > kNearDirectRatio;
      }
    }
  }
  HD_CHECK_KIND(no_tuning_reason == nullptr, ErrorKind::kUnsupported, "autotuner: ", key,
                " has no kernel chosen yet and cannot be tuned ", no_tuning_reason);
  // Timed outside the lock: the candidates launch kernels and wait for them.
  const auto start = std::chrono::steady_clock::now();
  static const bool trace = std::getenv("HD_TUNE_TRACE") != nullptr;
  const auto timed = [&](int i, TimingEffort effort) {
    const auto timing_start = std::chrono::steady_clock::now();
    const double ms = time_ms(i, effort);
    if (trace) {  // $HD_TUNE_TRACE: what each candidate ran in, and what timing it cost (set-up included)
      std::fprintf(
          stderr, "tune\t%s\t%s\t%.4f ms\t%.1f ms to time%s\n", key.c_str(), candidates[size_t(i)].c_str(),
          ms,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - timing_start).count(),
          i == near ? "\tnear" : "");
    }
    return ms;
  };
  // The neighbour's choice, run once: taken when it runs here, unless a far neighbour's choice of our own
  // loses to a library's own pick.
  int best = -1;
  double best_ms = 0.0;
  Origin origin = policy == TunePolicy::kExhaustive ? Origin::kExhaustive : Origin::kQuick;
  if (near >= 0) {
    if (const double ms = timed(near, TimingEffort::kBrief); ms >= 0.0)
      best = near, best_ms = ms, origin = Origin::kNear;
    const bool raced =
        origin == Origin::kNear && far && !library_picks.empty() && !library_picks[size_t(near)];
    for (size_t i = 0; raced && i < candidates.size(); ++i) {
      if (!library_picks[i]) continue;
      if (const double ms = timed(int(i), TimingEffort::kBrief); ms >= 0.0 && ms < best_ms)
        best = int(i), best_ms = ms;
    }
  }
  const bool some_quick = std::find(quick.begin(), quick.end(), true) != quick.end();
  const bool narrowed = policy == TunePolicy::kQuick && some_quick;
  const TimingEffort effort = policy == TunePolicy::kQuick ? TimingEffort::kBrief : TimingEffort::kFull;
  // Under the quick policy, the quick candidates; the others only when none of those can run.
  for (const bool first_pass : {true, false}) {
    if (origin == Origin::kNear || (!first_pass && (best >= 0 || !narrowed))) break;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (narrowed && quick[i] != first_pass) continue;
      const double ms =
          int(i) == near ? -1.0 : timed(int(i), effort);  // a neighbour's that failed: not again
      if (ms >= 0.0 && (best < 0 || ms < best_ms)) best = int(i), best_ms = ms;
    }
  }
  HD_CHECK_KIND(best >= 0, ErrorKind::kUnsupported, "autotuner: no candidate kernel can run ", key);
  const std::lock_guard lock(s.mutex);
  s.stats.keys_tuned += 1;
  s.stats.keys_borrowed += origin == Origin::kNear ? 1 : 0;
  s.stats.milliseconds += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  s.choices[key] = Choice{candidates[size_t(best)], origin};
  std::ostringstream line;
  line << key << '\t' << candidates[size_t(best)] << '\t' << best_ms
       << (origin == Origin::kQuick  ? "\tquick"
           : origin == Origin::kNear ? "\tnear"
                                     : "")
       << '\n';
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
  ++g_generation;
}

uint64_t tuning_generation() {
  return g_generation;
}

LibraryNote library_note(const std::string& key) {
  const bool quick = tune_policy() == TunePolicy::kQuick;
  const bool near_allowed = quick && near_choices_allowed();
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  if (!s.loaded) s.load_locked();
  if (const auto it = s.notes.find(key); it != s.notes.end() && (quick || !it->second.near))
    return {it->second.value, it->second.near};
  if (!near_allowed) return {};
  const auto* neighbour = nearest(s.notes, key, [](const Note& n) { return n.read && !n.near; });
  return neighbour ? LibraryNote{neighbour->second.value, true} : LibraryNote{};
}

void remember_library_note(const std::string& key, const std::string& value, bool near) {
  HD_ASSERT(key.find_first_of("\t\n") == std::string::npos && value.find_first_of("\t\n") == std::string::npos);
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  if (!s.loaded) s.load_locked();
  auto [it, added] = s.notes.try_emplace(key, Note{value, near});
  if (!added && it->second.value == value && it->second.near == near) return;
  it->second = Note{value, near};
  s.append_locked(key + '\t' + value + (near ? "\tnote\tnear\n" : "\tnote\n"));
}

TuningStats tuning_stats() {
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  return s.stats;
}

TuningStats tuning_since(const TuningStats& before) {
  const TuningStats now = tuning_stats();
  return {now.keys_tuned - before.keys_tuned, now.keys_borrowed - before.keys_borrowed,
          now.milliseconds - before.milliseconds};
}

}  // namespace hd::ops
