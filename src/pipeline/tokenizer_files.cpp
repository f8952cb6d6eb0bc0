#include "pipeline/tokenizer_files.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace hd {

namespace fs = std::filesystem;

namespace {

bool has_tokenizer_files(const fs::path& dir) {
  return (fs::is_regular_file(dir / "vocab.json") && fs::is_regular_file(dir / "merges.txt")) ||
         fs::is_regular_file(dir / "tokenizer.json");
}

// Hugging Face's cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
std::optional<fs::path> hub_cache() {
  if (const char* p = std::getenv("HF_HUB_CACHE")) return fs::path(p);
  if (const char* p = std::getenv("HF_HOME")) return fs::path(p) / "hub";
  if (const char* home = std::getenv("HOME")) return fs::path(home) / ".cache" / "huggingface" / "hub";
  return std::nullopt;
}

// Snapshot folders of the repositories whose tokenizer a family uses, with the sub-folder to look in.
std::vector<fs::path> cached_candidates(ModelFamily family, const std::string& subfolder) {
  std::vector<fs::path> out;
  const auto cache = hub_cache();
  if (!cache) return out;
  std::vector<std::pair<std::string, std::string>> repos;
  if (family == ModelFamily::kSDXL) {
    repos = {{"models--stabilityai--stable-diffusion-xl-base-1.0", subfolder}};
  } else if (family == ModelFamily::kSD2) {
    repos = {{"models--stabilityai--stable-diffusion-2-1", "tokenizer"},
             {"models--stabilityai--stable-diffusion-2-1-base", "tokenizer"}};
  } else {
    repos = {{"models--openai--clip-vit-large-patch14", ""},
             {"models--stable-diffusion-v1-5--stable-diffusion-v1-5", "tokenizer"},
             {"models--runwayml--stable-diffusion-v1-5", "tokenizer"}};
  }
  for (const auto& [repo, sub] : repos) {
    std::error_code ec;
    const fs::path snapshots = *cache / repo / "snapshots";
    if (!fs::is_directory(snapshots, ec)) continue;
    for (const auto& snapshot : fs::directory_iterator(snapshots, ec)) out.push_back(sub.empty() ? snapshot.path() : snapshot.path() / sub);
  }
  return out;
}

}  // namespace

std::string find_tokenizer_folder(const ModelSource& source, ModelFamily family,
                                  const std::optional<std::string>& vocab_dir, const std::string& subfolder) {
  const std::string& model_path = source.path();
  if (vocab_dir) {
    HD_CHECK(has_tokenizer_files(*vocab_dir), *vocab_dir,
             ": --vocab needs a folder with vocab.json + merges.txt or tokenizer.json");
    return *vocab_dir;
  }
  std::vector<fs::path> candidates;
  const fs::path model(model_path);
  if (!source.config_folder().empty()) candidates.push_back(fs::path(source.config_folder()) / subfolder);
  if (!fs::is_directory(model)) {
    candidates.push_back(model.parent_path() / subfolder);
    candidates.push_back(model.parent_path() / model.stem() / subfolder);
  }
  for (const auto& c : cached_candidates(family, subfolder)) candidates.push_back(c);
  std::string searched;
  for (const auto& c : candidates) {
    if (has_tokenizer_files(c)) return c.string();
    searched += (searched.empty() ? "" : ", ") + c.string();
  }
  throw Error(ErrorKind::kInvalidInput,
              str_cat(model_path, ": no ", subfolder, " found (looked in ", searched.empty() ? "nothing" : searched,
                      " and the Hugging Face cache); pass --vocab DIR, a folder with vocab.json + merges.txt or "
                      "tokenizer.json"));
}

}  // namespace hd
