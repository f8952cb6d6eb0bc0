// The models a serving engine may load: the paths it was started with (--model, --models-dir), named
// once at start. Requests name a model; no path in a request reaches the file system.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hd::serve {

struct CatalogueEntry {
  std::string name;  // what requests use: the file name (v1-5.safetensors) or the folder's name
  std::string stem;  // the name without its extension (A1111's model_name)
  std::string path;  // a diffusers folder or a single .safetensors file
};

class ModelCatalogue {
 public:
  // `models`: paths given one by one (each must exist); `models_dir`: a folder whose *.safetensors files
  // and diffusers folders (holding model_index.json) are listed, one level deep, sorted by name. A name
  // given twice is an error naming both paths. With neither, the built-in default model alone.
  static ModelCatalogue from(const std::vector<std::string>& models,
                             const std::optional<std::string>& models_dir);

  const std::vector<CatalogueEntry>& entries() const { return entries_; }
  // The entry a request's name means: its name, its stem, or A1111's title ("NAME [hash]", the hash
  // ignored). Throws an Error (kInvalidInput) listing the names otherwise.
  const CatalogueEntry& find(const std::string& name) const;
  const CatalogueEntry& first() const { return entries_.front(); }

 private:
  std::vector<CatalogueEntry> entries_;
};

}  // namespace hd::serve
