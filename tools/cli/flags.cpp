#include "tools/cli/flags.h"

#include <algorithm>
#include <array>

#include "ops/ops.h"
#include "tools/cli/commands.h"

namespace hd::cli {

Flags::Flags(std::string_view command, std::span<const std::string_view> args, const std::vector<std::string>& valued,
             const std::vector<std::string>& switches) {
  const std::string name(command);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string flag(args[i]);
    const bool is_switch = std::find(switches.begin(), switches.end(), flag) != switches.end();
    if (!is_switch && std::find(valued.begin(), valued.end(), flag) == valued.end())
      throw UsageError{name + ": unknown argument '" + flag + "'"};
    if (is_switch) {
      values_[flag] = "";
      continue;
    }
    if (i + 1 >= args.size()) throw UsageError{name + ": " + flag + " needs a value"};
    values_[flag] = std::string(args[++i]);
  }
}

std::optional<std::string> Flags::get(const std::string& flag) const {
  const auto it = values_.find(flag);
  return it == values_.end() ? std::nullopt : std::optional(it->second);
}

ops::Placement placement_of(const Flags& flags) {
  return ops::Placement::parse(flags.get("--device").value_or("cpu"), flags.get("--dtype").value_or(""));
}

void apply_device_memory_limit(const Flags& flags, const ops::Placement& placement) {
  const auto v = flags.get("--max-device-memory");
  if (!v) return;
  const auto gib = parse_number<float>("--max-device-memory", *v);
  HD_CHECK(placement.device.is_gpu(), "--max-device-memory applies to a GPU (--device cuda:N or hip:N)");
  HD_CHECK(gib > 0.0f && gib <= 65536.0f, "--max-device-memory must be a size in GiB above 0, got ", *v);
  ops::set_device_memory_limit(placement.device, size_t(double(gib) * double(size_t(1) << 30)));
}

ops::KernelChoice apply_kernel_choice(const Flags& flags) {
  if (const auto v = flags.get("--kernels")) ops::set_kernel_choice(ops::parse_kernel_choice(*v, "--kernels"));
  return ops::kernel_choice();
}

void apply_tuning(const Flags& flags) {
  if (const auto v = flags.get("--tune")) ops::set_tune_policy(ops::parse_tune_policy(*v, "--tune"));
  (void)ops::tune_policy();  // a bad $HD_TUNE fails here, before any work
  if (const auto v = flags.get("--tune-cache")) ops::set_tune_cache_path(*v);
}

const std::vector<std::string> kMicroConditioningFlags = {
    "--original-size", "--crop-top-left", "--target-size", "--negative-original-size", "--negative-crop-top-left",
    "--negative-target-size", "--aesthetic-score", "--negative-aesthetic-score"};

namespace {

// "AxB" (sep 'x') or "A,B" (sep ','): two non-negative integers, returned as {B, A} (the second first:
// diffusers takes (height, width) and (top, left)).
std::array<int, 2> parse_swapped_pair(const std::string& flag, const std::string& text, char sep, const char* form) {
  const size_t at = text.find(sep);
  HD_CHECK(at != std::string::npos && at > 0 && at + 1 < text.size(), flag, " must be ", form, ", got '", text, "'");
  const std::string first = text.substr(0, at), second = text.substr(at + 1);
  for (const std::string* part : {&first, &second}) {
    HD_CHECK(part->find_first_not_of("0123456789") == std::string::npos && part->size() <= 6, flag, " must be ", form,
             " with whole numbers of pixels, got '", text, "'");
  }
  return {std::stoi(second), std::stoi(first)};
}

}  // namespace

void read_micro_conditioning(const Flags& flags, GenerationParams& p) {
  for (const auto& [prefix, s] : {std::pair{"--", &p.sizes}, {"--negative-", &p.negative_sizes}}) {
    const std::string pre(prefix);
    if (auto v = flags.get(pre + "original-size")) s->original_size = parse_swapped_pair(pre + "original-size", *v, 'x', "WxH");
    if (auto v = flags.get(pre + "crop-top-left")) s->crop_top_left = parse_swapped_pair(pre + "crop-top-left", *v, ',', "X,Y");
    if (auto v = flags.get(pre + "target-size")) s->target_size = parse_swapped_pair(pre + "target-size", *v, 'x', "WxH");
  }
  if (auto v = flags.get("--aesthetic-score")) p.aesthetic_score = parse_number<float>("--aesthetic-score", *v);
  if (auto v = flags.get("--negative-aesthetic-score"))
    p.negative_aesthetic_score = parse_number<float>("--negative-aesthetic-score", *v);
}

VaeTiling vae_tiling_of(const Flags& flags) {
  const bool exact = flags.has("--vae-tiling"), blended = flags.has("--vae-tiling-blended");
  if (exact && blended) throw UsageError{"give --vae-tiling or --vae-tiling-blended, not both"};
  return exact ? VaeTiling::kExact : blended ? VaeTiling::kBlended : VaeTiling::kAuto;
}

}  // namespace hd::cli
