// The autotuner: for each (op, shape, dtype, device) key it times candidate kernels, keeps the fastest,
// and remembers the choice in a cache file so that later runs start without timing anything.
//
// How much a shape's first use measures is the tuning policy. kQuick (the default): only the candidates
// the op marks quick (the vendor library's heuristic pick and our own shape rules' few), each timed
// briefly, so that a first image does not wait for a search. kExhaustive: every candidate, timed fully
// (--tune exhaustive, and `hipdiffusion tune`, which fills the cache ahead of time). A quick run takes
// any cached choice; an exhaustive run takes only exhaustive ones and retunes the rest.
//
// Cache file: one line per choice, "<key>\t<candidate name>\t<milliseconds>" with "\tquick" after a quick
// choice, appended as choices are made (one write each on a file opened for appending, so that processes
// tuning at once do not tear each other's lines); the last line for a key wins. A line whose candidate no
// longer exists (a kernel renamed or removed) is ignored and that key retuned; a torn line is ignored.
// Default location: $HD_TUNE_CACHE, else $XDG_CACHE_HOME/hipdiffusion/tuning.tsv, else
// ~/.cache/hipdiffusion/tuning.tsv; front ends override it (--tune-cache). An empty path keeps the
// choices in memory only.
// (The state lives in autotuner.cpp, so that GPU sources include no standard containers through here.)
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace hd::ops {

std::string default_tune_cache_path();

// Where choices are read from and appended to; forgets what was read from the previous file.
void set_tune_cache_path(std::string path);
std::string tune_cache_path();

enum class TunePolicy { kQuick, kExhaustive };
// "quick" or "exhaustive"; anything else is a kInvalidInput error naming `source`.
TunePolicy parse_tune_policy(std::string_view text, std::string_view source);
void set_tune_policy(TunePolicy policy);
TunePolicy tune_policy();  // starts from $HD_TUNE ("quick" or "exhaustive"; unset: quick)
const char* tune_policy_name(TunePolicy policy);

// How long a candidate is timed: kBrief under the quick policy (a warm-up and one short batch), kFull
// under the exhaustive one (a warm-up and the best of several batches).
enum class TimingEffort { kBrief, kFull };

// The index of the fastest of `candidates` (names unique and stable across runs) for `key`: remembered,
// read from the cache file, or measured now with `time_ms(i, effort)` (the time of one run of candidate
// i in milliseconds; negative when the candidate cannot run this problem). Under the quick policy only
// the candidates `quick` marks are timed (all of them when it marks none, or is empty); when none of
// those can run, the others are tried. Throws when none can run.
int choose_fastest(const std::string& key, const std::vector<std::string>& candidates,
                   const std::function<double(int, TimingEffort)>& time_ms, const std::vector<bool>& quick = {});
// While one lives on this thread, a key with no remembered choice is an error that says `why` instead
// of a measurement: for work being captured into a graph (PyTorch's CUDA graphs, through the extension),
// where timing candidates would synchronise and break the capture. Keys already chosen work as usual.
class NoTuningScope {
 public:
  explicit NoTuningScope(const char* why);
  ~NoTuningScope();
  NoTuningScope(const NoTuningScope&) = delete;
  NoTuningScope& operator=(const NoTuningScope&) = delete;

 private:
  const char* previous_;
};

// Drops the remembered choice for `key` (in this process; the file keeps it until a new line follows):
// for a cached candidate that turns out unable to run here, which the caller then chooses without.
void forget_choice(const std::string& key);
// The same with every candidate quick, timed as `time_ms` does.
int choose_fastest(const std::string& key, const std::vector<std::string>& candidates,
                   const std::function<double(int)>& time_ms);

// What a vendor library's own heuristics answered for a problem (an algorithm; an engine and its knobs),
// kept in the cache file beside the choices so that a later process asks the library nothing for it:
// cuDNN's and cuBLASLt's heuristics cost 1-8 ms per problem, a third of a second over a UNet and its
// VAE, every run. Lines "<key>\t<value>\tnote", appended like choices (the last for a key wins; older
// builds read them as choices for keys no op asks for). The key names the library, its version and the
// device; neither key nor value may hold a tab or a newline.
std::string library_note(const std::string& key);  // empty when none is remembered
void remember_library_note(const std::string& key, const std::string& value);

// What tuning has cost this process: keys tuned (not found in the cache) and the wall-clock time spent
// timing their candidates, library set-up included.
struct TuningStats {
  int keys_tuned = 0;
  double milliseconds = 0.0;
};
TuningStats tuning_stats();

// Which kernels the autotuner may choose from. kAll: our own and the vendor libraries the build has
// (cuDNN, cuBLASLt; hipBLASLt, rocBLAS, MIOpen); kOwn: our own only, what a GPU runs where those libraries
// have no kernel, and the measure of our kernels beside them. The choice is part of every tuning key, so
// both kinds of choices live in one cache. Starts from $HD_KERNELS ("own" or "all"; unset: all); front
// ends override it (--kernels).
enum class KernelChoice { kAll, kOwn };
// "own" or "all"; anything else is a kInvalidInput error naming `source` (a flag, or the variable).
KernelChoice parse_kernel_choice(std::string_view text, std::string_view source);
void set_kernel_choice(KernelChoice choice);
KernelChoice kernel_choice();  // throws kInvalidInput when $HD_KERNELS holds neither word
const char* kernel_choice_name(KernelChoice choice);

}  // namespace hd::ops
