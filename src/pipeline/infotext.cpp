#include "pipeline/infotext.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace hd {

std::string a1111_sampler_name(SamplerKind kind) {
  switch (kind) {
    case SamplerKind::kEuler:
      return "Euler";
    case SamplerKind::kEulerAncestral:
      return "Euler a";
    case SamplerKind::kDdim:
      return "DDIM";
    case SamplerKind::kDpmpp2m:
      return "DPM++ 2M";
  }
  return "?";
}

namespace {

struct SamplerName {
  const char* name;
  std::vector<std::string> aliases;
  SamplerKind kind;
  std::optional<SigmaSchedule> schedule;
};

// A1111's names and aliases (modules/sd_samplers_kdiffusion.py, sd_samplers_timesteps.py) of the samplers
// the engine has, with the older names that carried the schedule.
const std::vector<SamplerName>& sampler_names() {
  static const std::vector<SamplerName> names = {
      {"Euler", {"k_euler", "euler"}, SamplerKind::kEuler, std::nullopt},
      {"Euler a", {"k_euler_a", "k_euler_ancestral", "euler_a"}, SamplerKind::kEulerAncestral, std::nullopt},
      {"DPM++ 2M", {"k_dpmpp_2m", "dpmpp_2m"}, SamplerKind::kDpmpp2m, std::nullopt},
      {"DDIM", {"ddim"}, SamplerKind::kDdim, std::nullopt},
      {"DPM++ 2M Karras", {"k_dpmpp_2m_ka"}, SamplerKind::kDpmpp2m, SigmaSchedule::kKarras},
      {"Euler Karras", {}, SamplerKind::kEuler, SigmaSchedule::kKarras},
  };
  return names;
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

A1111Sampler parse_a1111_sampler(std::string_view name) {
  for (const SamplerName& s : sampler_names()) {
    bool match = same_name(name, s.name);
    for (const std::string& alias : s.aliases) match = match || same_name(name, alias);
    if (match) return {s.kind, s.schedule};
  }
  std::string known;
  for (const SamplerName& s : sampler_names()) known += (known.empty() ? "" : ", ") + std::string(s.name);
  throw Error(ErrorKind::kInvalidInput,
              str_cat("unknown sampler \"", name, "\" (this engine has: ", known, ")"));
}

std::vector<std::string> a1111_sampler_names() {
  std::vector<std::string> out;
  for (const SamplerName& s : sampler_names())
    if (!s.schedule) out.push_back(s.name);
  return out;
}

std::string a1111_schedule_name(SigmaSchedule schedule) {
  return schedule == SigmaSchedule::kKarras ? "Karras" : "Automatic";
}

SigmaSchedule parse_a1111_schedule(std::string_view name) {
  if (same_name(name, "automatic")) return SigmaSchedule::kDiscrete;
  if (same_name(name, "karras")) return SigmaSchedule::kKarras;
  throw Error(ErrorKind::kInvalidInput,
              str_cat("unknown scheduler \"", name, "\" (this engine has: Automatic, Karras)"));
}

namespace {

// The fewest significant digits that read back as the same float: 9 always do.
std::string shortest(float value) {
  char text[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, double(value));
    if (std::strtof(text, nullptr) == value) break;
  }
  return text;
}

}  // namespace

std::string lora_tag(std::string_view name, float scale, std::optional<float> unet_scale) {
  const bool apart = unet_scale && *unet_scale != scale;
  return str_cat("<lora:", name, ":", shortest(scale), apart ? ":" + shortest(*unet_scale) : "", ">");
}

std::string lora_tag(const LoraChoice& lora) {
  return lora_tag(std::filesystem::path(lora.path).stem().string(), lora.scale, lora.unet_scale);
}

std::string infotext(const GenerationParams& p, const std::string& model,
                     const std::optional<InfotextRefiner>& refiner, std::span<const LoraChoice> loras) {
  std::string s = p.prompt;
  for (const LoraChoice& lora : loras) s += " " + lora_tag(lora);
  s += "\n";
  if (!p.negative_prompt.empty()) s += "Negative prompt: " + p.negative_prompt + "\n";
  const std::string denoise = p.strength < 1.0f ? str_cat(", Denoising strength: ", p.strength) : "";
  char cfg[32];
  std::snprintf(cfg, sizeof cfg, "%g", double(p.cfg_scale));
  s += str_cat("Steps: ", p.steps, ", Sampler: ", a1111_sampler_name(p.sampler),
               ", Schedule type: ", a1111_schedule_name(p.schedule), ", CFG scale: ", cfg, ", Seed: ", p.seed,
               ", Size: ", p.width, "x", p.height, ", Model: ", model, denoise);
  // SDXL's size conditioning, when given, in the flags' own forms (A1111 has no keys for them).
  for (const auto& [prefix, c] : {std::pair{"", &p.sizes}, {"Negative ", &p.negative_sizes}}) {
    if (c->original_size)
      s += str_cat(", ", prefix, "original size: ", (*c->original_size)[1], "x", (*c->original_size)[0]);
    if (c->crop_top_left)
      s += str_cat(", ", prefix, "crop top-left: ", (*c->crop_top_left)[1], ",", (*c->crop_top_left)[0]);
    if (c->target_size)
      s += str_cat(", ", prefix, "target size: ", (*c->target_size)[1], "x", (*c->target_size)[0]);
  }
  if (p.aesthetic_score) s += str_cat(", Aesthetic score: ", *p.aesthetic_score);
  if (p.negative_aesthetic_score) s += str_cat(", Negative aesthetic score: ", *p.negative_aesthetic_score);
  // A1111's own keys for SDXL's refiner.
  if (refiner) s += str_cat(", Refiner: ", refiner->path, ", Refiner switch at: ", refiner->switch_at);
  return s;
}

}  // namespace hd
