#include "io/model_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "io/checkpoint_format.h"
#include "io/ldm_names.h"
#include "io/lora.h"

namespace hd {

namespace fs = std::filesystem;

namespace {

// Component prefixes of single-file LDM checkpoints (SD1.x/2.x: cond_stage_model; SDXL: conditioner).
struct LdmPrefix {
  std::string_view prefix;
  std::string_view component;
};
constexpr LdmPrefix kLdmPrefixes[] = {
    {"model.diffusion_model.", "unet"},
    {"first_stage_model.", "vae"},
    {"cond_stage_model.", "text_encoder"},
    {"conditioner.embedders.0.", "text_encoder"},
    {"conditioner.embedders.1.", "text_encoder_2"},
};

// Components of a diffusers folder that hold weights, in pipeline order.
constexpr std::string_view kFolderComponents[] = {"text_encoder", "text_encoder_2", "unet", "vae"};

std::string read_text_file(const fs::path& p, size_t limit = 16u << 20) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  HD_CHECK(!ec, p.string(), ": cannot read: ", ec.message());
  HD_CHECK(size <= limit, p.string(), ": ", size, " bytes is larger than expected for this file");
  std::ifstream in(p, std::ios::binary);
  HD_CHECK(in.good(), p.string(), ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<uint8_t> read_prefix(const fs::path& p, size_t n) {
  std::ifstream in(p, std::ios::binary);
  std::vector<uint8_t> b(n);
  in.read(reinterpret_cast<char*>(b.data()), std::streamsize(n));
  b.resize(size_t(in.gcount()));
  return b;
}

void sort_tensors(ModelComponent& c) {
  std::sort(c.tensors.begin(), c.tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
}

// Weight files of one diffusers component folder: a single file, or the shards its index names.
std::vector<fs::path> component_weight_files(const fs::path& dir) {
  for (const char* base : {"diffusion_pytorch_model", "model"}) {
    for (const char* variant : {"", ".fp16"}) {
      const fs::path single = dir / (std::string(base) + variant + ".safetensors");
      if (fs::is_regular_file(single)) return {single};
      const fs::path index = dir / (std::string(base) + variant + ".safetensors.index.json");
      if (!fs::is_regular_file(index)) continue;
      nlohmann::json j = nlohmann::json::parse(read_text_file(index), nullptr, false);
      HD_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index.string(),
               ": malformed shard index (no weight_map object)");
      std::set<std::string> shards;
      for (const auto& [tensor, file] : j["weight_map"].items()) {
        HD_CHECK(file.is_string(), index.string(), ": weight_map entry '", tensor, "' is not a file name");
        const std::string name = file.get<std::string>();
        HD_CHECK(name.find('/') == std::string::npos && name != ".." && !name.empty(), index.string(),
                 ": shard name '", name, "' must be a plain file name");
        shards.insert(name);
      }
      std::vector<fs::path> out;
      for (const auto& s : shards) out.push_back(dir / s);
      return out;
    }
  }
  for (const char* pickle : {"diffusion_pytorch_model.bin", "pytorch_model.bin", "diffusion_pytorch_model.fp16.bin",
                             "pytorch_model.fp16.bin"}) {
    const fs::path p = dir / pickle;
    if (fs::is_regular_file(p)) require_safetensors(p.string(), sniff_checkpoint_format(read_prefix(p, 16)));
  }
  return {};
}

}  // namespace

std::vector<int64_t> TensorRef::shape() const {
  if (held) {
    const Shape& h = held->shape;
    if (h.rank() == 4) return {h[0], h[3], h[1], h[2]};
    return std::vector<int64_t>(h.begin(), h.end());
  }
  std::vector<int64_t> s = entry->shape;
  if (row_count > 0 && !s.empty()) s[0] = row_count;
  if (transposed && s.size() == 2) std::swap(s[0], s[1]);
  return s;
}

const TensorRef* ModelComponent::find(std::string_view tensor_name) const {
  const auto it = std::lower_bound(tensors.begin(), tensors.end(), tensor_name,
                                   [](const TensorRef& t, std::string_view n) { return t.name < n; });
  return it != tensors.end() && it->name == tensor_name ? &*it : nullptr;
}

ModelComponent held_component(std::string name, std::vector<std::pair<std::string, Tensor>> tensors,
                              std::optional<std::string> config_json, bool ldm_names) {
  ModelComponent c;
  c.name = std::move(name);
  c.config_json = std::move(config_json);
  c.tensors.reserve(tensors.size());
  for (auto& [tensor_name, view] : tensors) {
    HD_CHECK(view.is_contiguous(), c.name, ": tensor '", tensor_name, "' (", view.describe(),
             ") is not dense");
    TensorRef t;
    t.name = std::move(tensor_name);
    t.held = view;
    c.tensors.push_back(std::move(t));
  }
  if (ldm_names) {
    c.tensors = ldm_to_diffusers_names(c.name, std::move(c.tensors));
    c.mapped_from_ldm = true;
  }
  std::sort(c.tensors.begin(), c.tensors.end(),
            [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });
  for (size_t i = 1; i < c.tensors.size(); ++i)
    HD_CHECK(c.tensors[i - 1].name != c.tensors[i].name, c.name, ": tensor '", c.tensors[i].name,
             "' given twice");
  return c;
}

ModelSource ModelSource::open(const std::string& path) {
  ModelSource m;
  m.path_ = path;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  HD_CHECK(fs::exists(status), path, ": no such file or directory");
  if (fs::is_directory(status)) {
    m.layout_ = ModelLayout::kDiffusersFolder;
    m.open_folder();
  } else {
    m.open_single_file();
  }
  return m;
}

const ModelComponent* ModelSource::component(std::string_view name) const {
  for (const auto& c : components_)
    if (c.name == name) return &c;
  return nullptr;
}

int64_t ModelSource::weight_elements() const {
  int64_t elements = 0;
  for (std::string_view name : kFolderComponents) {
    const ModelComponent* c = component(name);
    if (c == nullptr) continue;
    for (const TensorRef& t : c->tensors) {
      int64_t n = 1;
      for (const int64_t d : t.shape()) n *= d;
      elements += n;
    }
  }
  return elements;
}

SafetensorsFile ModelSource::open_lora(const std::string& path) {
  std::error_code ec;
  HD_CHECK(fs::is_regular_file(path, ec), path, ": no such LoRA file");
  require_safetensors(path, sniff_checkpoint_format(read_prefix(path, 16)));
  return SafetensorsFile::open(path);
}

void ModelSource::add_lora(const LoraChoice& lora) {
  auto file = std::make_unique<SafetensorsFile>(open_lora(lora.path));
  // Every layer is checked before any weight is changed.
  const std::vector<LoraLayer> layers = lora_layers(*file, components_);
  files_.reserve(files_.size() + 1);  // the push below cannot fail once deltas point into the file
  for (const LoraLayer& layer : layers) {
    for (ModelComponent& c : components_) {
      if (c.name != layer.component) continue;
      const auto t = std::lower_bound(c.tensors.begin(), c.tensors.end(), layer.tensor,
                                      [](const TensorRef& a, const std::string& n) { return a.name < n; });
      t->deltas.push_back({file.get(), layer.up, layer.down, layer.scale * lora.scale_of(layer.component)});
    }
  }
  files_.push_back(std::move(file));
  loras_.push_back(lora);
}

const SafetensorsFile& ModelSource::add_file(const std::string& path) {
  files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(path)));
  return *files_.back();
}

void ModelSource::open_folder() {
  const fs::path root(path_);
  for (std::string_view name : kFolderComponents) {
    const fs::path dir = root / name;
    if (!fs::is_directory(dir)) continue;
    const auto weight_files = component_weight_files(dir);
    if (weight_files.empty()) continue;
    ModelComponent c;
    c.name = std::string(name);
    std::set<std::string> seen;
    for (const auto& f : weight_files) {
      const SafetensorsFile& st = add_file(f.string());
      for (const auto& e : st.entries()) {
        HD_CHECK(seen.insert(e.name).second, f.string(), ": tensor '", e.name, "' also appears in another shard");
        c.tensors.push_back({e.name, &st, &e});
      }
    }
    sort_tensors(c);
    components_.push_back(std::move(c));
  }
  HD_CHECK(!components_.empty(), path_,
           ": not a diffusers model folder (no unet/, vae/ or text_encoder/ holding safetensors weights)");
  read_side_files(path_);
}

void ModelSource::read_side_files(const std::string& folder) {
  const fs::path root(folder);
  config_folder_ = folder;
  for (auto& c : components_) {
    if (const fs::path p = root / c.name / "config.json"; fs::is_regular_file(p)) c.config_json = read_text_file(p);
  }
  if (const fs::path p = root / "scheduler" / "scheduler_config.json"; fs::is_regular_file(p)) {
    scheduler_config_ = read_text_file(p);
  }
  if (const fs::path p = root / "model_index.json"; fs::is_regular_file(p)) model_index_ = read_text_file(p);
  for (const char* tokenizer : {"tokenizer", "tokenizer_2"}) {
    const fs::path dir = root / tokenizer;
    const char* files = fs::is_regular_file(dir / "vocab.json") && fs::is_regular_file(dir / "merges.txt")
                            ? "vocab.json + merges.txt"
                        : fs::is_regular_file(dir / "tokenizer.json") ? "tokenizer.json"
                                                                       : nullptr;
    if (files) tokenizer_files_ += str_cat(tokenizer_files_.empty() ? "" : ", ", tokenizer, "/ (", files, ")");
  }
}

ModelSource ModelSource::open(const std::string& path, const std::string& config_folder) {
  ModelSource m = open(path);
  HD_CHECK(m.layout() != ModelLayout::kDiffusersFolder, path, ": --config applies to single-file checkpoints only");
  HD_CHECK(fs::is_directory(config_folder), config_folder, ": not a folder (expected a diffusers model folder)");
  m.read_side_files(config_folder);
  return m;
}

ModelSource ModelSource::open_vae(const std::string& path, const std::optional<std::string>& config_json) {
  std::error_code ec;
  HD_CHECK(fs::exists(path, ec), path, ": no such file or directory");
  ModelSource m;
  m.path_ = path;
  const fs::path dir(path);
  if (fs::is_directory(dir) && !fs::is_directory(dir / "vae")) {
    // A VAE's own folder: its weights and config.json at the top.
    m.layout_ = ModelLayout::kDiffusersFolder;
    const auto weight_files = component_weight_files(dir);
    HD_CHECK(!weight_files.empty(), path, ": no VAE weights here (diffusion_pytorch_model[.fp16].safetensors, or a ",
             "pipeline folder with vae/)");
    ModelComponent c;
    c.name = "vae";
    for (const auto& f : weight_files) {
      const SafetensorsFile& st = m.add_file(f.string());
      for (const auto& e : st.entries()) c.tensors.push_back({e.name, &st, &e});
    }
    sort_tensors(c);
    HD_CHECK(c.find("decoder.conv_in.weight") != nullptr || c.find("encoder.conv_in.weight") != nullptr, path,
             ": the weights here are not a VAE's (no decoder.conv_in or encoder.conv_in)");
    if (const fs::path p = dir / "config.json"; fs::is_regular_file(p)) c.config_json = read_text_file(p);
    m.components_.push_back(std::move(c));
  } else {
    m = open(path);
  }
  std::erase_if(m.components_, [](const ModelComponent& c) { return c.name != "vae"; });
  HD_CHECK(!m.components_.empty(), path, ": holds no VAE (no encoder or decoder weights)");
  if (!m.components_[0].config_json) m.components_[0].config_json = config_json;
  return m;
}

void ModelSource::default_config(std::string_view component, const std::string& config_json) {
  for (auto& c : components_) {
    if (c.name == component && !c.config_json) c.config_json = config_json;
  }
}

void ModelSource::open_single_file() {
  require_safetensors(path_, sniff_checkpoint_format(read_prefix(path_, 16)));
  const SafetensorsFile& st = add_file(path_);

  bool ldm = false;
  for (const auto& e : st.entries()) {
    for (const auto& p : kLdmPrefixes) ldm = ldm || e.name.starts_with(p.prefix);
  }
  if (!ldm) {
    // One component with diffusers' own names; which one is told by a tensor only it has.
    layout_ = ModelLayout::kSingleComponent;
    ModelComponent c;
    if (st.find("time_embedding.linear_1.weight")) {
      c.name = "unet";
    } else if (st.find("decoder.conv_in.weight") || st.find("encoder.conv_in.weight")) {
      c.name = "vae";
    } else if (st.find("text_model.embeddings.token_embedding.weight")) {
      c.name = "text_encoder";
    } else {
      c.name = "other";
    }
    for (const auto& e : st.entries()) c.tensors.push_back({e.name, &st, &e});
    // A VAE file in the original names (stabilityai's sdxl_vae.safetensors, A1111's VAE files) goes
    // through the name table as a checkpoint's first_stage_model does.
    if (c.name == "vae" && (st.find("decoder.mid.block_1.conv1.weight") || st.find("encoder.mid.block_1.conv1.weight"))) {
      c.tensors = ldm_to_diffusers_names(c.name, std::move(c.tensors));
      c.mapped_from_ldm = true;
    }
    sort_tensors(c);
    components_.push_back(std::move(c));
    return;
  }

  layout_ = ModelLayout::kSingleFileLdm;
  std::map<std::string, ModelComponent> by_prefix;
  for (const auto& e : st.entries()) {
    const LdmPrefix* match = nullptr;
    for (const auto& p : kLdmPrefixes)
      if (e.name.starts_with(p.prefix)) match = &p;
    const std::string prefix = match ? std::string(match->prefix) : "";
    auto& c = by_prefix[prefix];
    c.name = match ? std::string(match->component) : "other";
    c.prefix = prefix;
    c.tensors.push_back({e.name.substr(prefix.size()), &st, &e});
  }
  // SDXL's refiner has one embedder, OpenCLIP ViT-bigG (conditioner.embedders.0.model.*): the base's
  // second text encoder, so named. SD-Turbo's files (SD2.1's UNet) put their one OpenCLIP ViT-H there too;
  // it is SD2.x's text_encoder (A1111 renames it to cond_stage_model.). The UNet tells them apart: only
  // SDXL's has the text-time embedding (label_emb).
  const auto first = by_prefix.find("conditioner.embedders.0."), second = by_prefix.find("conditioner.embedders.1.");
  const bool sdxl_unet = st.find("model.diffusion_model.label_emb.0.0.weight") != nullptr;
  if (first != by_prefix.end() && second == by_prefix.end() && sdxl_unet &&
      std::any_of(first->second.tensors.begin(), first->second.tensors.end(),
                  [](const TensorRef& t) { return t.name.starts_with("model."); })) {
    first->second.name = "text_encoder_2";
  }
  for (std::string_view order : {"text_encoder", "text_encoder_2", "unet", "vae", "other"}) {
    for (auto& [prefix, c] : by_prefix) {
      if (c.name != order) continue;
      if (c.name != "other") {
        c.tensors = ldm_to_diffusers_names(c.name, std::move(c.tensors));
        c.mapped_from_ldm = true;
      }
      sort_tensors(c);
      components_.push_back(std::move(c));
    }
  }
}

std::string_view layout_name(ModelLayout layout) {
  switch (layout) {
    case ModelLayout::kDiffusersFolder: return "diffusers folder";
    case ModelLayout::kSingleFileLdm: return "single-file checkpoint (LDM names)";
    case ModelLayout::kSingleComponent: return "single component (diffusers names)";
  }
  return "?";
}

}  // namespace hd
