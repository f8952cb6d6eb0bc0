#include "pipeline/default_model.h"

#include <filesystem>

#include "core/error.h"

namespace hd {

std::string default_model_folder() {
  // Both paths are fixed at configure time (CMakeLists.txt): where `cmake --install` puts the model,
  // and the source tree the build came from.
  const std::filesystem::path installed = HD_INSTALLED_MODEL_DIR, source = HD_SOURCE_MODEL_DIR;
  for (const auto& dir : {installed, source}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / "model_index.json", ec)) return dir.string();
  }
  throw Error(ErrorKind::kInvalidInput,
              str_cat("no --model given and the default model is missing (looked in ", installed.string(), " and ",
                      source.string(), "); pass --model PATH, a diffusers folder or a .safetensors file"));
}

}  // namespace hd
