#include "models/vae.h"

#include <nlohmann/json.hpp>
#include <string>

#include "comm/image_split.h"
#include "core/error.h"
#include "ops/ops.h"

namespace hd {

namespace {

constexpr float kEps = 1e-6f;  // diffusers' Encoder/Decoder use resnet_eps 1e-6 throughout

std::string level_name(const char* side, int64_t i) { return std::string(side) + "." + std::to_string(i); }

}  // namespace

VaeConfig VaeConfig::detect(const ModelComponent& component) {
  const WeightReader w(component, "");
  VaeConfig c;
  const auto conv_in = w.shape("decoder.conv_in.weight");  // [C_top, latent, 3, 3]
  HD_CHECK(conv_in.size() == 4, component.name, ": decoder.conv_in.weight is not a 4-D kernel");
  c.latent_channels = conv_in[1];
  int64_t levels = 0;
  while (w.has("decoder.up_blocks." + std::to_string(levels) + ".resnets.0.conv1.weight")) ++levels;
  HD_CHECK(levels > 0, component.name, ": no decoder.up_blocks found");
  int64_t resnets = 0;
  while (w.has("decoder.up_blocks.0.resnets." + std::to_string(resnets) + ".conv1.weight")) ++resnets;
  c.layers_per_block = resnets - 1;
  c.block_out_channels.assign(size_t(levels), 0);
  for (int64_t i = 0; i < levels; ++i) {  // decoder level i has the channels of encoder level levels-1-i
    c.block_out_channels[size_t(levels - 1 - i)] = w.shape("decoder.up_blocks." + std::to_string(i) + ".resnets.0.conv2.weight")[0];
  }
  c.mid_attention = w.has("decoder.mid_block.attentions.0.to_q.weight") || w.has("decoder.mid_block.attentions.0.query.weight");
  c.has_encoder = w.has("encoder.conv_in.weight");
  {
    const nlohmann::json j = component_config(component);
    if (j.contains("norm_num_groups")) c.norm_groups = j["norm_num_groups"].get<int>();
    if (j.contains("scaling_factor") && j["scaling_factor"].is_number()) c.scaling_factor = j["scaling_factor"].get<float>();
    if (j.contains("sample_size") && j["sample_size"].is_number_integer()) c.sample_size = j["sample_size"].get<int64_t>();
    if (j.contains("force_upcast")) {
      HD_CHECK(j["force_upcast"].is_boolean(), component.name, "/config.json: force_upcast is not true or false");
      c.force_upcast = j["force_upcast"].get<bool>();
    }
    HD_CHECK(c.sample_size > 0, component.name, "/config.json: sample_size ", c.sample_size, " is not positive");
    HD_CHECK_KIND(!j.contains("shift_factor") || j["shift_factor"].is_null(), ErrorKind::kUnsupported, component.name,
                  ": a VAE with a shift_factor (not a Stable Diffusion 1.x/2.x/XL VAE)");
  }
  return c;
}

OwnedTensor Vae::MidBlock::operator()(const Tensor& x, comm::ImageSplit* split) const {
  OwnedTensor h = first(x, nullptr, split);
  if (attention) h = (*attention)(h, split);
  return second(h, nullptr, split);
}

Vae Vae::load(const ModelComponent& component, const ops::Placement& placement) {
  Vae v;
  v.config_ = VaeConfig::detect(component);
  v.placement_ = placement;
  const VaeConfig& c = v.config_;
  const WeightReader w(component, "", placement);
  const auto levels = int64_t(c.block_out_channels.size());
  const int64_t top = c.block_out_channels.back(), g = c.norm_groups;
  const auto mid = [&](const std::string& side) {
    const std::string p = side + ".mid_block";
    MidBlock m{ResnetBlock::load(w, p + ".resnets.0", top, top, int(g), kEps), std::nullopt,
               ResnetBlock::load(w, p + ".resnets.1", top, top, int(g), kEps)};
    if (c.mid_attention) m.attention = SpatialSelfAttention::load(w, p + ".attentions.0", top, int(g), kEps);
    return m;
  };

  if (w.has("post_quant_conv.weight")) {
    v.post_quant_conv_ = Conv2d::load(w, "post_quant_conv", c.latent_channels, c.latent_channels, 1);
  }
  v.decoder_in_ = Conv2d::load(w, "decoder.conv_in", top, c.latent_channels, 3);
  v.decoder_mid_ = mid("decoder");
  int64_t channels = top;
  for (int64_t i = 0; i < levels; ++i) {
    const int64_t out = c.block_out_channels[size_t(levels - 1 - i)];
    const std::string p = level_name("decoder.up_blocks", i);
    Level level;
    for (int64_t r = 0; r <= c.layers_per_block; ++r) {
      level.resnets.push_back(ResnetBlock::load(w, p + ".resnets." + std::to_string(r), channels, out, int(g), kEps));
      channels = out;
    }
    if (i + 1 < levels) level.resample = Conv2d::load_upsampler(w, p + ".upsamplers.0.conv", out);
    v.up_.push_back(std::move(level));
  }
  v.decoder_norm_out_ = GroupNorm::load(w, "decoder.conv_norm_out", channels, int(g), kEps);
  v.decoder_out_ = Conv2d::load(w, "decoder.conv_out", 3, channels, 3);

  if (!c.has_encoder) return v;
  v.encoder_in_ = Conv2d::load(w, "encoder.conv_in", c.block_out_channels[0], 3, 3);
  channels = c.block_out_channels[0];
  for (int64_t i = 0; i < levels; ++i) {
    const int64_t out = c.block_out_channels[size_t(i)];
    const std::string p = level_name("encoder.down_blocks", i);
    Level level;
    for (int64_t r = 0; r < c.layers_per_block; ++r) {
      level.resnets.push_back(ResnetBlock::load(w, p + ".resnets." + std::to_string(r), channels, out, int(g), kEps));
      channels = out;
    }
    if (i + 1 < levels) {
      // diffusers pads (0, 1, 0, 1) and convolves with stride 2 and no other padding.
      Conv2d down = Conv2d::load(w, p + ".downsamplers.0.conv", out, out, 3, 2);
      down.padding = 0;
      down.extra_end_padding = 1;
      level.resample = std::move(down);
    }
    v.down_.push_back(std::move(level));
  }
  v.encoder_mid_ = mid("encoder");
  v.encoder_norm_out_ = GroupNorm::load(w, "encoder.conv_norm_out", top, int(g), kEps);
  v.encoder_out_ = Conv2d::load(w, "encoder.conv_out", 2 * c.latent_channels, top, 3);
  if (w.has("quant_conv.weight")) {
    v.quant_conv_ = Conv2d::load(w, "quant_conv", 2 * c.latent_channels, 2 * c.latent_channels, 1);
  }
  return v;
}

OwnedTensor Vae::decode(const Tensor& latents, comm::ImageSplit* split) const {
  HD_CHECK(latents.rank() == 4 && latents.dim(3) == config_.latent_channels, "vae decode: latents ",
           latents.shape.to_string(), " must be [N, h, w, ", config_.latent_channels, "]");
  HD_CHECK(latents.device == placement_.device && latents.dtype == placement_.dtype, "vae decode: latents ",
           latents.describe(), " are not where the model computes (", placement_.to_string(), ")");
  if (split != nullptr) split->begin_forward(latents.shape);
  // post_quant_conv is 1x1: a strip needs nothing of its neighbours for it.
  OwnedTensor x = post_quant_conv_ ? (*post_quant_conv_)(latents) : OwnedTensor();
  OwnedTensor h = decoder_in_(post_quant_conv_ ? x.view() : latents, nullptr, split);  // [N, h, w, top]
  h = (*decoder_mid_)(h, split);
  for (const Level& level : up_) {
    for (const ResnetBlock& r : level.resnets) h = r(h, nullptr, split);
    if (level.resample) h = level.resample->upsampled(h, split);  // a split's strips stay even
  }
  OwnedTensor image = decoder_out_(decoder_norm_out_(h, /*silu=*/true, split), nullptr, split);  // [N, H, W, 3]
  if (split != nullptr) split->end_forward();
  return image;
}

OwnedTensor Vae::encode(const Tensor& image) const {
  HD_CHECK_KIND(config_.has_encoder, ErrorKind::kUnsupported, "this VAE has no encoder weights");
  HD_CHECK(image.rank() == 4 && image.dim(3) == 3, "vae encode: image ", image.shape.to_string(),
           " must be [N, H, W, 3]");
  HD_CHECK(image.device == placement_.device && image.dtype == placement_.dtype, "vae encode: image ",
           image.describe(), " is not where the model computes (", placement_.to_string(), ")");
  OwnedTensor h = encoder_in_(image);
  for (const Level& level : down_) {
    for (const ResnetBlock& r : level.resnets) h = r(h);
    if (level.resample) h = (*level.resample)(h);
  }
  h = (*encoder_mid_)(h);
  h = encoder_out_(encoder_norm_out_(h, /*silu=*/true));
  return quant_conv_ ? (*quant_conv_)(h) : std::move(h);
}

}  // namespace hd
