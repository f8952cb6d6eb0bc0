#include "models/architecture.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace hd {

namespace {

// The first cross-attention key projection, [inner, context_dim], in either naming.
const TensorRef* find_cross_attention_key(const ModelComponent& unet) {
  for (const auto& t : unet.tensors)
    if (t.name.ends_with("attn2.to_k.weight") && t.shape().size() == 2) return &t;
  return nullptr;
}

int dim_or_zero(const TensorRef* t, size_t i) {
  if (t == nullptr) return 0;
  const std::vector<int64_t> shape = t->shape();
  return shape.size() > i ? int(shape[i]) : 0;
}

}  // namespace

std::string family_name(ModelFamily f) {
  switch (f) {
    case ModelFamily::kSD1: return "SD1.x";
    case ModelFamily::kSD2: return "SD2.x";
    case ModelFamily::kSDXL: return "SDXL";
    case ModelFamily::kUnknown: break;
  }
  return "unknown";
}

ArchitectureInfo detect_architecture(const ModelSource& model) {
  ArchitectureInfo info;
  info.prediction = "unknown";

  const ModelComponent* unet = model.component("unet");
  const ModelComponent* text = model.component("text_encoder");
  if (unet != nullptr) {
    // diffusers: conv_in.weight; LDM: input_blocks.0.0.weight. Both [320, in, 3, 3].
    const TensorRef* conv_in = unet->find("conv_in.weight");
    if (conv_in == nullptr) conv_in = unet->find("input_blocks.0.0.weight");
    info.unet_in_channels = dim_or_zero(conv_in, 1);
    const TensorRef* key = find_cross_attention_key(*unet);
    info.context_dim = dim_or_zero(key, 1);
    const bool has_add_embedding = unet->find("add_embedding.linear_1.weight") || unet->find("label_emb.0.0.weight");
    if (has_add_embedding) {
      // SDXL's text-time embedding; the base cross-attends to 2048 wide text, the refiner to 1280.
      info.family = ModelFamily::kSDXL;
      // The refiner conditions on the second text encoder alone (1280 wide in the real one).
      const bool refiner = info.context_dim == 1280 || (text == nullptr && model.component("text_encoder_2") != nullptr);
      info.evidence = "UNet has text-time embedding and " + std::to_string(info.context_dim) + "-wide cross-attention" +
                      (refiner ? " (the refiner's: the second text encoder alone)" : "");
    } else if (info.context_dim == 768) {
      info.family = ModelFamily::kSD1;
      info.evidence = "UNet cross-attends to 768-wide CLIP ViT-L text embeddings";
    } else if (info.context_dim == 1024) {
      info.family = ModelFamily::kSD2;
      info.evidence = "UNet cross-attends to 1024-wide OpenCLIP ViT-H text embeddings";
    } else if (key != nullptr) {
      info.evidence = "UNet cross-attention width " + std::to_string(info.context_dim) + " matches no known family";
    } else {
      info.evidence = "UNet has no cross-attention";
    }
  } else if (text != nullptr) {
    // Without a UNet, the text encoder's width still tells SD1.x from SD2.x.
    const TensorRef* tok = text->find("text_model.embeddings.token_embedding.weight");
    if (tok == nullptr) tok = text->find("transformer.text_model.embeddings.token_embedding.weight");
    if (tok == nullptr) tok = text->find("model.token_embedding.weight");
    const int width = dim_or_zero(tok, 1);
    if (width == 768) info.family = ModelFamily::kSD1;
    if (width == 1024) info.family = ModelFamily::kSD2;
    info.evidence = width ? "text encoder width " + std::to_string(width) : "no UNet";
  } else {
    info.evidence = "no UNet or text encoder found";
  }

  // Prediction type: a diffusers folder says it; a single file rarely does.
  if (const auto& config = model.scheduler_config()) {
    const auto j = nlohmann::json::parse(*config, nullptr, false);
    HD_CHECK(!j.is_discarded() && j.is_object(), model.path(), ": scheduler/scheduler_config.json is not a JSON object");
    if (j.contains("prediction_type")) {
      HD_CHECK(j["prediction_type"].is_string(), model.path(), ": scheduler_config.json prediction_type is not a string");
      info.prediction = j["prediction_type"].get<std::string>();
      info.prediction_source = "scheduler_config.json";
    } else {
      info.prediction = "epsilon";
      info.prediction_source = "scheduler_config.json default";
    }
  } else if (model.layout() == ModelLayout::kSingleFileLdm) {
    const ModelComponent* other = model.component("other");
    if (other != nullptr && other->find("v_pred") != nullptr) {
      info.prediction = "v_prediction";
      info.prediction_source = "v_pred key";
    } else if (info.family == ModelFamily::kSD1 || info.family == ModelFamily::kSDXL) {
      info.prediction = "epsilon";
      info.prediction_source = family_name(info.family) + " default";
    } else if (info.family == ModelFamily::kSD2) {
      info.prediction_source = "SD2.x 512-base is epsilon and 768-v is v_prediction; the weights do not say which";
    }
  }
  return info;
}

}  // namespace hd
