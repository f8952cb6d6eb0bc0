// Stable Diffusion's denoising UNet (diffusers' UNet2DConditionModel with CrossAttnDownBlock2D /
// DownBlock2D / UNetMidBlock2DCrossAttn / UpBlock2D / CrossAttnUpBlock2D), configured from its weights
// and config.json: SD1.x/2.x, and SDXL's (text-time conditioning, several transformer blocks per
// attention). NHWC throughout.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "io/model_source.h"
#include "ops/placement.h"
#include "models/blocks.h"

namespace hd {

struct UnetConfig {
  std::vector<int64_t> block_out_channels;  // per level, e.g. 320 640 1280 1280
  std::vector<bool> cross_attention;        // per level: CrossAttn blocks or plain ones
  std::vector<int> heads;                   // attention heads per level
  int64_t layers_per_block = 2;
  int64_t in_channels = 4, out_channels = 4;
  int64_t context_dim = 768;
  int64_t time_embed_dim = 1280;
  bool linear_projection = false;  // SD2.x: linear proj_in/proj_out; SD1.x: 1x1 convolutions
  int norm_groups = 32;
  float norm_eps = 1e-5f;
  int64_t sample_size = 64;  // the latent size the model was trained at (config.json; diffusers' default 64)
  std::vector<int> transformer_depth;  // transformer blocks in each level's attentions (0: a level without)
  // SDXL's text-time conditioning (addition_embed_type "text_time"): add_embedding maps the pooled text
  // embedding followed by the sinusoidal embeddings of the micro-conditioning ids (original size, crop
  // origin, target size), each id `addition_time_embed_dim` wide, to the time embedding's width, and adds
  // it to the time embedding. 0 for SD1.x/2.x.
  int64_t addition_time_embed_dim = 0;
  int64_t addition_embed_input_dim = 0;  // add_embedding.linear_1's input width
  bool text_time() const { return addition_time_embed_dim > 0; }

  static UnetConfig detect(const ModelComponent& component);
};

// SDXL's extra conditioning, on the model's device: the pooled text embedding [N, P] in the model's dtype
// and the micro-conditioning ids [N, k] in f32 (k = 6 for SDXL base: original height and width, crop top
// and left, target height and width), with P + k * addition_time_embed_dim = addition_embed_input_dim.
// Or, with time_ids left empty (no data), text_embeds is add_embedding's whole input
// [N, addition_embed_input_dim], already joined: the pooled embedding, then each id's sinusoid. The
// original (LDM) UNet takes it so, as `y`, and ComfyUI hands it over that way.
struct TextTimeConditioning {
  Tensor text_embeds;
  Tensor time_ids;

  bool joined() const { return time_ids.data == nullptr; }
};

class Unet {
 public:
  // Weights placed where the model computes: the CPU in f32 (the default), or a GPU in f16/bf16.
  static Unet load(const ModelComponent& component, const ops::Placement& placement = {});
  const ops::Placement& placement() const { return placement_; }

  const UnetConfig& config() const { return config_; }
  // sample [N, h, w, in], the same timestep for every sample, context [N, L, context_dim]
  // -> the model's prediction [N, h, w, out] (epsilon or v, as the model was trained). `added` is
  // required by a text-time UNet (SDXL) and refused by the others.
  OwnedTensor forward(const Tensor& sample, float timestep, const Tensor& context,
                      const TextTimeConditioning* added = nullptr) const;
  // The same with the timestep of each sample as an f32 tensor [N] on the model's device: no host data
  // is read, so the forward can be captured into a graph and replayed with new values in that tensor.
  // With `split`, sample is this rank's strip of the latent (rows [i·h, (i+1)·h) of every sample for
  // strip i, h a multiple of the UNet's downsampling factor) and so is the prediction: every rank of the
  // split runs the forward at once, exchanging what crosses the strips' edges.
  OwnedTensor forward(const Tensor& sample, const Tensor& timesteps, const Tensor& context,
                      const TextTimeConditioning* added = nullptr, comm::ImageSplit* split = nullptr) const;
  // The latent rows each strip of an image split must be a multiple of: the
  // downsampling factor, so that every level's strips line up with the whole latent's rows.
  int64_t split_row_multiple() const { return int64_t(1) << (config_.block_out_channels.size() - 1); }

 private:
  struct Layer {
    ResnetBlock resnet;
    std::optional<SpatialTransformer> transformer;
  };
  struct Level {
    std::vector<Layer> layers;
    std::optional<Conv2d> resample;
  };

  ops::Placement placement_;
  UnetConfig config_;
  Linear time_linear1_, time_linear2_;
  std::optional<Linear> add_linear1_, add_linear2_;  // SDXL's add_embedding
  // The time embedding before its SiLU: diffusers' `emb` (+ `aug_emb` for a text-time UNet).
  OwnedTensor time_embedding(const Tensor& timesteps, const TextTimeConditioning* added, int64_t n) const;
  Conv2d conv_in_;
  std::vector<Level> down_;
  ResnetBlock mid_first_, mid_second_;
  SpatialTransformer mid_transformer_;
  std::vector<Level> up_;
  GroupNorm norm_out_;
  Conv2d conv_out_;
};

}  // namespace hd
