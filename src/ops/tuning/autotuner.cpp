#include "ops/tuning/autotuner.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace hd::ops {

namespace {

struct TunerState {
  std::mutex mutex;
  std::string path = default_tune_cache_path();
  bool loaded = false;
  std::unordered_map<std::string, std::string> choices;  // key -> candidate name

  void load_locked() {
    loaded = true;
    if (path.empty()) return;
    std::ifstream in(path);
    if (!in) return;  // no cache yet: everything is tuned on first use
    std::string line;
    while (std::getline(in, line)) {
      const size_t a = line.find('\t');
      const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
      if (b == std::string::npos) continue;  // a torn or foreign line: that key is simply retuned
      choices[line.substr(0, a)] = line.substr(a + 1, b - a - 1);
    }
  }
};

TunerState& state() {
  static TunerState s;
  return s;
}

// -1: not yet read from $HD_KERNELS; else the KernelChoice.
std::atomic<int> g_kernel_choice{-1};

}  // namespace

KernelChoice parse_kernel_choice(std::string_view text, std::string_view source) {
  if (text == "own") return KernelChoice::kOwn;
  if (text == "all") return KernelChoice::kAll;
  throw Error(ErrorKind::kInvalidInput, str_cat(source, " must be 'own' (our kernels only) or 'all' (with the vendor "
                                                "libraries), got '", text, "'"));
}

void set_kernel_choice(KernelChoice choice) { g_kernel_choice = int(choice); }

KernelChoice kernel_choice() {
  const int known = g_kernel_choice;
  if (known >= 0) return KernelChoice(known);
  const char* text = std::getenv("HD_KERNELS");
  const KernelChoice choice = text && *text ? parse_kernel_choice(text, "HD_KERNELS") : KernelChoice::kAll;
  g_kernel_choice = int(choice);
  return choice;
}

const char* kernel_choice_name(KernelChoice choice) { return choice == KernelChoice::kOwn ? "own" : "all"; }

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
  s.loaded = false;
}

std::string tune_cache_path() {
  TunerState& s = state();
  const std::lock_guard lock(s.mutex);
  return s.path;
}

int choose_fastest(const std::string& key, const std::vector<std::string>& candidates,
                   const std::function<double(int)>& time_ms) {
  HD_ASSERT(!candidates.empty());
  if (candidates.size() == 1) return 0;
  TunerState& s = state();
  {
    const std::lock_guard lock(s.mutex);
    if (!s.loaded) s.load_locked();
    if (const auto it = s.choices.find(key); it != s.choices.end()) {
      for (size_t i = 0; i < candidates.size(); ++i)
        if (candidates[i] == it->second) return int(i);
    }
  }
  // Timed outside the lock: the candidates launch kernels and wait for them.
  int best = -1;
  double best_ms = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double ms = time_ms(int(i));
    if (ms >= 0.0 && (best < 0 || ms < best_ms)) best = int(i), best_ms = ms;
  }
  HD_CHECK_KIND(best >= 0, ErrorKind::kUnsupported, "autotuner: no candidate kernel can run ", key);
  const std::lock_guard lock(s.mutex);
  s.choices[key] = candidates[size_t(best)];
  if (!s.path.empty()) {
    // A cache that cannot be written only costs the timing again next run: never an error.
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(s.path).parent_path(), ignored);
    std::ofstream out(s.path, std::ios::app);
    if (out) out << key << '\t' << candidates[size_t(best)] << '\t' << best_ms << '\n';
  }
  return best;
}

}  // namespace hd::ops
