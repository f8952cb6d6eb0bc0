// What the UNet is conditioned on, from a prompt: the stage that holds a model's text encoders with
// their tokenizers. SD1.x/2.x: one CLIP encoder read at its last normed hidden state. SDXL: CLIP ViT-L
// (`text_encoder`, `tokenizer`) and OpenCLIP ViT-bigG (`text_encoder_2`, `tokenizer_2`, padded with "!"),
// each read at its penultimate hidden state, concatenated along the channels (768 + 1280 = 2048), and the
// pooled embedding from the second's text projection; as diffusers' StableDiffusionXLPipeline.encode_prompt
// with the same prompt for both encoders.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/model_source.h"
#include "models/architecture.h"
#include "models/clip_text_encoder.h"
#include "ops/placement.h"
#include "text/clip_tokenizer.h"

namespace hd {

struct PromptConditioning {
  OwnedTensor context;  // [batch, 77, context width], where the models compute
  OwnedTensor pooled;   // [batch, pooled width] (SDXL), or empty
};

class TextConditioning {
 public:
  // The family's encoders and tokenizers from `model` (see tokenizer_files.h for where tokenizers are
  // looked for; `vocab_dir` overrides, for SDXL both tokenizers, the second padded with "!"). Errors name
  // the missing component.
  static TextConditioning load(const ModelSource& model, ModelFamily family, const std::optional<std::string>& vocab_dir,
                               const ops::Placement& placement);

  // Every sample of the batch conditioned on `prompt` (UTF-8).
  PromptConditioning encode(const std::string& prompt, int batch) const;
  // Zeros in the shapes encode gives: SDXL's unconditional input when the negative prompt is empty and the
  // model says force_zeros_for_empty_prompt.
  PromptConditioning zeros(int batch) const;

  // Keeps the encoders' weights in host memory between encodes (moved to the device for each), to free
  // device memory for the UNet and the VAE on a small GPU; false moves them back to stay.
  void keep_off_device(bool off);
  bool kept_off_device() const { return off_device_; }

  int64_t context_width() const;  // the encoders' widths summed
  int64_t pooled_width() const;   // 0 without a pooled embedding
  const ops::Placement& placement() const { return placement_; }

 private:
  struct Encoder {
    ClipTokenizer tokenizer;
    ClipTextEncoder model;
  };
  // Held through pointers: encode moves the weights of encoders kept off the device (and the stage is
  // otherwise const).
  std::vector<std::unique_ptr<Encoder>> encoders_;
  ClipHiddenState state_ = ClipHiddenState::kLastNormed;
  bool pooled_ = false;  // the last encoder gives the pooled embedding
  ops::Placement placement_;
  bool off_device_ = false;
};

}  // namespace hd
