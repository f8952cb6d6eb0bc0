// Finds the weights of a Stable Diffusion model, whichever way it was saved, and groups them by
// component (unet, vae, text_encoder, text_encoder_2):
//   - a diffusers folder: model_index.json, unet/diffusion_pytorch_model[.fp16].safetensors, ...,
//     sharded components through their *.safetensors.index.json;
//   - a single-file LDM checkpoint (original, A1111, ComfyUI): one .safetensors whose tensor names carry
//     the component in a prefix ("model.diffusion_model.", "first_stage_model.", ...);
//   - a single component saved by diffusers (e.g. a bare UNet's diffusion_pytorch_model.safetensors).
// Names are kept as the file has them, minus the component prefix; mapping LDM names to diffusers'
// is the job of the name table, not of this file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace hd {

// A change a LoRA layer makes to a weight: W += scale · up · down, with up [out, rank] and down
// [rank, in] or [rank, in, kh, kw] (a convolution's), read from the LoRA's file.
struct LowRankDelta {
  const SafetensorsFile* file = nullptr;
  const SafetensorsEntry* up = nullptr;
  const SafetensorsEntry* down = nullptr;
  float scale = 1.0f;
};

struct TensorRef {
  std::string name;  // within its component, prefix stripped (and mapped to diffusers' names)
  const SafetensorsFile* file = nullptr;  // both null for a held tensor
  const SafetensorsEntry* entry = nullptr;
  // Rows [first, first + count) of the stored tensor's first dimension, where one stored tensor holds
  // several of diffusers' (OpenCLIP's fused q/k/v projection); count 0 means the whole tensor.
  int64_t first_row = 0, row_count = 0;
  // A matrix stored transposed: OpenCLIP's text_projection, applied as x · P where transformers holds
  // Pᵀ. shape() and WeightReader give it as diffusers holds it.
  bool transposed = false;
  // A tensor in a caller's memory instead of a file (held_component): its dense view in the engine's
  // layout, a convolution kernel (rank 4) as [Cout, kh, kw, Cin].
  std::optional<Tensor> held{};
  // LoRA layers added to the stored weight as it loads (ModelSource::add_lora), in the order given.
  std::vector<LowRankDelta> deltas{};

  // After the row selection and the transposition; a held convolution kernel as diffusers holds it,
  // [Cout, Cin, kh, kw].
  std::vector<int64_t> shape() const;
};

// A LoRA file and how strongly to apply it (A1111's <lora:name:weight>, diffusers' lora_scale), and
// the UNet's apart from the text encoders' where it differs (A1111's <lora:name:te:unet>, diffusers'
// fuse_lora of each component at its own scale).
struct LoraChoice {
  std::string path;
  float scale = 1.0f;                              // the text encoders', and the UNet's without unet_scale
  std::optional<float> unet_scale = std::nullopt;  // the UNet's, when it has its own

  float scale_of(std::string_view component) const {
    return component == "unet" && unet_scale ? *unet_scale : scale;
  }
};

struct ModelComponent {
  std::string name;    // "unet", "vae", "text_encoder", "text_encoder_2", or "other"
  std::string prefix;  // the prefix stripped from a single file's names; empty in a folder
  std::vector<TensorRef> tensors;  // sorted by name
  std::optional<std::string> config_json;  // the component's config.json in a diffusers folder

  const TensorRef* find(std::string_view tensor_name) const;
  // True when the names came from an LDM single file and were mapped (so errors can say so).
  bool mapped_from_ldm = false;
};

// A component whose tensors are in a caller's memory, not in files: the PyTorch extension runs the
// engine on a diffusers pipeline's own weights, shared rather than copied. Each view must be dense, in
// the dtype and on the device where the model computes, a convolution kernel as [Cout, kh, kw, Cin]
// (PyTorch's channels_last memory of [Cout, Cin, kh, kw]); the caller keeps the memory alive while any
// model loaded from the component lives. Throws for a repeated name or a strided view.
// With `ldm_names`, the names are the original (LDM) ones, as ComfyUI's models hold them
// ("input_blocks.1.1.proj_in.weight", "decoder.up.0.block.0.conv1.weight"): mapped through the name table.
ModelComponent held_component(std::string name, std::vector<std::pair<std::string, Tensor>> tensors,
                              std::optional<std::string> config_json, bool ldm_names = false);

enum class ModelLayout { kDiffusersFolder, kSingleFileLdm, kSingleComponent };

class ModelSource {
 public:
  // Throws Error naming the path and the problem: missing path, pickle-only weights, malformed files,
  // a folder with no recognisable component.
  static ModelSource open(const std::string& path);
  // A single file described by a diffusers folder's config files (component config.json, scheduler,
  // tokenizer), as diffusers' from_single_file(config=...) reads them: for models whose weights do not
  // tell everything (attention heads, GroupNorm groups).
  static ModelSource open(const std::string& path, const std::string& config_folder);

  // A VAE on its own, as `generate --vae` takes one (diffusers' vae=AutoencoderKL.from_pretrained(...)):
  // a diffusers VAE folder (config.json and weights), a pipeline folder (its vae/), a file of a VAE alone
  // in diffusers' names or the original (LDM) ones (decoder.up.0.block.0...), or a whole single-file
  // checkpoint (its first_stage_model). The result has one component, "vae"; `config_json` describes it
  // when it has no config.json of its own (a lone file: the model's VAE config, whose latent space it joins).
  static ModelSource open_vae(const std::string& path, const std::optional<std::string>& config_json);
  // Adds a LoRA's layers (io/lora.h) to the weights they change, scaled by `lora.scale`: loading a
  // component afterwards gives the changed weights. Throws naming the file and the layer when any layer
  // does not apply, leaving the weights as they were.
  void add_lora(const LoraChoice& lora);
  // A LoRA file as add_lora opens it (then lora_layers(file, components()) maps it): a missing file, a
  // pickle or anything but safetensors is an Error naming it.
  static SafetensorsFile open_lora(const std::string& path);
  // The LoRAs added, in order.
  const std::vector<LoraChoice>& loras() const { return loras_; }
  // Gives `component` this config.json text when it has none (a single file's family defaults).
  void default_config(std::string_view component, const std::string& config_json);

  ModelLayout layout() const { return layout_; }
  const std::string& path() const { return path_; }
  const std::vector<ModelComponent>& components() const { return components_; }
  const ModelComponent* component(std::string_view name) const;
  // The elements of the weights a pipeline loads (its text encoders, UNet and VAE; not the tensors a
  // single file holds beside them, such as EMA copies): what a loaded model's weights take, times the
  // placement's element size.
  int64_t weight_elements() const;
  // Every distinct file that was opened.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  // Text of scheduler/scheduler_config.json and other side files of a diffusers folder, when present.
  const std::optional<std::string>& scheduler_config() const { return scheduler_config_; }
  // Text of a diffusers folder's model_index.json (the pipeline's own settings), when present.
  const std::optional<std::string>& model_index() const { return model_index_; }
  // Each tokenizer folder and its files, e.g. "tokenizer/ (vocab.json + merges.txt), tokenizer_2/
  // (tokenizer.json)"; empty when the folder has neither.
  const std::string& tokenizer_files() const { return tokenizer_files_; }
  // The folder whose tokenizer/ and configs describe the model: the model's own folder, or the config
  // folder a single file was opened with; empty for a lone single file.
  const std::string& config_folder() const { return config_folder_; }

 private:
  void read_side_files(const std::string& folder);
  void open_folder();
  void open_single_file();
  const SafetensorsFile& add_file(const std::string& path);

  std::string path_;
  ModelLayout layout_ = ModelLayout::kSingleFileLdm;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<ModelComponent> components_;
  std::optional<std::string> scheduler_config_;
  std::optional<std::string> model_index_;
  std::string tokenizer_files_;
  std::string config_folder_;
  std::vector<LoraChoice> loras_;
};

std::string_view layout_name(ModelLayout layout);

}  // namespace hd
