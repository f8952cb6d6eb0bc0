// The CLIP text encoder of Stable Diffusion: SD1.x's CLIP ViT-L/14 (quick_gelu) and SD2.x's OpenCLIP
// ViT-H/14 as diffusers stores it (gelu; its 23 layers already end at OpenCLIP's penultimate layer, so
// the last hidden state is what SD2.x conditions on). Pre-LayerNorm transformer, causal self-attention,
// learned position embeddings, final LayerNorm.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "io/model_source.h"
#include "ops/placement.h"

namespace hd {

struct ClipTextConfig {
  int64_t vocab = 0, width = 0, layers = 0, heads = 0, intermediate = 0, max_positions = 0;
  bool quick_gelu = true;  // SD1.x: quick_gelu; SD2.x: gelu (erf)
  float eps = 1e-5f;

  // From the weights' shapes, and from config.json for what shapes cannot tell (heads, activation,
  // eps); without one, SD's own values (head width 64; quick_gelu at width 768, gelu otherwise).
  static ClipTextConfig detect(const ModelComponent& component);
};

class ClipTextEncoder {
 public:
  // Weights placed where the model computes: the CPU in f32 (the default), or a GPU in f16/bf16.
  static ClipTextEncoder load(const ModelComponent& component, const ops::Placement& placement = {});
  const ops::Placement& placement() const { return placement_; }

  const ClipTextConfig& config() const { return config_; }
  // ids [B, L] (i32, L <= max_positions) -> last hidden state [B, L, width], after the final LayerNorm.
  OwnedTensor forward(const Tensor& ids) const;

 private:
  struct Linear {
    OwnedTensor weight, bias;
  };
  struct Norm {
    OwnedTensor gamma, beta;
  };
  struct Layer {
    Norm norm1, norm2;
    Linear q, k, v, out, fc1, fc2;
  };

  ops::Placement placement_;
  ClipTextConfig config_;
  OwnedTensor token_embedding_, position_embedding_;
  std::vector<Layer> layers_;
  Norm final_norm_;
};

}  // namespace hd
