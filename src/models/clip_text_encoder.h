// The CLIP text encoder of Stable Diffusion: SD1.x's CLIP ViT-L/14 (quick_gelu) and SD2.x's OpenCLIP
// ViT-H/14 as diffusers stores it (gelu; its 23 layers already end at OpenCLIP's penultimate layer, so
// the last hidden state is what SD2.x conditions on); SDXL's two, CLIP ViT-L and OpenCLIP ViT-bigG with
// its text projection (transformers' CLIPTextModelWithProjection), each read at its penultimate layer.
// Pre-LayerNorm transformer, causal self-attention, learned position embeddings, final LayerNorm.
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
  int64_t projection_dim = 0;  // text_projection's output width (CLIPTextModelWithProjection); 0: none
  // Where the pooled embedding is read: transformers takes the first position holding eos_token_id, or,
  // for configs saying 2 (CLIP's original, SDXL's included), the position of the largest id.
  int64_t eos_token_id = 2;

  // From the weights' shapes, and from config.json for what shapes cannot tell (heads, activation,
  // eps); without one, SD's own values (head width 64; quick_gelu at width 768, gelu otherwise).
  static ClipTextConfig detect(const ModelComponent& component);
};

// Which hidden state a pipeline conditions on.
enum class ClipHiddenState {
  kLastNormed,   // the last layer's output after the final LayerNorm (SD1.x, SD2.x): last_hidden_state
  kPenultimate,  // the next-to-last layer's output, without the final LayerNorm (SDXL): hidden_states[-2]
};

struct ClipTextOutput {
  OwnedTensor hidden;  // [B, L, width]
  // [B, projection_dim]: text_projection of the last normed state at the end-of-text token (transformers'
  // text_embeds); empty unless asked for.
  OwnedTensor pooled;
};

class ClipTextEncoder {
 public:
  // Weights placed where the model computes: the CPU in f32 (the default), or a GPU in f16/bf16.
  static ClipTextEncoder load(const ModelComponent& component, const ops::Placement& placement = {});
  const ops::Placement& placement() const { return placement_; }

  const ClipTextConfig& config() const { return config_; }
  // ids [B, L] (i32, L <= max_positions) -> last hidden state [B, L, width], after the final LayerNorm.
  OwnedTensor forward(const Tensor& ids) const;
  // The chosen hidden state, and the projected pooled embedding when `pooled` (which needs a text
  // projection: an Error otherwise). `ids` must be host memory when `pooled` (the token positions are read).
  ClipTextOutput encode(const Tensor& ids, ClipHiddenState state, bool pooled) const;
  // Moves every weight to `device` as it is (same dtype): to host memory to free a GPU between uses, and
  // back to the placement's device before encoding (encode needs them there). The first move to the host
  // copies the weights into page-locked memory, where they stay: later moves to the device copy from
  // there at the link's full speed, and moves back only free the device's copies.
  void move_weights(const Device& device);
  bool weights_on(const Device& device) const { return token_embedding_.view().device == device; }

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
  OwnedTensor projection_;  // [projection_dim, width], no bias; empty without one
  // While the weights are on the device after a stay on the host: their page-locked host copies, in
  // for_each_weight's order (empty otherwise).
  std::vector<OwnedTensor> host_copies_;
  template <typename Fn>
  void for_each_weight(Fn&& fn);
};

}  // namespace hd
