// AUTOMATIC1111's words for a generation: its generation-parameters text (the "infotext" a PNG carries as
// "parameters", which web UIs read back), and its names of samplers and schedules, which its API's
// clients send. Shared by the CLI's PNGs and the server's A1111 API.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_source.h"
#include "pipeline/generation_params.h"

namespace hd {

// SDXL's refiner as A1111 writes it: the checkpoint and the fraction of the schedule it takes over at.
struct InfotextRefiner {
  std::string path;
  double switch_at = 0.8;
};

// The prompt, "Negative prompt: ..." when there is one, then one line of settings ("Steps: 20, Sampler:
// Euler, Schedule type: Karras, CFG scale: 7, Seed: 1, Size: 512x512, Model: ..."). The model's LoRAs
// follow the prompt as A1111's tags (lora_tag), so that a web UI reading the text back applies them too.
std::string infotext(const GenerationParams& p, const std::string& model,
                     const std::optional<InfotextRefiner>& refiner = std::nullopt,
                     std::span<const LoraChoice> loras = {});
// A1111's prompt tag for a LoRA: "<lora:NAME:SCALE>", NAME the file's name without its folder and
// extension (what A1111 looks it up by in its Lora folder), SCALE in the fewest digits that read back as
// the same float (0.7, not 0.699999988; two scales never share a tag); "<lora:NAME:TE:UNET>" when the
// UNet's scale differs from the text encoders'.
std::string lora_tag(const LoraChoice& lora);
std::string lora_tag(std::string_view name, float scale, std::optional<float> unet_scale = std::nullopt);

// "Euler", "Euler a", "DDIM", "DPM++ 2M".
std::string a1111_sampler_name(SamplerKind kind);
// A sampler by A1111's name or alias ("Euler a", "k_euler_a", "DPM++ 2M Karras", ...), and the schedule
// the name implies, if any ("... Karras" names from before A1111 1.9); an Error listing the names otherwise.
struct A1111Sampler {
  SamplerKind kind;
  std::optional<SigmaSchedule> schedule;
};
A1111Sampler parse_a1111_sampler(std::string_view name);
// A1111's /sdapi/v1/samplers names, in its order.
std::vector<std::string> a1111_sampler_names();
// "Automatic" (the model's own: discrete) or "Karras"; parse takes A1111's names and labels in any case.
std::string a1111_schedule_name(SigmaSchedule schedule);
SigmaSchedule parse_a1111_schedule(std::string_view name);

}  // namespace hd
