// The one table that maps single-file (original LDM, A1111, ComfyUI) tensor names to diffusers' names,
// so that every model loader sees one naming. Covers the SD1.x/SD2.x UNet, the KL VAE, and the text
// encoders: SD1.x's HF-style CLIP (names unchanged) and SD2.x's OpenCLIP (renamed; the fused q/k/v
// projection split by rows; only the penultimate layer's stack kept, as SD2.x conditions on it).
// Names the table does not know are kept as they are, so a loader reports them as missing.
#pragma once

#include <string_view>
#include <vector>

#include "io/model_source.h"

namespace hd {

// `component` is "unet", "vae" or "text_encoder"; names are relative to the component's prefix.
std::vector<TensorRef> ldm_to_diffusers_names(std::string_view component, std::vector<TensorRef> tensors);

}  // namespace hd
