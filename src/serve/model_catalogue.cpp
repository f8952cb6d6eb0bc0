#include "serve/model_catalogue.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "pipeline/default_model.h"

namespace hd::serve {

namespace {

namespace fs = std::filesystem;

bool is_model(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) return fs::is_regular_file(p / "model_index.json", ec);
  return fs::is_regular_file(p, ec) && p.extension() == ".safetensors";
}

CatalogueEntry entry_of(const fs::path& path) {
  const fs::path clean = path.lexically_normal();
  const fs::path named = clean.has_filename() ? clean : clean.parent_path();  // "dir/" names dir
  return {named.filename().string(), named.stem().string(), clean.string()};
}

}  // namespace

ModelCatalogue ModelCatalogue::from(const std::vector<std::string>& models,
                                    const std::optional<std::string>& models_dir) {
  ModelCatalogue c;
  for (const std::string& m : models) {
    HD_CHECK(is_model(m), m,
             ": not a model (a .safetensors file, or a diffusers folder with model_index.json)");
    c.entries_.push_back(entry_of(m));
  }
  if (models_dir) {
    std::error_code ec;
    HD_CHECK(fs::is_directory(*models_dir, ec), *models_dir, ": the models folder does not exist");
    std::vector<CatalogueEntry> found;
    for (const auto& item : fs::directory_iterator(*models_dir, ec))
      if (is_model(item.path())) found.push_back(entry_of(item.path()));
    HD_CHECK_KIND(!ec, ErrorKind::kRuntime, *models_dir, ": cannot list the models folder: ", ec.message());
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    c.entries_.insert(c.entries_.end(), found.begin(), found.end());
  }
  if (c.entries_.empty()) c.entries_.push_back(entry_of(default_model_folder()));
  for (size_t i = 0; i < c.entries_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      HD_CHECK(c.entries_[i].name != c.entries_[j].name, "two models are named ", c.entries_[i].name, ": ",
               c.entries_[j].path, " and ", c.entries_[i].path, " (requests choose models by name)");
  return c;
}

const CatalogueEntry& ModelCatalogue::find(const std::string& name) const {
  // A1111's titles carry the checkpoint's short hash after the name: "v1-5.safetensors [6ce0161689]".
  const size_t bracket = name.find(" [");
  const std::string key = bracket != std::string::npos && name.back() == ']' ? name.substr(0, bracket) : name;
  for (const CatalogueEntry& e : entries_)
    if (key == e.name || key == e.stem) return e;
  std::string names;
  for (const CatalogueEntry& e : entries_) names += (names.empty() ? "" : ", ") + e.name;
  throw Error(ErrorKind::kInvalidInput,
              str_cat("no model named \"", name, "\" (this server has: ", names, ")"));
}

}  // namespace hd::serve
