#include "model_fixtures.h"

namespace hd::test {

namespace {
SafetensorsWriteItem zeros(const std::string& name, const std::string& dtype, std::vector<int64_t> shape) {
  int64_t n = dtype == "F32" ? 4 : 2;
  for (int64_t d : shape) n *= d;
  return {name, dtype, shape, std::vector<uint8_t>(size_t(n), 0)};
}
}  // namespace

std::vector<SafetensorsWriteItem> unet_tensors(FixtureFamily family, bool ldm, int in_channels,
                                               const std::string& prefix, const std::string& dtype) {
  const int64_t context = family == FixtureFamily::kSD1 ? 768 : family == FixtureFamily::kSD2 ? 1024 : 2048;
  std::vector<SafetensorsWriteItem> t;
  if (ldm) {
    t.push_back(zeros(prefix + "input_blocks.0.0.weight", dtype, {8, in_channels, 3, 3}));
    t.push_back(zeros(prefix + "time_embed.0.weight", dtype, {16, 8}));
    t.push_back(zeros(prefix + "input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight", dtype, {8, context}));
    if (family == FixtureFamily::kSDXL) t.push_back(zeros(prefix + "label_emb.0.0.weight", dtype, {16, 24}));
  } else {
    t.push_back(zeros(prefix + "conv_in.weight", dtype, {8, in_channels, 3, 3}));
    t.push_back(zeros(prefix + "time_embedding.linear_1.weight", dtype, {16, 8}));
    t.push_back(zeros(prefix + "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight", dtype, {8, context}));
    if (family == FixtureFamily::kSDXL) t.push_back(zeros(prefix + "add_embedding.linear_1.weight", dtype, {16, 24}));
  }
  return t;
}

std::vector<SafetensorsWriteItem> vae_tensors(const std::string& prefix) {
  return {zeros(prefix + "decoder.conv_in.weight", "F32", {8, 4, 3, 3}),
          zeros(prefix + "encoder.conv_in.weight", "F32", {8, 3, 3, 3})};
}

std::vector<SafetensorsWriteItem> text_encoder_tensors(int width, const std::string& prefix) {
  return {zeros(prefix + "text_model.embeddings.token_embedding.weight", "F16", {10, width}),
          zeros(prefix + "text_model.embeddings.position_ids", "F16", {1, 4})};
}

}  // namespace hd::test
