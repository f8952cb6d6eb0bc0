// LoRA files: low-rank changes to a model's weights (W += scale · up · down), in the forms kohya's
// sd-scripts and diffusers save them (the files AUTOMATIC1111 and ComfyUI load). This file says which weight
// of which component each layer of a file changes; ModelSource::add_lora attaches them and WeightReader adds
// them as it loads.
//
// Layer names read (each with its weights "X.lora_down.weight" + "X.lora_up.weight" and an optional
// "X.alpha", or PEFT's "X.lora_A.weight" + "X.lora_B.weight"):
//   - kohya: "lora_unet_<module>" with the module's diffusers name, its dots as underscores (SD1.x/2.x:
//     "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q"), or its original (LDM)
//     name likewise (SDXL: "lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q");
//     "lora_te_" / "lora_te1_" the (first) text encoder, "lora_te2_" SDXL's second, in transformers'
//     names ("lora_te_text_model_encoder_layers_0_self_attn_q_proj"). 3x3 convolutions too (LoCon).
//   - diffusers / PEFT: "unet.<module>", "text_encoder.<module>", "text_encoder_2.<module>" in diffusers'
//     names; diffusers' older "unet.<attention>.processor.to_q_lora.down.weight" as well.
// Other prefixes (ComfyUI's own "diffusion_model.", diffusers' unprefixed oldest form) are refused by name.
// The scale of a layer is alpha / rank (1 without alpha), times the user's.
// Every other kind of layer (LoHa, LoKr, DoRA, a lora_mid, whole-weight diffs) and every name that
// matches no weight of the model is refused with the file and the name, never skipped: a LoRA applied
// in part draws a picture no other program would.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_source.h"
#include "io/safetensors.h"

namespace hd {

// "FILE", "FILE:SCALE" or "FILE:TE_SCALE:UNET_SCALE" (finite numbers; the last ':' followed by a
// number splits them off, as the one before that does).
LoraChoice parse_lora_choice(std::string_view text);
// Several, separated by commas: "a.safetensors:0.8,b.safetensors".
std::vector<LoraChoice> parse_lora_list(std::string_view text);

struct LoraLayer {
  std::string key;        // the layer's name in the file, for messages
  std::string component;  // "unet", "text_encoder" or "text_encoder_2"
  std::string tensor;     // the weight it changes, in diffusers' names ("...attn1.to_q.weight")
  const SafetensorsEntry* up = nullptr;    // [out, rank] or [out, rank, 1, 1]
  const SafetensorsEntry* down = nullptr;  // [rank, in] or [rank, in, kh, kw]
  float scale = 1.0f;                      // alpha / rank
};

// The layers of `file` mapped onto `components` (a model's, their names in diffusers' form), each
// checked against the weight it changes. Throws naming the file and the layer otherwise.
std::vector<LoraLayer> lora_layers(const SafetensorsFile& file, std::span<const ModelComponent> components);

}  // namespace hd
