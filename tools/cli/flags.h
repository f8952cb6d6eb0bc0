// The flags of a subcommand: "--name value" pairs and switches ("--json"); a flag given again overrides
// (so that scripts can append to a base command line). Anything else is a usage error that names it.
// Numbers are parsed whole or refused with the flag named.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/placement.h"
#include "ops/tuning/autotuner.h"
#include "pipeline/stable_diffusion.h"

namespace hd::cli {

class Flags {
 public:
  Flags(std::string_view command, std::span<const std::string_view> args, const std::vector<std::string>& valued,
        const std::vector<std::string>& switches = {});
  std::optional<std::string> get(const std::string& flag) const;
  bool has(const std::string& flag) const { return values_.count(flag) != 0; }

 private:
  std::map<std::string, std::string> values_;  // a switch maps to ""
};

// --device cpu|cuda:N|hip:N and --dtype f32|f16|bf16: the CPU in f32 by default, a GPU in f16. Validated.
ops::Placement placement_of(const Flags& flags);
// --max-device-memory GIB: caps what hipDiffusion holds on the placement's GPU (ops::set_device_memory_limit),
// so that a smaller card's budget can be kept (the VAE then decodes in tiles when it must). Validated.
void apply_device_memory_limit(const Flags& flags, const ops::Placement& placement);
// --kernels own|fragments|all: which kernels the autotuner may choose from (ops::set_kernel_choice);
// without it $HD_KERNELS, else all. Validated (the variable too), and returned.
ops::KernelChoice apply_kernel_choice(const Flags& flags);
// --tune quick|exhaustive (ops::set_tune_policy; without it $HD_TUNE, else quick) and --tune-cache PATH
// (ops::set_tune_cache_path). Validated.
void apply_tuning(const Flags& flags);
// SDXL's micro-conditioning: --original-size WxH, --crop-top-left X,Y (pixels from the left, from the
// top), --target-size WxH, and the same with --negative-; the refiner's --aesthetic-score and
// --negative-aesthetic-score. Parsed (not validated against each other or the model: the pipeline does
// that) into (height, width) and (top, left) as diffusers takes them.
void read_micro_conditioning(const Flags& flags, GenerationParams& p);
// The flags read_micro_conditioning reads.
extern const std::vector<std::string> kMicroConditioningFlags;

// --vae-tiling (exact tiles) or --vae-tiling-blended (diffusers' tiles), not both; kAuto without either.
VaeTiling vae_tiling_of(const Flags& flags);

template <typename T>
T parse_number(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    T value;
    if constexpr (std::is_same_v<T, float>) {
      value = std::stof(text, &used);
    } else if constexpr (std::is_same_v<T, double>) {
      value = std::stod(text, &used);
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      HD_CHECK(!text.empty() && text[0] != '-', flag, " must be a non-negative integer, got '", text, "'");
      value = std::stoull(text, &used);
    } else {
      value = T(std::stoll(text, &used));
    }
    HD_CHECK(used == text.size(), flag, ": '", text, "' is not a number");
    return value;
  } catch (const std::logic_error&) {
    throw Error(ErrorKind::kInvalidInput, str_cat(flag, ": '", text, "' is not a number"));
  }
}

}  // namespace hd::cli
