#include "models/unet.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "ops/ops.h"

namespace hd {

namespace {

std::string at(const std::string& prefix, int64_t i) { return prefix + "." + std::to_string(i); }

}  // namespace

UnetConfig UnetConfig::detect(const ModelComponent& component) {
  const WeightReader w(component, "");
  HD_CHECK_KIND(!w.has("add_embedding.linear_1.weight"), ErrorKind::kUnsupported, component.name,
                ": an SDXL UNet (text-time conditioning); SDXL is not supported yet");
  UnetConfig c;
  const auto conv_in = w.shape("conv_in.weight");
  HD_CHECK(conv_in.size() == 4, component.name, ": conv_in.weight is not a 4-D kernel");
  c.in_channels = conv_in[1];
  c.out_channels = w.shape("conv_out.weight").at(0);
  c.time_embed_dim = w.shape("time_embedding.linear_1.weight").at(0);
  for (int64_t i = 0; w.has(at("down_blocks", i) + ".resnets.0.conv1.weight"); ++i) {
    c.block_out_channels.push_back(w.shape(at("down_blocks", i) + ".resnets.0.conv2.weight").at(0));
    c.cross_attention.push_back(w.has(at("down_blocks", i) + ".attentions.0.norm.weight"));
  }
  HD_CHECK(!c.block_out_channels.empty(), component.name, ": no down_blocks found");
  c.layers_per_block = 0;
  while (w.has(at("down_blocks.0.resnets", c.layers_per_block) + ".conv1.weight")) ++c.layers_per_block;
  for (const auto& t : component.tensors) {
    if (t.name.ends_with("attn2.to_k.weight")) {
      c.context_dim = t.entry->shape.at(1);
      break;
    }
  }
  c.linear_projection = w.has("mid_block.attentions.0.proj_in.weight") &&
                        w.shape("mid_block.attentions.0.proj_in.weight").size() == 2;
  // Heads are not in the weights. diffusers' config calls them attention_head_dim (an int or one per
  // level); without a config, SD1.x has 8 heads and SD2.x heads of width 64.
  for (int64_t ch : c.block_out_channels) c.heads.push_back(c.context_dim == 768 ? 8 : int(ch / 64));
  {
    const nlohmann::json j = component_config(component);
    if (j.contains("norm_num_groups")) c.norm_groups = j["norm_num_groups"].get<int>();
    if (j.contains("norm_eps")) c.norm_eps = j["norm_eps"].get<float>();
    if (j.contains("sample_size") && j["sample_size"].is_number_integer()) c.sample_size = j["sample_size"].get<int64_t>();
    const auto& heads = j.contains("num_attention_heads") && !j["num_attention_heads"].is_null() ? j["num_attention_heads"]
                                                                                               : j.value("attention_head_dim", nlohmann::json());
    if (heads.is_number_integer()) {
      c.heads.assign(c.block_out_channels.size(), heads.get<int>());
    } else if (heads.is_array()) {
      HD_CHECK(heads.size() == c.block_out_channels.size(), component.name, "/config.json: ", heads.size(),
               " attention head counts for ", c.block_out_channels.size(), " levels");
      for (size_t i = 0; i < heads.size(); ++i) c.heads[i] = heads[i].get<int>();
    }
  }
  return c;
}

Unet Unet::load(const ModelComponent& component, const ops::Placement& placement) {
  Unet u;
  u.config_ = UnetConfig::detect(component);
  u.placement_ = placement;
  const UnetConfig& c = u.config_;
  const WeightReader w(component, "", placement);
  const auto levels = int64_t(c.block_out_channels.size());
  const int g = c.norm_groups;
  const int64_t c0 = c.block_out_channels[0];
  u.time_linear1_ = Linear::load(w, "time_embedding.linear_1", c.time_embed_dim, c0);
  u.time_linear2_ = Linear::load(w, "time_embedding.linear_2", c.time_embed_dim, c.time_embed_dim);
  u.conv_in_ = Conv2d::load(w, "conv_in", c0, c.in_channels, 3);
  // Resnet input widths are read from the weights: in the up path they include the skip connections.
  const auto resnet = [&](const std::string& name) {
    const auto shape = w.shape(name + ".conv1.weight");
    HD_CHECK(shape.size() == 4, name, ".conv1.weight is not a 4-D kernel");
    return ResnetBlock::load(w, name, shape[1], shape[0], g, c.norm_eps, c.time_embed_dim);
  };
  const auto transformer = [&](const std::string& name, int64_t channels, int heads) {
    return SpatialTransformer::load(w, name, channels, c.context_dim, heads, g, c.linear_projection);
  };
  for (int64_t i = 0; i < levels; ++i) {
    const std::string p = at("down_blocks", i);
    Level level;
    for (int64_t j = 0; j < c.layers_per_block; ++j) {
      Layer layer{resnet(at(p + ".resnets", j)), std::nullopt};
      if (c.cross_attention[size_t(i)]) layer.transformer = transformer(at(p + ".attentions", j), c.block_out_channels[size_t(i)], c.heads[size_t(i)]);
      level.layers.push_back(std::move(layer));
    }
    if (i + 1 < levels) level.resample = Conv2d::load(w, p + ".downsamplers.0.conv", c.block_out_channels[size_t(i)], c.block_out_channels[size_t(i)], 3, 2);
    u.down_.push_back(std::move(level));
  }
  const int64_t top = c.block_out_channels.back();
  u.mid_first_ = resnet("mid_block.resnets.0");
  u.mid_transformer_ = transformer("mid_block.attentions.0", top, c.heads.back());
  u.mid_second_ = resnet("mid_block.resnets.1");
  for (int64_t i = 0; i < levels; ++i) {
    const std::string p = at("up_blocks", i);
    const size_t level_index = size_t(levels - 1 - i);  // up level i mirrors down level levels-1-i
    Level level;
    for (int64_t j = 0; j <= c.layers_per_block; ++j) {
      Layer layer{resnet(at(p + ".resnets", j)), std::nullopt};
      if (c.cross_attention[level_index]) layer.transformer = transformer(at(p + ".attentions", j), c.block_out_channels[level_index], c.heads[level_index]);
      level.layers.push_back(std::move(layer));
    }
    if (i + 1 < levels) level.resample = Conv2d::load(w, p + ".upsamplers.0.conv", c.block_out_channels[level_index], c.block_out_channels[level_index], 3);
    u.up_.push_back(std::move(level));
  }
  u.norm_out_ = GroupNorm::load(w, "conv_norm_out", c0, g, c.norm_eps);
  u.conv_out_ = Conv2d::load(w, "conv_out", c.out_channels, c0, 3);
  return u;
}

OwnedTensor Unet::forward(const Tensor& sample, float timestep, const Tensor& context) const {
  HD_CHECK(sample.rank() >= 1, "unet: sample ", sample.shape.to_string(), " has no batch dimension");
  OwnedTensor t(Shape{sample.dim(0)}, DType::kF32);
  for (int64_t i = 0; i < sample.dim(0); ++i) t.ptr<float>()[i] = timestep;
  OwnedTensor on_device(t.view().shape, DType::kF32, placement_.device);
  ops::copy(t, on_device);
  return forward(sample, on_device, context);
}

OwnedTensor Unet::forward(const Tensor& sample, const Tensor& timesteps, const Tensor& context) const {
  const UnetConfig& c = config_;
  HD_CHECK(sample.rank() == 4 && sample.dim(3) == c.in_channels, "unet: sample ", sample.shape.to_string(),
           " must be [N, h, w, ", c.in_channels, "]");
  const int64_t levels = int64_t(c.block_out_channels.size()), factor = int64_t(1) << (levels - 1);
  HD_CHECK(sample.dim(1) % factor == 0 && sample.dim(2) % factor == 0, "unet: latent size ", sample.dim(1), "x",
           sample.dim(2), " must be a multiple of ", factor);
  HD_CHECK(context.rank() == 3 && context.dim(0) == sample.dim(0) && context.dim(2) == c.context_dim,
           "unet: context ", context.shape.to_string(), " must be [", sample.dim(0), ", L, ", c.context_dim, "]");
  for (const Tensor* t : {&sample, &context})
    HD_CHECK(t->device == placement_.device && t->dtype == placement_.dtype, "unet: input ", t->describe(),
             " is not where the model computes (", placement_.to_string(), ")");
  const int64_t n = sample.dim(0);

  // Time embedding: sinusoidal (cos first), two linears with SiLU between; the resnets take SiLU of it.
  HD_CHECK(timesteps.dtype == DType::kF32 && timesteps.device == placement_.device && timesteps.shape == Shape{n},
           "unet: timesteps ", timesteps.describe(), " must be f32 [", n, "] on ", placement_.device.to_string());
  OwnedTensor sinusoid = OwnedTensor::like(sample, Shape{n, c.block_out_channels[0]});
  ops::timestep_embedding(timesteps, {true, 0.0f, 10000.0f, 1.0f}, sinusoid);
  OwnedTensor temb = time_linear1_(sinusoid);
  ops::silu(temb, temb);
  temb = time_linear2_(temb);
  ops::silu(temb, temb);  // [N, time_embed_dim], as every resnet's time_emb_proj receives it

  // The down path's outputs are kept for the up path, which consumes them in reverse; each is also the
  // input of the next layer (a view: moving an OwnedTensor keeps its memory where it is).
  std::vector<OwnedTensor> skips;
  const auto run_layer = [&](const Layer& layer, const Tensor& x) {
    OwnedTensor y = layer.resnet(x, &temb.view());
    return layer.transformer ? (*layer.transformer)(y, context) : std::move(y);
  };
  skips.push_back(conv_in_(sample));
  Tensor down = skips.back().view();
  for (const Level& level : down_) {
    for (const Layer& layer : level.layers) {
      skips.push_back(run_layer(layer, down));
      down = skips.back().view();
    }
    if (level.resample) {
      skips.push_back((*level.resample)(down));
      down = skips.back().view();
    }
  }
  OwnedTensor h = mid_first_(down, &temb.view());
  h = mid_transformer_(h, context);
  h = mid_second_(h, &temb.view());
  for (const Level& level : up_) {
    for (const Layer& layer : level.layers) {
      const OwnedTensor skip = std::move(skips.back());
      skips.pop_back();
      Shape joined = h.view().shape;
      joined[3] += skip.view().dim(3);
      OwnedTensor cat = OwnedTensor::like(h, joined);
      ops::concat_channels(h, skip, cat);  // [h, skip], the order diffusers concatenates in
      h = run_layer(layer, cat);
    }
    if (level.resample) {
      OwnedTensor up = OwnedTensor::like(h, Shape{n, 2 * h.view().dim(1), 2 * h.view().dim(2), h.view().dim(3)});
      ops::upsample_nearest_2x(h, up);
      h = (*level.resample)(up);
    }
  }
  return conv_out_(norm_out_(h, /*silu=*/true));
}

}  // namespace hd
