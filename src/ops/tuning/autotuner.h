// The autotuner: for each (op, shape, dtype, device) key it times the candidate kernels once, keeps the
// fastest, and remembers the choice in a cache file so that later runs start without timing anything.
//
// Cache file: one line per key, "<key>\t<candidate name>\t<milliseconds>", appended as choices are made;
// the last line for a key wins. A line whose candidate no longer exists (a kernel renamed or removed) is
// ignored and that key retuned. Default location: $HD_TUNE_CACHE, else
// $XDG_CACHE_HOME/hipdiffusion/tuning.tsv, else ~/.cache/hipdiffusion/tuning.tsv; front ends override it
// (--tune-cache). An empty path keeps the choices in memory only.
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

// The index of the fastest of `candidates` (names unique and stable across runs) for `key`: remembered,
// read from the cache file, or measured now with `time_ms(i)` (the time of one run of candidate i in
// milliseconds; negative when the candidate cannot run this problem). Throws when none can run.
int choose_fastest(const std::string& key, const std::vector<std::string>& candidates,
                   const std::function<double(int)>& time_ms);

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
