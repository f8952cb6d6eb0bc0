// Stable Diffusion models with random weights, written as diffusers folders: what `hipdiffusion bench`
// times when no model is given (speed does not depend on the weights' values) and what the benchmarks
// load, through the same path a real checkpoint takes. The tensor names and shapes are diffusers' and
// transformers' for SD1.5 (CLIP ViT-L text encoder) and SD2.1 (OpenCLIP ViT-H as transformers stores it,
// linear transformer projections, v-prediction); SDXL's UNet (three levels, transformer depths 0/2/10,
// text-time conditioning) and VAE, without text encoders (not built yet). The VAE is SD's, decoder only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hd {

enum class RandomModelArch { kSD15, kSD21, kSDXL };

// "sd15", "sd21" or "sdxl"; throws an Error naming the choices otherwise.
RandomModelArch parse_random_model_arch(std::string_view name);
std::string_view random_model_arch_name(RandomModelArch arch);
// Whether the model has a text encoder (SDXL's two are not built yet, so its random model has none and
// runs as components: UNet steps and the VAE decode).
bool random_model_has_text_encoder(RandomModelArch arch);

struct RandomModelSpec {
  RandomModelArch arch = RandomModelArch::kSD15;
  // Every width (channels, text width, MLP widths) divided by this, with `norm_groups` GroupNorm groups:
  // the real structure at a size tests can run. 1 and 32 for the real models.
  int width_divisor = 1;
  int norm_groups = 32;
};

using TensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// The components' tensors, diffusers' names and PyTorch's shapes (no text encoder tensors for SDXL).
TensorShapes random_unet_shapes(const RandomModelSpec& spec);
TensorShapes random_vae_decoder_shapes(const RandomModelSpec& spec);
TensorShapes random_text_encoder_shapes(const RandomModelSpec& spec);

// Where the benchmarks keep a spec's model between runs: a folder under the system's temporary directory.
std::string random_model_folder(const RandomModelSpec& spec);

// Writes the model (unet/, vae/, text_encoder/ (not for SDXL) with f16 weights drawn uniformly with standard deviation
// 0.02, their config.json, scheduler/, the built-in model's tokenizer/, model_index.json) into `folder`,
// unless a model of the same spec is already there. Returns the number of parameters.
int64_t write_random_model(const RandomModelSpec& spec, const std::string& folder);

}  // namespace hd
