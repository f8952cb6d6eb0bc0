// Which weight each layer of a LoRA file changes (the fixtures of tools/lora_fixtures.py, in kohya's SD1.x
// and SDXL forms and diffusers' PEFT form), and the refusals of what cannot be applied.
#include "io/lora.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "io/model_source.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

// component/tensor -> the layer's key, for every layer of `file` on `model`.
std::map<std::string, std::string> targets(const std::string& model, const std::string& file) {
  const ModelSource source = ModelSource::open(kModels + model);
  const SafetensorsFile lora = SafetensorsFile::open(kModels + file);
  std::map<std::string, std::string> out;
  for (const LoraLayer& layer : lora_layers(lora, source.components())) {
    EXPECT_TRUE(out.emplace(layer.component + "/" + layer.tensor, layer.key).second) << layer.tensor;
  }
  return out;
}

TEST(Lora, ParsesFileAndScale) {
  EXPECT_EQ(parse_lora_choice("a.safetensors").path, "a.safetensors");
  EXPECT_EQ(parse_lora_choice("a.safetensors").scale, 1.0f);
  EXPECT_EQ(parse_lora_choice("dir/a.safetensors:0.8").path, "dir/a.safetensors");
  EXPECT_EQ(parse_lora_choice("dir/a.safetensors:0.8").scale, 0.8f);
  EXPECT_EQ(parse_lora_choice("a.safetensors:-1").scale, -1.0f);
  EXPECT_EQ(parse_lora_choice("odd:name.safetensors").path, "odd:name.safetensors");  // not a number: a name
  const std::vector<LoraChoice> two = parse_lora_list("a.safetensors:0.5,b.safetensors");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].scale, 0.5f);
  EXPECT_EQ(two[1].path, "b.safetensors");
  test::expect_error_containing([] { parse_lora_choice(":0.5"); }, "no file named");
  test::expect_error_containing([] { parse_lora_list("a.safetensors,"); }, "no file named");
  test::expect_error_containing([] { parse_lora_choice("a.safetensors:inf"); }, "finite");
  // The text encoders' scale, then the UNet's, as A1111's <lora:NAME:TE:UNET>.
  const LoraChoice apart = parse_lora_choice("dir/a.safetensors:0.5:1.25");
  EXPECT_EQ(apart.path, "dir/a.safetensors");
  EXPECT_EQ(apart.scale, 0.5f);
  EXPECT_EQ(apart.unet_scale, 1.25f);
  EXPECT_EQ(apart.scale_of("text_encoder_2"), 0.5f);
  EXPECT_EQ(apart.scale_of("unet"), 1.25f);
  EXPECT_FALSE(parse_lora_choice("a.safetensors:0.5").unet_scale.has_value());
  EXPECT_EQ(parse_lora_choice("a.safetensors:0.5").scale_of("unet"), 0.5f);
  test::expect_error_containing([] { parse_lora_choice("a.safetensors:nan:1"); }, "finite");
}

TEST(Lora, KohyaSd1NamesFindTheUnetAndTextEncoderWeights) {
  const auto t = targets("tiny_sd1", "tiny_sd1_lora_kohya.safetensors");
  EXPECT_EQ(t.at("unet/down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight"),
            "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q");
  EXPECT_EQ(t.at("unet/up_blocks.1.attentions.2.transformer_blocks.0.ff.net.0.proj.weight"),
            "lora_unet_up_blocks_1_attentions_2_transformer_blocks_0_ff_net_0_proj");
  EXPECT_EQ(t.at("unet/down_blocks.0.resnets.1.conv1.weight"),
            "lora_unet_down_blocks_0_resnets_1_conv1");  // 3x3
  EXPECT_EQ(t.at("unet/down_blocks.0.downsamplers.0.conv.weight"),
            "lora_unet_down_blocks_0_downsamplers_0_conv");
  // kohya's text encoder names keep transformers 4's "text_model." root, which the fixture's
  // (transformers 5) weights do not have.
  EXPECT_EQ(t.at("text_encoder/encoder.layers.2.mlp.fc2.weight"),
            "lora_te_text_model_encoder_layers_2_mlp_fc2");
  // Every linear map and convolution of the blocks (tools/lora_fixtures.py): 3 encoder layers of 6.
  size_t text = 0;
  for (const auto& [target, key] : t) text += target.starts_with("text_encoder/");
  EXPECT_EQ(text, 18u);
}

TEST(Lora, PeftNamesAreDiffusersOwn) {
  const auto t = targets("tiny_sd1", "tiny_sd1_lora_peft.safetensors");
  EXPECT_EQ(t.at("unet/mid_block.attentions.0.transformer_blocks.0.attn2.to_out.0.weight"),
            "unet.mid_block.attentions.0.transformer_blocks.0.attn2.to_out.0");
  EXPECT_EQ(t.at("text_encoder/encoder.layers.0.self_attn.k_proj.weight"),
            "text_encoder.text_model.encoder.layers.0.self_attn.k_proj");
}

// sd-scripts names SDXL's UNet modules by their original (LDM) names: input_blocks.{1 + level · 3 + j}
// with layers_per_block 2, the level's downsampler at j = 2, output_blocks likewise from the top level.
TEST(Lora, KohyaSdxlOriginalNamesFindDiffusersWeights) {
  const auto t = targets("tiny_sdxl_pipeline", "tiny_sdxl_lora_kohya.safetensors");
  EXPECT_EQ(t.at("unet/down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q.weight"),
            "lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q");
  EXPECT_EQ(t.at("unet/down_blocks.2.attentions.1.transformer_blocks.1.ff.net.2.weight"),
            "lora_unet_input_blocks_8_1_transformer_blocks_1_ff_net_2");
  EXPECT_EQ(t.at("unet/down_blocks.0.downsamplers.0.conv.weight"), "lora_unet_input_blocks_3_0_op");
  EXPECT_EQ(t.at("unet/down_blocks.1.resnets.0.conv_shortcut.weight"),
            "lora_unet_input_blocks_4_0_skip_connection");
  EXPECT_EQ(t.at("unet/mid_block.resnets.1.time_emb_proj.weight"), "lora_unet_middle_block_2_emb_layers_1");
  EXPECT_EQ(t.at("unet/mid_block.attentions.0.proj_in.weight"), "lora_unet_middle_block_1_proj_in");
  EXPECT_EQ(t.at("unet/up_blocks.0.resnets.2.conv2.weight"), "lora_unet_output_blocks_2_0_out_layers_3");
  EXPECT_EQ(t.at("unet/up_blocks.0.upsamplers.0.conv.weight"), "lora_unet_output_blocks_2_2_conv");
  EXPECT_EQ(t.at("unet/up_blocks.1.upsamplers.0.conv.weight"), "lora_unet_output_blocks_5_2_conv");
  EXPECT_EQ(t.at("text_encoder/encoder.layers.1.self_attn.q_proj.weight"),
            "lora_te1_text_model_encoder_layers_1_self_attn_q_proj");
  EXPECT_EQ(
      t.at("text_encoder_2/text_model.encoder.layers.1.self_attn.q_proj.weight"),  // saved with the root
      "lora_te2_text_model_encoder_layers_1_self_attn_q_proj");
}

// The same layers find the same weights in the single-file checkpoint, whose names were mapped from the
// original ones (the second text encoder's q/k/v rows of one fused OpenCLIP tensor; both encoders under
// "text_model.", which the folder's first encoder lacks).
TEST(Lora, SingleFileCheckpointsTakeTheSameLayers) {
  const ModelSource folder = ModelSource::open(kModels + "tiny_sdxl_pipeline");
  const ModelSource single = ModelSource::open(kModels + "tiny_sdxl_pipeline.safetensors");
  const SafetensorsFile lora = SafetensorsFile::open(kModels + "tiny_sdxl_lora_kohya.safetensors");
  const auto a = lora_layers(lora, folder.components()), b = lora_layers(lora, single.components());
  ASSERT_EQ(a.size(), b.size());
  const auto rootless = [](const LoraLayer& l) {
    return l.component + "/" + (l.tensor.starts_with("text_model.") ? l.tensor.substr(11) : l.tensor);
  };
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(rootless(a[i]), rootless(b[i]));
}

TEST(Lora, ALoraOfAnotherFamilyIsRefusedNamingALayer) {
  const auto sd1_on_sdxl = [] { targets("tiny_sdxl_pipeline", "tiny_sd1_lora_kohya.safetensors"); };
  test::expect_error_containing(sd1_on_sdxl, "layers change no weight of this model");
  test::expect_error_containing(sd1_on_sdxl, "another model family");
  ModelSource source = ModelSource::open(kModels + "tiny_sdxl_pipeline");
  test::expect_error_containing(
      [&] {
        source.add_lora({kModels + "tiny_sd1_lora_kohya.safetensors", 1.0f});
      },
      "lora_unet_");
  EXPECT_TRUE(source.loras().empty());  // nothing changed
  test::expect_error_containing(
      [&] {
        source.add_lora({kModels + "missing.safetensors", 1.0f});
      },
      "no such LoRA file");
}

// An F32 tensor of zeros named `name`, for the files the tests build.
SafetensorsWriteItem zeros(std::string name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return SafetensorsWriteItem{std::move(name), "F32", std::move(shape), test::zero_bytes(size_t(n) * 4)};
}

// A zero LoRA layer `key` for a weight of `shape` ([out, in] or [out, in, kh, kw]) at rank 2.
std::vector<SafetensorsWriteItem> zero_layer(const std::string& key, std::vector<int64_t> shape,
                                             bool peft = false) {
  std::vector<int64_t> down = shape, up = {shape[0], 2};
  down[0] = 2;
  if (shape.size() == 4) up.insert(up.end(), {1, 1});
  return {zeros(key + (peft ? ".lora_A.weight" : ".lora_down.weight"), down),
          zeros(key + (peft ? ".lora_B.weight" : ".lora_up.weight"), up)};
}

// The original names outside the blocks (conv_in, the time and text-time embeddings, conv_out), and
// diffusers' older attention-processor names, each find their weight.
TEST(Lora, OriginalNamesOutsideTheBlocksAndProcessorNamesFindTheirWeights) {
  test::TempDir dir;
  const ModelSource source = ModelSource::open(kModels + "tiny_sdxl_pipeline");
  const ModelComponent& unet = *source.component("unet");
  const std::pair<std::string, std::string> cases[] = {
      {"lora_unet_input_blocks_0_0", "conv_in.weight"},
      {"lora_unet_time_embed_2", "time_embedding.linear_2.weight"},
      {"lora_unet_label_emb_0_0", "add_embedding.linear_1.weight"},
      {"lora_unet_out_2", "conv_out.weight"},
      {"unet.down_blocks.1.attentions.0.transformer_blocks.0.attn2.processor.to_out_lora",
       "down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_out.0.weight"}};
  for (const auto& [key, tensor] : cases) {
    SCOPED_TRACE(key);
    std::vector<SafetensorsWriteItem> items = zero_layer(key, unet.find(tensor)->shape());
    if (key.find(".processor.") != std::string::npos) {  // its spelling: ...to_out_lora.down.weight
      items[0].name = key + ".down.weight";
      items[1].name = key + ".up.weight";
    }
    const auto path = dir.write("l.safetensors", serialize_safetensors(items));
    const SafetensorsFile file = SafetensorsFile::open(path.string());
    const std::vector<LoraLayer> layers = lora_layers(file, source.components());
    ASSERT_EQ(layers.size(), 1u);
    EXPECT_EQ(layers[0].tensor, tensor);
  }
}

// Files built here: kinds of layer the engine does not apply, and broken LoRA layers.
TEST(Lora, OtherLayerKindsAndBrokenLayersAreRefusedByName) {
  test::TempDir dir;
  const ModelSource source = ModelSource::open(kModels + "tiny_sd1");
  const std::string q = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  // Each file's layers against the model, expecting an error that says `text`.
  const auto refused = [&](const std::vector<SafetensorsWriteItem>& items, const std::string& text) {
    const auto path = dir.write("l.safetensors", serialize_safetensors(items));
    const SafetensorsFile file = SafetensorsFile::open(path.string());
    test::expect_error_containing([&] { lora_layers(file, source.components()); }, text);
  };
  // The tiny SD1 UNet's first self-attention: to_q is [32, 32].
  refused({zeros(q + ".hada_w1_a", {4, 32})}, "part of a LoHa layer");
  refused({zeros(q + ".lokr_w1", {4, 32})}, "LoKr");
  refused({zeros(q + ".dora_scale", {32})}, "DoRA");
  refused({zeros(q + ".weight", {4, 32})}, "is not a LoRA weight");
  refused({zeros(q + ".diff_b", {32})}, "whole-bias difference");
  // A checkpoint given as a LoRA: its names are no layer's ("diffusion" is no ".diff" layer).
  refused({zeros("model.diffusion_model.out.2.bias", {4})}, "is not a LoRA weight");
  refused({zeros(q + ".lora_down.weight", {4, 32})}, "lacks its up weight");
  refused({zeros(q + ".lora_down.weight", {4, 31}), zeros(q + ".lora_up.weight", {32, 4})},
          "(up [32, 4], down [4, 31]) does not fit "
          "'down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight' "
          "of the unet [32, 32]");
  refused({zeros(q + ".lora_down.weight", {4, 32}), zeros(q + ".lora_up.weight", {32, 4}),
           zeros(q + ".alpha", {2})},
          "is not one number");
  refused({}, "holds no LoRA layer");
  // ComfyUI's own saved form, say: a prefix this engine does not read is named, not called another model's.
  refused(zero_layer("diffusion_model.input_blocks.1.1.proj_in", {32, 32, 1, 1}),
          "starts with none of the prefixes");
  // Two spellings of one module in one file would add its change twice.
  std::vector<SafetensorsWriteItem> twice = zero_layer(q, {32, 32});
  for (auto& item :
       zero_layer("unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q", {32, 32}, true))
    twice.push_back(std::move(item));
  refused(twice, "both change 'down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight'");
}

}  // namespace
}  // namespace hd
