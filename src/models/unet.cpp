#include "models/unet.h"

#include <nlohmann/json.hpp>
#include <string>

#include "comm/image_split.h"
#include "core/error.h"
#include "ops/ops.h"

namespace hd {

namespace {

std::string at(const std::string& prefix, int64_t i) { return prefix + "." + std::to_string(i); }

}  // namespace

UnetConfig UnetConfig::detect(const ModelComponent& component) {
  const WeightReader w(component, "");
  UnetConfig c;
  const auto conv_in = w.shape("conv_in.weight");
  HD_CHECK(conv_in.size() == 4, component.name, ": conv_in.weight is not a 4-D kernel");
  c.in_channels = conv_in[1];
  c.out_channels = w.shape("conv_out.weight").at(0);
  c.time_embed_dim = w.shape("time_embedding.linear_1.weight").at(0);
  for (int64_t i = 0; w.has(at("down_blocks", i) + ".resnets.0.conv1.weight"); ++i) {
    c.block_out_channels.push_back(w.shape(at("down_blocks", i) + ".resnets.0.conv2.weight").at(0));
    c.cross_attention.push_back(w.has(at("down_blocks", i) + ".attentions.0.norm.weight"));
    int depth = 0;
    while (w.has(at(at("down_blocks", i) + ".attentions.0.transformer_blocks", depth) + ".norm1.weight")) ++depth;
    c.transformer_depth.push_back(depth);
  }
  HD_CHECK(!c.block_out_channels.empty(), component.name, ": no down_blocks found");
  c.layers_per_block = 0;
  while (w.has(at("down_blocks.0.resnets", c.layers_per_block) + ".conv1.weight")) ++c.layers_per_block;
  for (const auto& t : component.tensors) {
    if (t.name.ends_with("attn2.to_k.weight")) {
      c.context_dim = t.shape().at(1);
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
    if (w.has("add_embedding.linear_1.weight")) {
      // SDXL's text-time conditioning; other added embeddings (class labels, image embeddings) are not built.
      const std::string type = j.contains("addition_embed_type") && j["addition_embed_type"].is_string()
                                   ? j["addition_embed_type"].get<std::string>()
                                   : "text_time";
      HD_CHECK_KIND(type == "text_time", ErrorKind::kUnsupported, component.name, ": addition_embed_type '", type,
                    "' is not supported (SDXL's text_time is)");
      c.addition_embed_input_dim = w.shape("add_embedding.linear_1.weight").at(1);
      // Not in the weights: config.json says it; SDXL's is 256 (base and refiner alike).
      const bool given = j.contains("addition_time_embed_dim") && j["addition_time_embed_dim"].is_number_integer();
      c.addition_time_embed_dim = given ? j["addition_time_embed_dim"].get<int64_t>() : 256;
      HD_CHECK(c.addition_time_embed_dim > 0 && c.addition_time_embed_dim % 2 == 0 &&
                   c.addition_time_embed_dim < c.addition_embed_input_dim,
               component.name, ": addition_time_embed_dim ", c.addition_time_embed_dim,
               " does not fit add_embedding's input width ", c.addition_embed_input_dim);
    }
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
  if (c.text_time()) {
    u.add_linear1_ = Linear::load(w, "add_embedding.linear_1", c.time_embed_dim, c.addition_embed_input_dim);
    u.add_linear2_ = Linear::load(w, "add_embedding.linear_2", c.time_embed_dim, c.time_embed_dim);
  }
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
    if (i + 1 < levels)
      level.resample = Conv2d::load_upsampler(w, p + ".upsamplers.0.conv", c.block_out_channels[level_index]);
    u.up_.push_back(std::move(level));
  }
  u.norm_out_ = GroupNorm::load(w, "conv_norm_out", c0, g, c.norm_eps);
  u.conv_out_ = Conv2d::load(w, "conv_out", c.out_channels, c0, 3);
  return u;
}

OwnedTensor Unet::forward(const Tensor& sample, float timestep, const Tensor& context,
                          const TextTimeConditioning* added) const {
  HD_CHECK(sample.rank() >= 1, "unet: sample ", sample.shape.to_string(), " has no batch dimension");
  OwnedTensor t(Shape{sample.dim(0)}, DType::kF32);
  for (int64_t i = 0; i < sample.dim(0); ++i) t.ptr<float>()[i] = timestep;
  OwnedTensor on_device(t.view().shape, DType::kF32, placement_.device);
  ops::copy(t, on_device);
  return forward(sample, on_device, context, added);
}

OwnedTensor Unet::time_embedding(const Tensor& timesteps, const TextTimeConditioning* added, int64_t n) const {
  const UnetConfig& c = config_;
  HD_CHECK(timesteps.dtype == DType::kF32 && timesteps.device == placement_.device && timesteps.shape == Shape{n},
           "unet: timesteps ", timesteps.describe(), " must be f32 [", n, "] on ", placement_.device.to_string());
  // Sinusoidal (cos first), two linears with SiLU between.
  OwnedTensor sinusoid(Shape{n, c.block_out_channels[0]}, placement_.dtype, placement_.device);
  ops::timestep_embedding(timesteps, {true, 0.0f, 10000.0f, 1.0f}, sinusoid);
  OwnedTensor temb = time_linear1_(sinusoid);
  ops::silu(temb, temb);
  temb = time_linear2_(temb);
  if (!c.text_time()) {
    HD_CHECK(added == nullptr, "unet: text-time conditioning given to a UNet without add_embedding");
    return temb;
  }
  HD_CHECK(added != nullptr, "unet: this UNet (SDXL) needs its text-time conditioning: the pooled text embedding ",
           "and the size/crop ids");
  const Tensor& text = added->text_embeds;
  OwnedTensor joined;  // add_embedding's input, unless the caller joined it
  if (added->joined()) {
    HD_CHECK(text.rank() == 2 && text.dim(0) == n && text.dim(1) == c.addition_embed_input_dim &&
                 text.dtype == placement_.dtype && text.device == placement_.device,
             "unet: the joined text-time embedding ", text.describe(), " must be [", n, ", ",
             c.addition_embed_input_dim, "] ", placement_.to_string());
  } else {
    const Tensor& ids = added->time_ids;
    HD_CHECK(
        ids.rank() == 2 && ids.dim(0) == n && ids.dtype == DType::kF32 && ids.device == placement_.device,
        "unet: time ids ", ids.describe(), " must be f32 [", n, ", k] on ", placement_.device.to_string());
    const int64_t time_width = ids.dim(1) * c.addition_time_embed_dim;
    HD_CHECK(text.rank() == 2 && text.dim(0) == n && text.dim(1) + time_width == c.addition_embed_input_dim &&
                 text.dtype == placement_.dtype && text.device == placement_.device,
             "unet: pooled text embedding ", text.describe(), " with ", ids.dim(1), " time ids of width ",
             c.addition_time_embed_dim, " must be [", n, ", ", c.addition_embed_input_dim - time_width, "] ",
             placement_.to_string(), " (add_embedding takes ", c.addition_embed_input_dim, ")");
    // diffusers: each id embedded as a timestep (same flip and shift), flattened per sample, after the
    // pooled text embedding; then add_embedding (linear, SiLU, linear), added to the time embedding.
    OwnedTensor id_embedding(Shape{n * ids.dim(1), c.addition_time_embed_dim}, placement_.dtype,
                             placement_.device);
    ops::timestep_embedding(ids.reshape(Shape{n * ids.dim(1)}), {true, 0.0f, 10000.0f, 1.0f}, id_embedding);
    joined = OwnedTensor(Shape{n, c.addition_embed_input_dim}, placement_.dtype, placement_.device);
    ops::concat_channels(text, id_embedding.view().reshape(Shape{n, time_width}), joined);
  }
  OwnedTensor hidden = (*add_linear1_)(added->joined() ? text : joined.view());
  ops::silu(hidden, hidden);
  (*add_linear2_)(hidden, &temb.view(), temb);  // emb + aug_emb, in the product's epilogue
  return temb;
}

OwnedTensor Unet::forward(const Tensor& sample, const Tensor& timesteps, const Tensor& context,
                          const TextTimeConditioning* added, comm::ImageSplit* split) const {
  const UnetConfig& c = config_;
  HD_CHECK(sample.rank() == 4 && sample.dim(3) == c.in_channels, "unet: sample ", sample.shape.to_string(),
           " must be [N, h, w, ", c.in_channels, "]");
  const int64_t factor = split_row_multiple();
  HD_CHECK(sample.dim(1) % factor == 0 && sample.dim(2) % factor == 0, "unet: latent size ", sample.dim(1), "x",
           sample.dim(2), split ? " (a strip)" : "", " must be a multiple of ", factor);
  HD_CHECK(context.rank() == 3 && context.dim(0) == sample.dim(0) && context.dim(2) == c.context_dim,
           "unet: context ", context.shape.to_string(), " must be [", sample.dim(0), ", L, ", c.context_dim, "]");
  for (const Tensor* t : {&sample, &context})
    HD_CHECK(t->device == placement_.device && t->dtype == placement_.dtype, "unet: input ", t->describe(),
             " is not where the model computes (", placement_.to_string(), ")");
  const int64_t n = sample.dim(0);
  if (split != nullptr) split->begin_forward(sample.shape);

  OwnedTensor temb = time_embedding(timesteps, added, n);
  ops::silu(temb, temb);  // [N, time_embed_dim], as every resnet's time_emb_proj receives it

  // The down path's outputs are kept for the up path, which consumes them in reverse; each is also the
  // input of the next layer (a view: moving an OwnedTensor keeps its memory where it is).
  std::vector<OwnedTensor> skips;
  const auto run_layer = [&](const Layer& layer, const Tensor& x) {
    OwnedTensor y = layer.resnet(x, &temb.view(), split);
    return layer.transformer ? (*layer.transformer)(y, context, split) : std::move(y);
  };
  skips.push_back(conv_in_(sample, nullptr, split));
  Tensor down = skips.back().view();
  for (const Level& level : down_) {
    for (const Layer& layer : level.layers) {
      skips.push_back(run_layer(layer, down));
      down = skips.back().view();
    }
    if (level.resample) {
      skips.push_back((*level.resample)(down, nullptr, split));
      down = skips.back().view();
    }
  }
  OwnedTensor h = mid_first_(down, &temb.view(), split);
  h = mid_transformer_(h, context, split);
  h = mid_second_(h, &temb.view(), split);
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
    if (level.resample) h = level.resample->upsampled(h, split);
  }
  OwnedTensor out = conv_out_(norm_out_(h, /*silu=*/true, split), nullptr, split);
  if (split != nullptr) split->end_forward();
  return out;
}

}  // namespace hd
