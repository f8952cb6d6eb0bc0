#include "io/ldm_names.h"

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <string>

#include "core/error.h"

namespace hd {

namespace {

// Replaces the first `from` with `to` when `name` starts with `from`.
bool replace_prefix(std::string& name, std::string_view from, std::string_view to) {
  if (!name.starts_with(from)) return false;
  name = std::string(to) + name.substr(from.size());
  return true;
}

// LDM ResBlock sub-module names -> diffusers' ResnetBlock2D.
std::string resnet_part(std::string rest) {
  for (const auto& [from, to] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"in_layers.0.", "norm1."}, {"in_layers.2.", "conv1."}, {"out_layers.0.", "norm2."},
           {"out_layers.3.", "conv2."}, {"emb_layers.1.", "time_emb_proj."}, {"skip_connection.", "conv_shortcut."},
           {"nin_shortcut.", "conv_shortcut."}}) {
    if (replace_prefix(rest, from, to)) break;
  }
  return rest;
}

int64_t parse_index(const std::string& s) { return std::stoll(s); }

// ---- UNet ----
std::vector<TensorRef> map_unet(std::vector<TensorRef> tensors) {
  // layers_per_block: the first downsampler sits at input_blocks.{layers_per_block + 1}.0.op
  int64_t layers_per_block = -1;
  static const std::regex op(R"(^input_blocks\.(\d+)\.0\.op\.weight$)");
  for (const auto& t : tensors) {
    std::smatch m;
    if (std::regex_match(t.name, m, op)) {
      const int64_t i = parse_index(m[1]);
      if (layers_per_block < 0 || i - 1 < layers_per_block) layers_per_block = i - 1;
    }
  }
  if (layers_per_block <= 0) return tensors;  // not an SD UNet we know; the loader will say what is missing
  const int64_t per_level = layers_per_block + 1;
  static const std::regex input(R"(^input_blocks\.(\d+)\.(\d+)\.(.*)$)");
  static const std::regex middle(R"(^middle_block\.(\d+)\.(.*)$)");
  static const std::regex output(R"(^output_blocks\.(\d+)\.(\d+)\.(.*)$)");
  for (auto& t : tensors) {
    std::smatch m;
    std::string& n = t.name;
    if (replace_prefix(n, "time_embed.0.", "time_embedding.linear_1.") ||
        replace_prefix(n, "time_embed.2.", "time_embedding.linear_2.") ||
        replace_prefix(n, "label_emb.0.0.", "add_embedding.linear_1.") ||  // SDXL's text-time embedding
        replace_prefix(n, "label_emb.0.2.", "add_embedding.linear_2.") ||
        replace_prefix(n, "input_blocks.0.0.", "conv_in.") || replace_prefix(n, "out.0.", "conv_norm_out.") ||
        replace_prefix(n, "out.2.", "conv_out.")) {
      continue;
    }
    if (std::regex_match(n, m, input)) {
      const int64_t i = parse_index(m[1]), part = parse_index(m[2]);
      const int64_t level = (i - 1) / per_level, layer = (i - 1) % per_level;
      const std::string rest = m[3];
      if (layer == layers_per_block) {
        n = "down_blocks." + std::to_string(level) + ".downsamplers.0.conv." + rest.substr(rest.find('.') + 1);
      } else if (part == 0) {
        n = "down_blocks." + std::to_string(level) + ".resnets." + std::to_string(layer) + "." + resnet_part(rest);
      } else {
        n = "down_blocks." + std::to_string(level) + ".attentions." + std::to_string(layer) + "." + rest;
      }
    } else if (std::regex_match(n, m, middle)) {
      const int64_t part = parse_index(m[1]);
      const std::string rest = m[2];
      n = part == 1 ? "mid_block.attentions.0." + rest
                    : "mid_block.resnets." + std::to_string(part == 0 ? 0 : 1) + "." + resnet_part(rest);
    } else if (std::regex_match(n, m, output)) {
      const int64_t i = parse_index(m[1]), part = parse_index(m[2]);
      const int64_t level = i / per_level, layer = i % per_level;
      const std::string rest = m[3];
      if (part == 0) {
        n = "up_blocks." + std::to_string(level) + ".resnets." + std::to_string(layer) + "." + resnet_part(rest);
      } else if (rest.starts_with("conv.")) {  // Upsample: its only weights are "conv"
        n = "up_blocks." + std::to_string(level) + ".upsamplers.0." + rest;
      } else {
        n = "up_blocks." + std::to_string(level) + ".attentions." + std::to_string(layer) + "." + rest;
      }
    }
  }
  return tensors;
}

// ---- VAE ----
std::vector<TensorRef> map_vae(std::vector<TensorRef> tensors) {
  int64_t levels = 0;
  static const std::regex up_level(R"(^decoder\.up\.(\d+)\..*$)");
  for (const auto& t : tensors) {
    std::smatch m;
    if (std::regex_match(t.name, m, up_level)) levels = std::max(levels, parse_index(m[1]) + 1);
  }
  static const std::regex block(R"(^(encoder|decoder)\.(down|up)\.(\d+)\.block\.(\d+)\.(.*)$)");
  static const std::regex resample(R"(^(encoder|decoder)\.(down|up)\.(\d+)\.(downsample|upsample)\.(.*)$)");
  static const std::regex mid(R"(^(encoder|decoder)\.mid\.(block_1|block_2|attn_1)\.(.*)$)");
  for (auto& t : tensors) {
    std::smatch m;
    std::string& n = t.name;
    if (std::regex_match(n, m, block)) {
      const bool up = m[2] == "up";
      const int64_t level = up ? levels - 1 - parse_index(m[3]) : parse_index(m[3]);  // LDM numbers up levels from the bottom
      n = std::string(m[1]) + (up ? ".up_blocks." : ".down_blocks.") + std::to_string(level) + ".resnets." +
          std::string(m[4]) + "." + resnet_part(m[5]);
    } else if (std::regex_match(n, m, resample)) {
      const bool up = m[2] == "up";
      const int64_t level = up ? levels - 1 - parse_index(m[3]) : parse_index(m[3]);
      n = std::string(m[1]) + (up ? ".up_blocks." : ".down_blocks.") + std::to_string(level) +
          (up ? ".upsamplers.0." : ".downsamplers.0.") + std::string(m[5]);
    } else if (std::regex_match(n, m, mid)) {
      const std::string side = m[1], part = m[2];
      std::string rest = m[3];
      if (part == "attn_1") {
        for (const auto& [from, to] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
                 {"norm.", "group_norm."}, {"q.", "to_q."}, {"k.", "to_k."}, {"v.", "to_v."}, {"proj_out.", "to_out.0."}}) {
          if (replace_prefix(rest, from, to)) break;
        }
        n = side + ".mid_block.attentions.0." + rest;
      } else {
        n = side + ".mid_block.resnets." + (part == "block_1" ? "0." : "1.") + resnet_part(rest);
      }
    } else {
      replace_prefix(n, "encoder.norm_out.", "encoder.conv_norm_out.") || replace_prefix(n, "decoder.norm_out.", "decoder.conv_norm_out.");
    }
  }
  return tensors;
}

// ---- text encoder: OpenCLIP (SD2.x; SDXL's second) -> CLIPTextModel(WithProjection) ----
// `whole`: every layer and the text projection (SDXL reads the penultimate layer and pools after the
// last one); otherwise SD2.x's reading: the last layer dropped, as transformers stores SD2.x's encoder.
std::vector<TensorRef> map_open_clip(std::vector<TensorRef> tensors, bool whole) {
  static const std::regex block(R"(^model\.transformer\.resblocks\.(\d+)\.(.*)$)");
  int64_t layers = 0;
  for (const auto& t : tensors) {
    std::smatch m;
    if (std::regex_match(t.name, m, block)) layers = std::max(layers, parse_index(m[1]) + 1);
  }
  std::vector<TensorRef> out;
  for (const auto& t : tensors) {
    std::smatch m;
    std::string n = t.name;
    if (n == "model.token_embedding.weight") {
      out.push_back(t);
      out.back().name = "text_model.embeddings.token_embedding.weight";
    } else if (n == "model.positional_embedding") {
      out.push_back(t);
      out.back().name = "text_model.embeddings.position_embedding.weight";
    } else if (replace_prefix(n, "model.ln_final.", "text_model.final_layer_norm.")) {
      out.push_back(t);
      out.back().name = n;
    } else if (std::regex_match(n, m, block)) {
      const int64_t i = parse_index(m[1]);
      if (i == layers - 1 && !whole) continue;  // SD2.x conditions on the penultimate layer: the last one is unused
      const std::string layer = "text_model.encoder.layers." + std::to_string(i) + ".";
      std::string rest = m[2];
      if (rest == "attn.in_proj_weight" || rest == "attn.in_proj_bias") {
        const int64_t width = t.entry->shape.at(0) / 3;
        const char* parts[] = {"q_proj", "k_proj", "v_proj"};
        for (int64_t k = 0; k < 3; ++k) {
          TensorRef part = t;
          part.name = layer + "self_attn." + parts[k] + (rest.ends_with("weight") ? ".weight" : ".bias");
          part.first_row = k * width;
          part.row_count = width;
          out.push_back(part);
        }
        continue;
      }
      for (const auto& [from, to] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
               {"ln_1.", "layer_norm1."}, {"ln_2.", "layer_norm2."}, {"attn.out_proj.", "self_attn.out_proj."},
               {"mlp.c_fc.", "mlp.fc1."}, {"mlp.c_proj.", "mlp.fc2."}}) {
        if (replace_prefix(rest, from, to)) break;
      }
      out.push_back(t);
      out.back().name = layer + rest;
    } else if (n == "model.text_projection" && whole) {  // applied as x · P: transformers holds Pᵀ
      out.push_back(t);
      out.back().name = "text_projection.weight";
      out.back().transposed = true;
    } else if (n == "model.text_projection.weight" && whole) {  // some converters write transformers' form
      out.push_back(t);
      out.back().name = "text_projection.weight";
    }
    // SD2.x does not use text_projection; logit_scale belongs to CLIP's image-text head.
  }
  // With both forms, OpenCLIP's is taken, as ComfyUI's loader (which converts the second over the first) does.
  const auto projections = std::count_if(out.begin(), out.end(), [](const TensorRef& r) { return r.name == "text_projection.weight"; });
  if (projections > 1) {
    std::erase_if(out, [](const TensorRef& r) { return r.name == "text_projection.weight" && !r.transposed; });
  }
  return out;
}

}  // namespace

std::vector<TensorRef> ldm_to_diffusers_names(std::string_view component, std::vector<TensorRef> tensors) {
  if (component == "unet") return map_unet(std::move(tensors));
  if (component == "vae") return map_vae(std::move(tensors));
  if (component == "text_encoder" || component == "text_encoder_2") {
    bool open_clip = false;
    for (const auto& t : tensors) open_clip = open_clip || t.name.starts_with("model.transformer.resblocks.");
    if (open_clip) return map_open_clip(std::move(tensors), component == "text_encoder_2");
    // HF's CLIP inside (SD1.x; SDXL's first), as "transformer.text_model.*", or, as some converters
    // (diffusers' own script among them) write it, "transformer.*" without text_model.
    for (auto& t : tensors) {
      if (!replace_prefix(t.name, "transformer.text_model.", "text_model.")) replace_prefix(t.name, "transformer.", "text_model.");
    }
    return tensors;
  }
  return tensors;
}

}  // namespace hd
