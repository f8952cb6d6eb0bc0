// The one table that maps single-file (original LDM, A1111, ComfyUI) tensor names to diffusers' names,
// so that every model loader sees one naming. Covers the SD1.x/SD2.x/SDXL UNet, the KL VAE, and the text
// encoders: SD1.x's HF-style CLIP (names unchanged, with or without "text_model.") and SD2.x's OpenCLIP
// (renamed; the fused q/k/v projection split by rows; only the penultimate layer's stack kept, as SD2.x
// conditions on it); SDXL's two (embedders.0 as SD1.x's; embedders.1 OpenCLIP with every layer and its
// text projection, transposed to transformers' orientation).
// Names the table does not know are kept as they are, so a loader reports them as missing.
#pragma once

#include <string_view>
#include <vector>

#include "io/model_source.h"

namespace hd {

// `component` is "unet", "vae", "text_encoder" or "text_encoder_2"; names are relative to the component's
// prefix.
std::vector<TensorRef> ldm_to_diffusers_names(std::string_view component, std::vector<TensorRef> tensors);

}  // namespace hd
