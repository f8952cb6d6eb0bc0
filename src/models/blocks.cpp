#include "models/blocks.h"

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

OwnedTensor Conv2d::operator()(const Tensor& x, const Tensor* residual) const {
  const ops::Conv2dParams p{stride, padding, extra_end_padding};
  OwnedTensor y(ops::conv2d_output_shape(x.shape, weight.view().shape, p), DType::kF32);
  ops::conv2d(x, weight, &bias.view(), residual, p, y);
  return y;
}

GroupNorm GroupNorm::load(const WeightReader& w, const std::string& name, int64_t channels, int groups, float eps) {
  return GroupNorm{w.load(name + ".weight", Shape{channels}), w.load(name + ".bias", Shape{channels}), groups, eps};
}

OwnedTensor GroupNorm::operator()(const Tensor& x, bool silu) const {
  OwnedTensor y(x.shape, DType::kF32);
  ops::group_norm(x, gamma, beta, groups, eps, silu, y);
  return y;
}

Linear Linear::load(const WeightReader& w, const std::string& name, int64_t out, int64_t in) {
  return Linear{w.load(name + ".weight", Shape{out, in}), w.load(name + ".bias", Shape{out})};
}

OwnedTensor Linear::operator()(const Tensor& x) const {
  Shape shape = x.shape;
  shape[shape.rank() - 1] = weight.view().dim(0);
  OwnedTensor y(shape, DType::kF32);
  ops::linear(x, weight, &bias.view(), y);
  return y;
}

ResnetBlock ResnetBlock::load(const WeightReader& w, const std::string& name, int64_t in, int64_t out, int groups,
                              float eps) {
  ResnetBlock r;
  r.norm1 = GroupNorm::load(w, name + ".norm1", in, groups, eps);
  r.conv1 = Conv2d::load(w, name + ".conv1", out, in, 3);
  r.norm2 = GroupNorm::load(w, name + ".norm2", out, groups, eps);
  r.conv2 = Conv2d::load(w, name + ".conv2", out, out, 3);
  if (in != out) r.shortcut = Conv2d::load(w, name + ".conv_shortcut", out, in, 1);
  return r;
}

OwnedTensor ResnetBlock::operator()(const Tensor& x) const {
  OwnedTensor h = conv1(norm1(x, /*silu=*/true));
  h = norm2(h, /*silu=*/true);
  // conv2 adds the shortcut as its residual: one pass over the output instead of two.
  if (shortcut) {
    const OwnedTensor skip = (*shortcut)(x);
    return conv2(h, &skip.view());
  }
  return conv2(h, &x);
}

SpatialSelfAttention SpatialSelfAttention::load(const WeightReader& w, const std::string& name, int64_t channels,
                                                int groups, float eps) {
  SpatialSelfAttention a;
  a.norm = GroupNorm::load(w, name + ".group_norm", channels, groups, eps);
  const bool legacy = !w.has(name + ".to_q.weight") && w.has(name + ".query.weight");
  a.q = Linear::load(w, name + (legacy ? ".query" : ".to_q"), channels, channels);
  a.k = Linear::load(w, name + (legacy ? ".key" : ".to_k"), channels, channels);
  a.v = Linear::load(w, name + (legacy ? ".value" : ".to_v"), channels, channels);
  a.out = Linear::load(w, name + (legacy ? ".proj_attn" : ".to_out.0"), channels, channels);
  return a;
}

OwnedTensor SpatialSelfAttention::operator()(const Tensor& x) const {
  const int64_t n = x.dim(0), positions = x.dim(1) * x.dim(2), c = x.dim(3);
  const OwnedTensor h = norm(x, /*silu=*/false);
  const Tensor tokens = h.view().reshape(Shape{n, positions, c});  // NHWC is already [N, H*W, C]
  const OwnedTensor q_ = q(tokens), k_ = k(tokens), v_ = v(tokens);
  OwnedTensor attended(Shape{n, positions, c}, DType::kF32);
  ops::attention(q_, k_, v_, {1, false, 0.0f}, attended);
  OwnedTensor y = out(attended);
  ops::add(y.view(), x.reshape(Shape{n, positions, c}), y);
  y.view() = y.view().reshape(x.shape);  // back to [N, H, W, C]
  return y;
}

}  // namespace hd
