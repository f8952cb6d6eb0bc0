// Tells which Stable Diffusion family a model belongs to from its weights alone, as the loaders of
// later issues will: configuration is detected, never asked for.
#pragma once

#include <string>

#include "io/model_source.h"

namespace hd {

enum class ModelFamily { kUnknown, kSD1, kSD2, kSDXL };

struct ArchitectureInfo {
  ModelFamily family = ModelFamily::kUnknown;
  int unet_in_channels = 0;      // 4 for txt2img, 9 for inpainting models; 0 when there is no UNet
  int context_dim = 0;           // width of the text embedding the UNet cross-attends to
  std::string prediction;        // "epsilon", "v_prediction", or "unknown"
  std::string prediction_source; // why: "scheduler_config.json", "v_pred key", "SD1.x default", ...
  std::string evidence;          // which tensors decided the family
};

ArchitectureInfo detect_architecture(const ModelSource& model);
std::string family_name(ModelFamily f);  // "SD1.x", "SD2.x", "SDXL", "unknown"

}  // namespace hd
