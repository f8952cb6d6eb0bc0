// Building blocks shared by the VAE and (later) the UNet, each bound to its weights by the names
// diffusers gives them. All activations are NHWC f32 on the CPU.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"
#include "models/weights.h"

namespace hd {

struct Conv2d {
  OwnedTensor weight, bias;  // [Cout, kh, kw, Cin], [Cout]
  int stride = 1, padding = 0, extra_end_padding = 0;

  static Conv2d load(const WeightReader& w, const std::string& name, int64_t out, int64_t in, int64_t k,
                     int stride = 1);
  int64_t out_channels() const { return weight.view().dim(0); }
  // out = conv(x) (+ residual, which may alias out).
  OwnedTensor operator()(const Tensor& x, const Tensor* residual = nullptr) const;
};

struct GroupNorm {
  OwnedTensor gamma, beta;
  int groups = 32;
  float eps = 1e-6f;

  static GroupNorm load(const WeightReader& w, const std::string& name, int64_t channels, int groups, float eps);
  OwnedTensor operator()(const Tensor& x, bool silu) const;
};

struct Linear {
  OwnedTensor weight, bias;
  static Linear load(const WeightReader& w, const std::string& name, int64_t out, int64_t in);
  OwnedTensor operator()(const Tensor& x) const;
};

// diffusers' ResnetBlock2D without a time embedding (the VAE's): norm-SiLU-conv twice, plus a 1x1
// shortcut when the channel count changes.
struct ResnetBlock {
  GroupNorm norm1, norm2;
  Conv2d conv1, conv2;
  std::optional<Conv2d> shortcut;

  static ResnetBlock load(const WeightReader& w, const std::string& name, int64_t in, int64_t out, int groups, float eps);
  OwnedTensor operator()(const Tensor& x) const;  // [N, H, W, in] -> [N, H, W, out]
};

// The VAE's mid-block attention: GroupNorm, single-head self-attention over the H*W positions, output
// projection, residual. Reads diffusers' to_q/to_k/to_v/to_out.0 names or the older query/key/value/proj_attn.
struct SpatialSelfAttention {
  GroupNorm norm;
  Linear q, k, v, out;

  static SpatialSelfAttention load(const WeightReader& w, const std::string& name, int64_t channels, int groups,
                                   float eps);
  OwnedTensor operator()(const Tensor& x) const;
};

}  // namespace hd
