// The LoRA files a serving engine may apply: the *.safetensors of one folder (A1111's --lora-dir), named
// by their stem as A1111's <lora:NAME:SCALE> tags name them, listed once at start (a stem holding ':',
// '<' or '>', which no tag can name, left out with a warning). Requests name a LoRA; no path in a request
// reaches the file system.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hd::serve {

struct LoraEntry {
  std::string name;  // the file's name without ".safetensors"
  std::string path;
};

class LoraCatalogue {
 public:
  // Every *.safetensors in `folder` (one level), sorted by name; none without a folder. A missing folder
  // is an error naming it.
  static LoraCatalogue from(const std::optional<std::string>& folder);

  const std::vector<LoraEntry>& entries() const { return entries_; }
  // Throws an Error (kInvalidInput) listing the names when `name` is none of them.
  const LoraEntry& find(const std::string& name) const;

 private:
  std::vector<LoraEntry> entries_;
};

}  // namespace hd::serve
