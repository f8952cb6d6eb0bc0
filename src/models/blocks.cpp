#include "models/blocks.h"

#include "comm/image_split.h"
#include "core/error.h"
#include "ops/ops.h"

namespace hd {

Conv2d Conv2d::load(const WeightReader& w, const std::string& name, int64_t out, int64_t in, int64_t k, int stride) {
  Conv2d c;
  c.weight = w.load_conv(name + ".weight", out, in, k, k);
  c.bias = w.load(name + ".bias", Shape{out});
  c.stride = stride;
  c.padding = int(k / 2);
  return c;
}

Conv2d Conv2d::load_upsampler(const WeightReader& w, const std::string& name, int64_t channels) {
  Conv2d c = load(w, name, channels, channels, 3);
  if (!w.placement().device.is_cpu()) {
    const Tensor weight = c.weight.view();
    c.phases = OwnedTensor::like(weight, Shape{2, 2, channels, 2, 2, channels});
    ops::upsample_conv2d_phases(weight, *c.phases);
  }
  return c;
}

int64_t gpu_extra_weight_elements(const ModelComponent& component) {
  int64_t elements = 0;
  for (const TensorRef& t : component.tensors) {
    if (!t.name.ends_with(".upsamplers.0.conv.weight")) continue;
    int64_t n = 1;
    for (const int64_t d : t.shape()) n *= d;
    elements += n / 9 * 16;  // [Cout, Cin, 3, 3] -> [2, 2, Cout, 2, 2, Cin]
  }
  return elements;
}

OwnedTensor Conv2d::upsampled(const Tensor& x, comm::ImageSplit* split) const {
  const Shape up{x.dim(0), 2 * x.dim(1), 2 * x.dim(2), x.dim(3)};
  if (split != nullptr) {  // a strip's rows upsample to the whole image's same rows, twice as many
    OwnedTensor whole = OwnedTensor::like(x, up);
    ops::upsample_nearest_2x(x, whole);
    return (*this)(whole, nullptr, split);
  }
  OwnedTensor y = OwnedTensor::like(x, Shape{up[0], up[1], up[2], out_channels()});
  ops::upsample_conv2d(x, weight, phases ? &phases->view() : nullptr, &bias.view(), y);
  return y;
}

OwnedTensor Conv2d::operator()(const Tensor& x, const Tensor* residual, comm::ImageSplit* split) const {
  const ops::Conv2dParams p{stride, padding, extra_end_padding};
  OwnedTensor y = OwnedTensor::like(x, ops::conv2d_output_shape(x.shape, weight.view().shape, p));
  if (split != nullptr) {
    HD_CHECK_KIND(extra_end_padding == 0 && 2 * padding + 1 == weight.view().dim(1), ErrorKind::kUnsupported,
                  "image split: a convolution padded otherwise than to keep its size");
    split->conv(x, weight, bias, stride, residual, y);
  } else {
    ops::conv2d(x, weight, &bias.view(), residual, p, y);
  }
  return y;
}

GroupNorm GroupNorm::load(const WeightReader& w, const std::string& name, int64_t channels, int groups, float eps) {
  return GroupNorm{w.load(name + ".weight", Shape{channels}), w.load(name + ".bias", Shape{channels}), groups, eps};
}

OwnedTensor GroupNorm::operator()(const Tensor& x, bool silu, comm::ImageSplit* split,
                                  const Tensor* channel_offset) const {
  OwnedTensor y = OwnedTensor::like(x, x.shape);
  if (split != nullptr) {
    HD_ASSERT(channel_offset == nullptr);
    split->group_norm(x, gamma, beta, groups, eps, silu, y);
  } else {
    ops::group_norm(x, gamma, beta, groups, eps, silu, y, channel_offset);
  }
  return y;
}

Linear Linear::load(const WeightReader& w, const std::string& name, int64_t out, int64_t in, bool with_bias) {
  Linear l{w.load(name + ".weight", Shape{out, in}), std::nullopt};
  if (with_bias) l.bias = w.load(name + ".bias", Shape{out});
  return l;
}

Linear Linear::load_pointwise_conv(const WeightReader& w, const std::string& name, int64_t out, int64_t in) {
  Linear l{w.load(name + ".weight", Shape{out, in, 1, 1}), w.load(name + ".bias", Shape{out})};
  l.weight.view() = l.weight.view().reshape(Shape{out, in});
  return l;
}

OwnedTensor Linear::operator()(const Tensor& x, const Tensor* residual) const {
  Shape shape = x.shape;
  shape[shape.rank() - 1] = weight.view().dim(0);
  OwnedTensor y = OwnedTensor::like(x, shape);
  (*this)(x, residual, y);
  return y;
}

void Linear::operator()(const Tensor& x, const Tensor* residual, const Tensor& out) const {
  ops::linear(x, weight, bias ? &bias->view() : nullptr, residual, out);
}

ResnetBlock ResnetBlock::load(const WeightReader& w, const std::string& name, int64_t in, int64_t out, int groups,
                              float eps, int64_t time_embed_dim) {
  ResnetBlock r;
  if (time_embed_dim > 0) r.time_proj = Linear::load(w, name + ".time_emb_proj", out, time_embed_dim);
  r.norm1 = GroupNorm::load(w, name + ".norm1", in, groups, eps);
  r.conv1 = Conv2d::load(w, name + ".conv1", out, in, 3);
  r.norm2 = GroupNorm::load(w, name + ".norm2", out, groups, eps);
  r.conv2 = Conv2d::load(w, name + ".conv2", out, out, 3);
  if (in != out) r.shortcut = Conv2d::load(w, name + ".conv_shortcut", out, in, 1);
  return r;
}

OwnedTensor ResnetBlock::operator()(const Tensor& x, const Tensor* temb_silu, comm::ImageSplit* split) const {
  OwnedTensor h = conv1(norm1(x, /*silu=*/true, split), nullptr, split);
  std::optional<OwnedTensor> t;  // [N, out], added to every pixel of its sample
  if (time_proj) {
    HD_ASSERT(temb_silu != nullptr);
    t = (*time_proj)(*temb_silu);
    // norm2 adds it as it reads h: no pass of its own. The image split's GroupNorm takes no offset.
    if (split != nullptr) ops::add(h, t->view().reshape(Shape{t->view().dim(0), 1, 1, t->view().dim(1)}), h);
  }
  h = norm2(h, /*silu=*/true, split, t && split == nullptr ? &t->view() : nullptr);
  // conv2 adds the shortcut as its residual: one pass over the output instead of two.
  if (shortcut) {
    const OwnedTensor skip = (*shortcut)(x);  // 1x1: the strip's own pixels
    return conv2(h, &skip.view(), split);
  }
  return conv2(h, &x, split);
}

SpatialSelfAttention SpatialSelfAttention::load(const WeightReader& w, const std::string& name, int64_t channels,
                                                int groups, float eps) {
  SpatialSelfAttention a;
  a.norm = GroupNorm::load(w, name + ".group_norm", channels, groups, eps);
  const bool legacy = !w.has(name + ".to_q.weight") && w.has(name + ".query.weight");
  // Single-file VAEs store these projections as 1x1 convolutions.
  const bool conv = !legacy && w.shape(name + ".to_q.weight").size() == 4;
  const auto projection = [&](const char* modern, const char* old) {
    const std::string n = name + (legacy ? old : modern);
    return conv ? Linear::load_pointwise_conv(w, n, channels, channels) : Linear::load(w, n, channels, channels);
  };
  a.q = projection(".to_q", ".query");
  a.k = projection(".to_k", ".key");
  a.v = projection(".to_v", ".value");
  a.out = projection(".to_out.0", ".proj_attn");
  return a;
}

OwnedTensor SpatialSelfAttention::operator()(const Tensor& x, comm::ImageSplit* split) const {
  const int64_t n = x.dim(0), positions = x.dim(1) * x.dim(2), c = x.dim(3);
  const OwnedTensor h = norm(x, /*silu=*/false, split);
  const Tensor tokens = h.view().reshape(Shape{n, positions, c});  // NHWC is already [N, H*W, C]
  OwnedTensor attended = OwnedTensor::like(x, Shape{n, positions, c});
  if (split != nullptr) {
    // Keys and values as one batch [K; V]: one gather brings every strip's of both (as SpatialTransformer).
    OwnedTensor kv = OwnedTensor::like(x, Shape{2 * n, positions, c});
    k(tokens, nullptr, kv.view().slice(0, 0, n));
    v(tokens, nullptr, kv.view().slice(0, n, n));
    const OwnedTensor all = split->gather_keys_values(kv);
    ops::attention(q(tokens), all.view().slice(0, 0, n), all.view().slice(0, n, n), {1, false, 0.0f}, attended);
  } else {
    ops::attention(q(tokens), k(tokens), v(tokens), {1, false, 0.0f}, attended);
  }
  const Tensor residual = x.reshape(Shape{n, positions, c});
  OwnedTensor y = out(attended, &residual);
  y.view() = y.view().reshape(x.shape);  // back to [N, H, W, C]
  return y;
}

SpatialTransformer SpatialTransformer::load(const WeightReader& w, const std::string& name, int64_t c,
                                           int64_t context_dim, int heads, int groups, bool linear_projection) {
  SpatialTransformer t;
  t.heads = heads;
  t.norm = GroupNorm::load(w, name + ".norm", c, groups, 1e-6f);
  t.proj_in = linear_projection ? Linear::load(w, name + ".proj_in", c, c) : Linear::load_pointwise_conv(w, name + ".proj_in", c, c);
  t.proj_out = linear_projection ? Linear::load(w, name + ".proj_out", c, c) : Linear::load_pointwise_conv(w, name + ".proj_out", c, c);
  for (int64_t i = 0; w.has(name + ".transformer_blocks." + std::to_string(i) + ".norm1.weight"); ++i) {
    const std::string p = name + ".transformer_blocks." + std::to_string(i) + ".";
    const auto vec = [&](const std::string& n) { return w.load(p + n, Shape{c}); };
    const int64_t ff = w.shape(p + "ff.net.2.weight").at(1);  // 4C in Stable Diffusion
    t.blocks.push_back(
        Block{vec("norm1.weight"), vec("norm1.bias"), vec("norm2.weight"), vec("norm2.bias"),
              vec("norm3.weight"), vec("norm3.bias"),
              StackedLinear::load(w, {p + "attn1.to_q", p + "attn1.to_k", p + "attn1.to_v"}, c, c),
              Linear::load(w, p + "attn1.to_out.0", c, c), Linear::load(w, p + "attn2.to_q", c, c, false),
              StackedLinear::load(w, {p + "attn2.to_k", p + "attn2.to_v"}, c, context_dim),
              Linear::load(w, p + "attn2.to_out.0", c, c), Linear::load(w, p + "ff.net.0.proj", 2 * ff, c),
              Linear::load(w, p + "ff.net.2", c, ff)});
  }
  HD_CHECK(!t.blocks.empty(), name, ": no transformer_blocks");
  HD_CHECK(c % heads == 0, name, ": ", c, " channels do not split into ", heads, " heads");
  return t;
}

OwnedTensor SpatialTransformer::operator()(const Tensor& x, const Tensor& context,
                                           comm::ImageSplit* split) const {
  const int64_t n = x.dim(0), positions = x.dim(1) * x.dim(2), c = x.dim(3);
  const OwnedTensor normed = norm(x, /*silu=*/false, split);
  OwnedTensor tokens = proj_in(normed.view().reshape(Shape{n, positions, c}));  // [N, HW, C]
  OwnedTensor h = OwnedTensor::like(tokens, tokens.view().shape), attended = OwnedTensor::like(tokens, tokens.view().shape);
  for (const Block& b : blocks) {
    ops::layer_norm(tokens, b.norm1_g, b.norm1_b, layer_norm_eps, h);
    if (split != nullptr) {
      // Keys and values as one batch [K; V] of 2N rows: one gather brings every strip's of both.
      OwnedTensor q = OwnedTensor::like(h, h.view().shape),
                  kv = OwnedTensor::like(h, Shape{2 * n, positions, c});
      ops::linear(h, b.qkv1.weight(0), nullptr, q);
      ops::linear(h, b.qkv1.weight(1), nullptr, kv.view().slice(0, 0, n));
      ops::linear(h, b.qkv1.weight(2), nullptr, kv.view().slice(0, n, n));
      const OwnedTensor all = split->gather_keys_values(kv);
      ops::attention(q, all.view().slice(0, 0, n), all.view().slice(0, n, n), {heads, false, 0.0f}, attended);
    } else {
      const StackedLinear::Outputs qkv = b.qkv1(h);
      ops::attention(qkv.parts[0], qkv.parts[1], qkv.parts[2], {heads, false, 0.0f}, attended);
    }
    b.out1(attended, &tokens.view(), tokens);  // the residual stream, updated in the product's epilogue
    ops::layer_norm(tokens, b.norm2_g, b.norm2_b, layer_norm_eps, h);
    const StackedLinear::Outputs kv = b.kv2(context);
    ops::attention(b.q2(h), kv.parts[0], kv.parts[1], {heads, false, 0.0f}, attended);
    b.out2(attended, &tokens.view(), tokens);
    ops::layer_norm(tokens, b.norm3_g, b.norm3_b, layer_norm_eps, h);
    // The projection [N, HW, 2 * 4C] and GEGLU in one op: on the GPU the projection is never stored.
    OwnedTensor gated = OwnedTensor::like(h, Shape{n, positions, b.ff_in.weight.view().dim(0) / 2});
    ops::linear_geglu(h, b.ff_in.weight, b.ff_in.bias ? &b.ff_in.bias->view() : nullptr,
                      ops::GeluApproximation::kNone, gated);
    b.ff_out(gated, &tokens.view(), tokens);
  }
  const Tensor residual = x.reshape(Shape{n, positions, c});
  OwnedTensor y = proj_out(tokens, &residual);
  y.view() = y.view().reshape(x.shape);
  return y;
}

}  // namespace hd
