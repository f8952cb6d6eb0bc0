#include "pipeline/text_conditioning.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "ops/ops.h"
#include "ops/placement.h"
#include "pipeline/tokenizer_files.h"

namespace hd {

namespace {

// `one` [1, ...] repeated `batch` times along the first dimension.
OwnedTensor repeated(const OwnedTensor& one, int batch) {
  Shape shape = one.view().shape;
  shape[0] = batch;
  OwnedTensor out = OwnedTensor::like(one, shape);
  for (int b = 0; b < batch; ++b) ops::copy(one, out.view().slice(0, b, 1));
  return out;
}

OwnedTensor placed_zeros(Shape shape, const ops::Placement& placement) {
  OwnedTensor host(shape, DType::kF32);
  std::memset(host.view().data, 0, host.view().nbytes());
  return ops::place(host, placement);
}

}  // namespace

TextConditioning TextConditioning::load(const ModelSource& model, ModelFamily family,
                                        const std::optional<std::string>& vocab_dir, const ops::Placement& placement) {
  TextConditioning t;
  t.placement_ = placement;
  std::vector<std::pair<const char*, const char*>> parts;  // (encoder, tokenizer)
  if (family == ModelFamily::kSDXL) {
    // The refiner has the second encoder only.
    if (model.component("text_encoder") != nullptr) parts.push_back({"text_encoder", "tokenizer"});
    parts.push_back({"text_encoder_2", "tokenizer_2"});
    t.state_ = ClipHiddenState::kPenultimate;
    t.pooled_ = true;
  } else {
    parts.push_back({"text_encoder", "tokenizer"});
  }
  for (const auto& [encoder_name, tokenizer_name] : parts) {
    const ModelComponent* component = model.component(encoder_name);
    HD_CHECK(component != nullptr, model.path(), ": the model has no ", encoder_name,
             family == ModelFamily::kSDXL ? " (SDXL conditions on two text encoders, text_encoder and text_encoder_2)"
                                          : "");
    // SDXL's second tokenizer is CLIP's vocabulary padded with "!" (OpenCLIP's padding); a --vocab folder
    // gives the vocabulary for both, so that padding is set here.
    const bool open_clip_padding = vocab_dir && std::string_view(tokenizer_name) == "tokenizer_2";
    auto e = std::make_unique<Encoder>(
        Encoder{ClipTokenizer::load(find_tokenizer_folder(model, family, vocab_dir, tokenizer_name),
                                    open_clip_padding ? std::optional<std::string>("!") : std::nullopt),
                ClipTextEncoder::load(*component, placement)});
    HD_CHECK(e->model.config().vocab >= int64_t(e->tokenizer.vocab_size()), model.path(), ": the ", tokenizer_name,
             "'s vocabulary (", e->tokenizer.vocab_size(), ") exceeds ", encoder_name, "'s (", e->model.config().vocab,
             ")");
    t.encoders_.push_back(std::move(e));
  }
  if (t.pooled_) {
    HD_CHECK(t.encoders_.back()->model.config().projection_dim > 0, model.path(),
             ": text_encoder_2 has no text_projection.weight; SDXL's pooled text embedding comes from it");
  }
  return t;
}

int64_t TextConditioning::context_width() const {
  int64_t width = 0;
  for (const auto& e : encoders_) width += e->model.config().width;
  return width;
}

int64_t TextConditioning::pooled_width() const {
  return pooled_ ? encoders_.back()->model.config().projection_dim : 0;
}

PromptConditioning TextConditioning::encode(const std::string& prompt, int batch) const {
  // Every sample of the batch has the same prompt: encode it once, then repeat.
  std::vector<OwnedTensor> hidden;
  OwnedTensor pooled;
  for (size_t i = 0; i < encoders_.size(); ++i) {
    Encoder& e = *encoders_[i];
    const std::vector<int32_t> ids = e.tokenizer.encode(prompt);
    OwnedTensor tokens(Shape{1, int64_t(ids.size())}, DType::kI32);
    std::copy(ids.begin(), ids.end(), tokens.ptr<int32_t>());
    const bool last = i + 1 == encoders_.size();
    if (off_device_) e.model.move_weights(placement_.device);  // one encoder's weights on the device at a time
    ClipTextOutput out = e.model.encode(tokens, state_, pooled_ && last);
    if (off_device_) e.model.move_weights(Device::cpu());
    hidden.push_back(std::move(out.hidden));
    if (pooled_ && last) pooled = std::move(out.pooled);
  }
  OwnedTensor context = std::move(hidden[0]);
  for (size_t i = 1; i < hidden.size(); ++i) {  // along the channels, in the encoders' order
    const Tensor& a = context.view();
    OwnedTensor joined = OwnedTensor::like(a, Shape{a.dim(0), a.dim(1), a.dim(2) + hidden[i].view().dim(2)});
    ops::concat_channels(a, hidden[i], joined);
    context = std::move(joined);
  }
  PromptConditioning c;
  c.context = repeated(context, batch);
  if (pooled_) c.pooled = repeated(pooled, batch);
  return c;
}

void TextConditioning::keep_off_device(bool off) {
  off_device_ = off && placement_.device.is_gpu();
  for (auto& e : encoders_) e->model.move_weights(off_device_ ? Device::cpu() : placement_.device);
}

PromptConditioning TextConditioning::zeros(int batch) const {
  PromptConditioning c;
  c.context = placed_zeros(Shape{batch, ClipTokenizer::kContextLength, context_width()}, placement_);
  if (pooled_) c.pooled = placed_zeros(Shape{batch, pooled_width()}, placement_);
  return c;
}

}  // namespace hd
