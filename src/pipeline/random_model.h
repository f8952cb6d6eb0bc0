// Stable Diffusion models with random weights, written as diffusers folders: what `hipdiffusion bench`
// times when no model is given (speed does not depend on the weights' values) and what the benchmarks
// load, through the same path a real checkpoint takes. The tensor names and shapes are diffusers' and
// transformers' for SD1.5 (CLIP ViT-L text encoder) and SD2.1 (OpenCLIP ViT-H as transformers stores it,
// linear transformer projections, v-prediction); SDXL base (three UNet levels, transformer depths 0/2/10,
// text-time conditioning; CLIP ViT-L and OpenCLIP ViT-bigG with its projection). The VAE is SD's, decoder
// only.
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

struct RandomModelSpec {
  RandomModelArch arch = RandomModelArch::kSD15;
  // Every width (channels, text width, MLP widths) divided by this, with `norm_groups` GroupNorm groups:
  // the real structure at a size tests can run. 1 and 32 for the real models.
  int width_divisor = 1;
  int norm_groups = 32;
};

using TensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

struct RandomComponent {
  std::string name;       // "text_encoder", "text_encoder_2"
  std::string tokenizer;  // its tokenizer's folder: "tokenizer", "tokenizer_2"
  TensorShapes shapes;
};

// The components' tensors, diffusers' names and PyTorch's shapes.
TensorShapes random_unet_shapes(const RandomModelSpec& spec);
TensorShapes random_vae_decoder_shapes(const RandomModelSpec& spec);
// SD1.x/2.x: text_encoder; SDXL: text_encoder (CLIP ViT-L) and text_encoder_2 (OpenCLIP ViT-bigG with its
// text projection).
std::vector<RandomComponent> random_text_encoders(const RandomModelSpec& spec);

// Where the benchmarks keep a spec's model between runs: a folder under the system's temporary directory.
std::string random_model_folder(const RandomModelSpec& spec);

// Writes the model (unet/, vae/, text_encoder/ (and SDXL's text_encoder_2/) with f16 weights drawn uniformly with standard deviation
// 0.02, their config.json, scheduler/, the built-in model's vocabulary as tokenizer/ (and tokenizer_2/,
// padded with "!"), model_index.json) into `folder`,
// unless a model of the same spec is already there. Returns the number of parameters.
int64_t write_random_model(const RandomModelSpec& spec, const std::string& folder);

}  // namespace hd
