// Building blocks shared by the VAE and the UNet, each bound to its weights by the names diffusers gives
// them. Activations are NHWC. Given an image split (comm::ImageSplit), a block computes one strip of the
// image and exchanges what crosses the strip's edges; without one, the whole image.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"
#include "models/stacked_linear.h"
#include "models/weights.h"

namespace hd {

namespace comm {
class ImageSplit;
}  // namespace comm

struct Conv2d {
  OwnedTensor weight, bias;  // [Cout, kh, kw, Cin], [Cout]
  int stride = 1, padding = 0, extra_end_padding = 0;
  // An upsampler's weights as its four output phases (ops::upsample_conv2d_phases), on a GPU only: 16/9 of
  // the weight's memory more, for 16 of the 36 multiply-adds and no upsampled image.
  std::optional<OwnedTensor> phases;

  static Conv2d load(const WeightReader& w, const std::string& name, int64_t out, int64_t in, int64_t k,
                     int stride = 1);
  // diffusers' Upsample2D's 3x3 convolution, which upsampled() runs.
  static Conv2d load_upsampler(const WeightReader& w, const std::string& name, int64_t channels);
  int64_t out_channels() const { return weight.view().dim(0); }
  // out = conv(x) (+ residual, which may alias out).
  OwnedTensor operator()(const Tensor& x, const Tensor* residual = nullptr,
                         comm::ImageSplit* split = nullptr) const;
  // conv(nearest 2x upsample of x) (ops::upsample_conv2d; with a split, the strip upsampled, then conv).
  OwnedTensor upsampled(const Tensor& x, comm::ImageSplit* split = nullptr) const;
};

// The elements a GPU placement of `component` holds beside its checkpoint's tensors: each upsampler's
// phases (Conv2d::load_upsampler), 16/9 of its 3x3 weight. For bounds on the memory a model takes.
int64_t gpu_extra_weight_elements(const ModelComponent& component);

struct GroupNorm {
  OwnedTensor gamma, beta;
  int groups = 32;
  float eps = 1e-6f;

  static GroupNorm load(const WeightReader& w, const std::string& name, int64_t channels, int groups, float eps);
  // channel_offset: nullptr, or [N, C] added to x before it is normalised (ops::group_norm); not with a
  // split.
  OwnedTensor operator()(const Tensor& x, bool silu, comm::ImageSplit* split = nullptr,
                         const Tensor* channel_offset = nullptr) const;
};

struct Linear {
  OwnedTensor weight;               // [out, in]
  std::optional<OwnedTensor> bias;  // [out]; attention's q/k/v projections have none

  static Linear load(const WeightReader& w, const std::string& name, int64_t out, int64_t in, bool with_bias = true);
  // A linear map stored as a 1x1 convolution [out, in, 1, 1] (SD1.x's transformer projections): on
  // NHWC tokens the two are the same product.
  static Linear load_pointwise_conv(const WeightReader& w, const std::string& name, int64_t out, int64_t in);
  // x·Wᵀ + bias, plus the residual when one is given (fused into the product's epilogue).
  OwnedTensor operator()(const Tensor& x, const Tensor* residual = nullptr) const;
  // The same into `out`; the residual may be `out` itself (a residual stream updated in place).
  void operator()(const Tensor& x, const Tensor* residual, const Tensor& out) const;
};

// diffusers' ResnetBlock2D: norm-SiLU-conv twice, the projected time embedding added in between (UNet
// only), plus a 1x1 shortcut when the channel count changes.
struct ResnetBlock {
  GroupNorm norm1, norm2;
  Conv2d conv1, conv2;
  std::optional<Conv2d> shortcut;
  std::optional<Linear> time_proj;  // time_emb_proj: [out, time_embed_dim]

  // `time_embed_dim` 0 means no time embedding (the VAE's blocks).
  static ResnetBlock load(const WeightReader& w, const std::string& name, int64_t in, int64_t out, int groups, float eps,
                          int64_t time_embed_dim = 0);
  // x [N, H, W, in] -> [N, H, W, out]; temb_silu [N, time_embed_dim] is SiLU(time embedding).
  OwnedTensor operator()(const Tensor& x, const Tensor* temb_silu = nullptr,
                         comm::ImageSplit* split = nullptr) const;
};

// The VAE's mid-block attention: GroupNorm, single-head self-attention over the H*W positions, output
// projection, residual. Reads diffusers' to_q/to_k/to_v/to_out.0 names or the older query/key/value/proj_attn.
struct SpatialSelfAttention {
  GroupNorm norm;
  Linear q, k, v, out;

  static SpatialSelfAttention load(const WeightReader& w, const std::string& name, int64_t channels, int groups,
                                   float eps);
  // Split: the strip's queries attend to every strip's keys and values.
  OwnedTensor operator()(const Tensor& x, comm::ImageSplit* split = nullptr) const;
};

// diffusers' Transformer2DModel with BasicTransformerBlocks, as Stable Diffusion's UNet uses it:
// GroupNorm, projection in (1x1 conv or linear), per block self-attention, cross-attention to the
// text context and a GEGLU feed-forward (each pre-LayerNorm, each residual), projection out, residual.
struct SpatialTransformer {
  struct Block {
    OwnedTensor norm1_g, norm1_b, norm2_g, norm2_b, norm3_g, norm3_b;
    StackedLinear qkv1;  // self-attention's query, key and value projections
    Linear out1;
    Linear q2;  // cross-attention: the query from the tokens, key and value from the text
    StackedLinear kv2;
    Linear out2;
    Linear ff_in, ff_out;     // GEGLU projection [2 * 4C, C] and [C, 4C]
  };
  GroupNorm norm;
  Linear proj_in, proj_out;
  std::vector<Block> blocks;
  int heads = 8;
  float layer_norm_eps = 1e-5f;

  static SpatialTransformer load(const WeightReader& w, const std::string& name, int64_t channels, int64_t context_dim,
                                 int heads, int groups, bool linear_projection);
  // x [N, H, W, C], context [N, L, context_dim] -> [N, H, W, C]. Split: self-attention's queries are the
  // strip's, its keys and values the whole image's.
  OwnedTensor operator()(const Tensor& x, const Tensor& context, comm::ImageSplit* split = nullptr) const;
};

}  // namespace hd
