// Stable Diffusion's KL autoencoder (diffusers' AutoencoderKL): the decoder turns latents into images,
// the encoder images into latent moments (mean and log-variance). Configuration comes from the weights
// and the component's config.json; images are NHWC in [-1, 1], latents NHWC and unscaled (the pipeline
// divides by scaling_factor before decoding, as diffusers does).
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "io/model_source.h"
#include "ops/placement.h"
#include "models/blocks.h"

namespace hd {

struct VaeConfig {
  std::vector<int64_t> block_out_channels;  // per resolution level, encoder order (e.g. 128 256 512 512)
  int64_t latent_channels = 4;
  int64_t layers_per_block = 2;
  int norm_groups = 32;
  float scaling_factor = 0.18215f;
  int64_t sample_size = 512;  // the image size it was trained at (config.json); tiled decoding's tile size
  // config.json's force_upcast (diffusers' default true): the VAE overflows in f16, so SDXL's pipelines
  // run it wider (here: bf16 on a GPU). False for f16-safe VAEs such as madebyollin/sdxl-vae-fp16-fix.
  bool force_upcast = true;
  bool mid_attention = true;
  bool has_encoder = true;

  static VaeConfig detect(const ModelComponent& component);
};

class Vae {
 public:
  // Weights placed where the model computes: the CPU in f32 (the default), or a GPU in f16/bf16.
  static Vae load(const ModelComponent& component, const ops::Placement& placement = {});
  const ops::Placement& placement() const { return placement_; }

  const VaeConfig& config() const { return config_; }
  // latents [N, h, w, latent_channels] -> image [N, 8h, 8w, 3] (for 4 levels; 2^(levels-1) in general).
  // With an image split, `latents` are this rank's strip of rows and the result is the strip's image rows
  // (every 3x3 convolution's edge rows, GroupNorm's statistics and the mid-block attention's keys and
  // values exchanged with the other strips): the whole decode's rows, up to rounding.
  OwnedTensor decode(const Tensor& latents, comm::ImageSplit* split = nullptr) const;
  // The same decode of host f32 latents [N, h, w, c] into a host f32 image, with the up path's activations
  // on the device one tile at a time: the latent-resolution head (conv_in, the mid block) runs whole; then
  // tiles of `tile_latents` (a halo of the up path's receptive field around each) go through the up path
  // in lockstep, each GroupNorm normalising with the whole image's statistics (summed over the tiles'
  // cores, the activations kept on the host in between). Equal to decode() up to rounding: no seams.
  OwnedTensor decode_tiled_exact(const Tensor& latents, int64_t tile_latents) const;
  // image [N, H, W, 3] -> moments [N, H/f, W/f, 2 * latent_channels]: mean, then log-variance
  OwnedTensor encode(const Tensor& image) const;

 private:
  struct MidBlock {
    ResnetBlock first;
    std::optional<SpatialSelfAttention> attention;
    ResnetBlock second;
    OwnedTensor operator()(const Tensor& x, comm::ImageSplit* split = nullptr) const;
  };
  struct Level {
    std::vector<ResnetBlock> resnets;
    std::optional<Conv2d> resample;  // decoder: upsampling conv after nearest 2x; encoder: stride-2 conv
  };

  ops::Placement placement_;
  VaeConfig config_;
  // decoder
  std::optional<Conv2d> post_quant_conv_;
  Conv2d decoder_in_;
  std::optional<MidBlock> decoder_mid_;
  std::vector<Level> up_;
  GroupNorm decoder_norm_out_;
  Conv2d decoder_out_;
  // encoder
  Conv2d encoder_in_;
  std::vector<Level> down_;
  std::optional<MidBlock> encoder_mid_;
  GroupNorm encoder_norm_out_;
  Conv2d encoder_out_;
  std::optional<Conv2d> quant_conv_;
};

}  // namespace hd
