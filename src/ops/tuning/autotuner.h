// The autotuner: for each (op, shape, dtype, device) key it times candidate kernels, keeps the fastest,
// and remembers the choice in a cache file so that later runs start without timing anything.
//
// How much a shape's first use measures is the tuning policy. kQuick (the default): only the candidates
// the op marks quick (the vendor library's heuristic pick and our own shape rules' few), each timed
// briefly, so that a first image does not wait for a search. kExhaustive: every candidate, timed fully
// (--tune exhaustive, and `hipdiffusion tune`, which fills the cache ahead of time). A quick run takes
// any cached choice; an exhaustive run takes only exhaustive ones and retunes the rest.
//
// A shape's first use under the quick policy first looks for a near neighbour: a key of the same family
// (sized_key below: the same op, dtype, channels, kernel and device, another batch or image size) whose
// work is within kNearWorkRatio of this one's and whose choice was measured by an earlier process (read
// from the cache file: within one image the neighbours are the model's other resolution levels, and
// taking their choices made an empty cache's UNet step 4-13% slower in two runs on an H100, where
// quick tuning's own spread is about 5%). Its winner is taken at once, run once to be sure it runs
// here, and tagged "near" (the exhaustive policy retunes it like a quick choice); only without such a
// neighbour, or when its winner is not offered or fails here, are the quick candidates timed
// ($HD_TUNE_NEAR=0: always, as before neighbours were asked). A neighbour more than
// kNearDirectRatio away whose winner is not a vendor library's own pick is raced against those picks
// (`library_picks`): at SD1.5's batch 4 the residual convolutions that our tiles won at batch 1 ran 2x
// faster in cuDNN, which made the UNet step 9% slower than a quick tuning's. A new image size or batch in a
// filled cache then costs one run per shape, not the ten or so timings (and a library's heuristics) of a
// quick tuning: 73-75 new shapes of SD1.5 cost about a second of quick tuning on an H100.
//
// Cache file: one line per choice, "<key>\t<candidate name>\t<milliseconds>" with "\tquick" after a quick
// choice and "\tnear" after a neighbour's, appended as choices are made (one write each on a file opened for
// appending, so that processes tuning at once do not tear each other's lines); the last line for a key wins.
// A line whose candidate no longer exists (a kernel renamed or removed) is ignored and that key retuned; a
// torn line is ignored. Default location: $HD_TUNE_CACHE, else $XDG_CACHE_HOME/hipdiffusion/tuning.tsv, else
// ~/.cache/hipdiffusion/tuning.tsv; front ends override it (--tune-cache). An empty path keeps the
// choices in memory only.
// (The state lives in autotuner.cpp, so that GPU sources include no standard containers through here.)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace hd::ops {

std::string default_tune_cache_path();

// A key whose family and size the quick policy can tell apart: "<family> @ <work> <size>", where `work`
// measures the problem's size (a product's rows times its batch) and `size` says it in full. Keys of one
// family are neighbours; a key built otherwise has none.
std::string sized_key(std::string_view family, int64_t work, std::string_view size);
// How far apart two neighbours' work may be, as the larger over the smaller: SD1.5's batch 4 with CFG is
// 4x the UNet batch of one image with CFG, 1024x1024 4x 512x512.
inline constexpr double kNearWorkRatio = 4.0;
// Up to this far (768x512 from 512x512 is 1.5x) a neighbour's choice is taken alone; beyond it, raced.
inline constexpr double kNearDirectRatio = 2.0;

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
// those can run, the others are tried. `library_picks` marks the vendor libraries' own first picks (a
// far neighbour's rivals, above). Throws when none can run.
int choose_fastest(const std::string& key, const std::vector<std::string>& candidates,
                   const std::function<double(int, TimingEffort)>& time_ms,
                   const std::vector<bool>& quick = {}, const std::vector<bool>& library_picks = {});
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

// Counts the changes that may change a choice already made (a cache file, policy or kernel choice set; a
// choice forgotten): an op that remembers its choices past the tuner (gemm.cu's hot path) drops them
// when it moves.
uint64_t tuning_generation();

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
//
// A sized key (sized_key) without a note of its own gets, under the quick policy, its nearest
// neighbour's that the cache file held when read (`near`: the neighbour's ranking stands in for this
// problem's, saving the heuristics with the timing); a note remembered as near ("\tnote\tnear") keeps a later
// process on the same engines, and the exhaustive policy takes no near note (the library is asked about the
// problem itself).
struct LibraryNote {
  std::string value;  // empty when none is remembered
  bool near = false;  // a neighbour's answer, not this problem's
};
LibraryNote library_note(const std::string& key);
void remember_library_note(const std::string& key, const std::string& value, bool near = false);

// What tuning has cost this process: keys tuned (not found in the cache) and the wall-clock time spent
// timing their candidates, library set-up included.
struct TuningStats {
  int keys_tuned = 0;     // keys chosen now (not found in the cache)
  int keys_borrowed = 0;  // of those, a near neighbour's choice taken (one run each)
  double milliseconds = 0.0;
};
TuningStats tuning_stats();
// What tuning cost since `before` (a snapshot taken earlier): what the front ends report for one image.
TuningStats tuning_since(const TuningStats& before);

// Which kernels the autotuner may choose from. kAll: our own and the vendor libraries the build has
// (cuDNN, cuBLASLt; hipBLASLt, rocBLAS, MIOpen); kOwn: our own only, what a GPU runs where those libraries
// have no kernel, and the measure of our kernels beside them; kFragments: our own on the fragment layer
// only (mma.sync and its kind), leaving out the kernels of one GPU family (Hopper's warpgroup tiles and
// attention): what NVIDIA GPUs before Hopper run, and on a Hopper GPU the measure of the layer AMD's
// matrix-core kernels mirror. The choice is part of every tuning key, so all kinds of choices live in one
// cache. Starts from $HD_KERNELS ("own", "fragments" or "all"; unset: all); front ends override it
// (--kernels).
enum class KernelChoice { kAll, kOwn, kFragments };
// "own", "fragments" or "all"; anything else is a kInvalidInput error naming `source` (a flag, or the
// variable).
KernelChoice parse_kernel_choice(std::string_view text, std::string_view source);
void set_kernel_choice(KernelChoice choice);
KernelChoice kernel_choice();  // throws kInvalidInput when $HD_KERNELS holds none of the words
const char* kernel_choice_name(KernelChoice choice);

}  // namespace hd::ops
