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

#include "io/safetensors.h"

namespace hd {

struct TensorRef {
  std::string name;  // within its component, prefix stripped
  const SafetensorsFile* file;
  const SafetensorsEntry* entry;
};

struct ModelComponent {
  std::string name;    // "unet", "vae", "text_encoder", "text_encoder_2", or "other"
  std::string prefix;  // the prefix stripped from a single file's names; empty in a folder
  std::vector<TensorRef> tensors;  // sorted by name
  std::optional<std::string> config_json;  // the component's config.json in a diffusers folder

  const TensorRef* find(std::string_view tensor_name) const;
};

enum class ModelLayout { kDiffusersFolder, kSingleFileLdm, kSingleComponent };

class ModelSource {
 public:
  // Throws Error naming the path and the problem: missing path, pickle-only weights, malformed files,
  // a folder with no recognisable component.
  static ModelSource open(const std::string& path);

  ModelLayout layout() const { return layout_; }
  const std::string& path() const { return path_; }
  const std::vector<ModelComponent>& components() const { return components_; }
  const ModelComponent* component(std::string_view name) const;
  // Every distinct file that was opened.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  // Text of scheduler/scheduler_config.json and other side files of a diffusers folder, when present.
  const std::optional<std::string>& scheduler_config() const { return scheduler_config_; }
  // "vocab.json + merges.txt", "tokenizer.json", or empty when the folder has no tokenizer/.
  const std::string& tokenizer_files() const { return tokenizer_files_; }

 private:
  void open_folder();
  void open_single_file();
  const SafetensorsFile& add_file(const std::string& path);

  std::string path_;
  ModelLayout layout_ = ModelLayout::kSingleFileLdm;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<ModelComponent> components_;
  std::optional<std::string> scheduler_config_;
  std::string tokenizer_files_;
};

std::string_view layout_name(ModelLayout layout);

}  // namespace hd
