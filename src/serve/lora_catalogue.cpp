#include "serve/lora_catalogue.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.h"

namespace hd::serve {

namespace fs = std::filesystem;

LoraCatalogue LoraCatalogue::from(const std::optional<std::string>& folder) {
  LoraCatalogue c;
  if (!folder) return c;
  std::error_code ec;
  HD_CHECK(fs::is_directory(*folder, ec), *folder, ": the LoRA folder does not exist");
  for (const auto& item : fs::directory_iterator(*folder, ec)) {
    const fs::path& p = item.path();
    std::error_code entry_ec;  // a broken link is left out, not the listing's failure
    if (p.extension() != ".safetensors" || !fs::is_regular_file(p, entry_ec)) continue;
    const std::string name = p.stem().string();
    // A1111's tags split on ':' and end at '>': such a name could not be asked for, and would make
    // two settings one tag (<lora:a:1:2> is "a:1" at 2 and "a" at 1 and 2), which the engine keys models by.
    if (name.find_first_of(":<>") != std::string::npos) {
      std::fprintf(
          stderr,
          "warning: %s is left out of the LoRAs: a <lora:NAME> tag cannot name it (':', '<' or '>')\n",
          p.string().c_str());
      continue;
    }
    c.entries_.push_back({name, p.lexically_normal().string()});
  }
  HD_CHECK_KIND(!ec, ErrorKind::kRuntime, *folder, ": cannot list the LoRA folder: ", ec.message());
  std::sort(c.entries_.begin(), c.entries_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return c;
}

const LoraEntry& LoraCatalogue::find(const std::string& name) const {
  for (const LoraEntry& e : entries_)
    if (e.name == name) return e;
  HD_CHECK(!entries_.empty(), "no LoRA named \"", name,
           "\": this server has no LoRA files (serve --lora-dir DIR)");
  std::string names;
  for (const LoraEntry& e : entries_) names += (names.empty() ? "" : ", ") + e.name;
  throw Error(ErrorKind::kInvalidInput,
              str_cat("no LoRA named \"", name, "\" (this server has: ", names, ")"));
}

}  // namespace hd::serve
