// Tiny checkpoints with real Stable Diffusion tensor names and tiny widths, for the loader and the
// architecture detection tests. Only the tensors those read are present; values are zeros.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"

namespace hd::test {

enum class FixtureFamily { kSD1, kSD2, kSDXL };

// UNet tensors with diffusers names (ldm == false) or LDM names without their prefix (ldm == true).
std::vector<SafetensorsWriteItem> unet_tensors(FixtureFamily family, bool ldm, int in_channels = 4,
                                               const std::string& prefix = "", const std::string& dtype = "F16");
std::vector<SafetensorsWriteItem> vae_tensors(const std::string& prefix = "");
std::vector<SafetensorsWriteItem> text_encoder_tensors(int width, const std::string& prefix = "");

}  // namespace hd::test
