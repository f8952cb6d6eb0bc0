// Where a model's tokenizer files are. A diffusers folder has tokenizer/; a single-file checkpoint has
// none, so this looks in --vocab DIR, beside the checkpoint, and in the Hugging Face cache, and says
// where it looked when nothing is found.
#pragma once

#include <optional>
#include <string>

#include "models/architecture.h"

namespace hd {

// The folder holding vocab.json + merges.txt or tokenizer.json for `model_path`, or an Error listing
// the places searched. `vocab_dir`, when given, is the only place looked at. `subfolder`: the
// tokenizer's folder name in a diffusers layout ("tokenizer", or SDXL's "tokenizer_2").
std::string find_tokenizer_folder(const ModelSource& model, ModelFamily family,
                                  const std::optional<std::string>& vocab_dir,
                                  const std::string& subfolder = "tokenizer");

}  // namespace hd
