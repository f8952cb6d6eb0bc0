#include "io/model_source.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model_fixtures.h"
#include "test_util.h"

namespace hd {
namespace {

using test::FixtureFamily;

std::vector<SafetensorsWriteItem> concat(std::vector<std::vector<SafetensorsWriteItem>> parts) {
  std::vector<SafetensorsWriteItem> all;
  for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

int64_t elements_of(const std::vector<SafetensorsWriteItem>& items) {
  int64_t total = 0;
  for (const auto& item : items) {
    int64_t n = 1;
    for (const int64_t d : item.shape) n *= d;
    total += n;
  }
  return total;
}

std::string error_of(const std::string& path) {
  try {
    ModelSource::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelSource, SingleFileLdmIsSplitByPrefix) {
  test::TempDir dir;
  const auto unet = test::unet_tensors(FixtureFamily::kSD1, true, 4, "model.diffusion_model.");
  const auto vae = test::vae_tensors("first_stage_model.");
  const auto text = test::text_encoder_tensors(768, "cond_stage_model.transformer.");
  const auto path = dir.write("sd15.safetensors",
                              serialize_safetensors(concat(
                                  {unet, vae, text, {{"alphas_cumprod", "F32", {2}, test::zero_bytes(8)}}})));
  const ModelSource m = ModelSource::open(path.string());
  EXPECT_EQ(m.layout(), ModelLayout::kSingleFileLdm);
  ASSERT_NE(m.component("unet"), nullptr);
  EXPECT_EQ(m.component("unet")->prefix, "model.diffusion_model.");
  EXPECT_NE(m.component("unet")->find("input_blocks.0.0.weight"), nullptr);  // prefix stripped
  EXPECT_EQ(m.component("vae")->tensors.size(), 2u);
  EXPECT_EQ(m.component("text_encoder")->tensors.size(), 2u);
  EXPECT_EQ(m.component("other")->tensors.size(), 1u);
  // What a pipeline loads: the three components, not the tensor beside them.
  EXPECT_EQ(m.weight_elements(), elements_of(unet) + elements_of(vae) + elements_of(text));
}

TEST(ModelSource, DiffusersFolderWithShardsAndSideFiles) {
  test::TempDir dir;
  auto unet = test::unet_tensors(FixtureFamily::kSD2, false);
  // Shard the UNet in two files tied together by its index.
  std::vector<SafetensorsWriteItem> shard1(unet.begin(), unet.begin() + 1), shard2(unet.begin() + 1, unet.end());
  dir.write("m/unet/diffusion_pytorch_model-00001-of-00002.safetensors", serialize_safetensors(shard1));
  dir.write("m/unet/diffusion_pytorch_model-00002-of-00002.safetensors", serialize_safetensors(shard2));
  std::string index = "{\"weight_map\":{";
  for (size_t i = 0; i < unet.size(); ++i) {
    index += (i ? "," : "") + ("\"" + unet[i].name + "\":\"diffusion_pytorch_model-0000" + (i == 0 ? "1" : "2") +
                               "-of-00002.safetensors\"");
  }
  dir.write("m/unet/diffusion_pytorch_model.safetensors.index.json", index + "}}");
  dir.write("m/vae/diffusion_pytorch_model.fp16.safetensors", serialize_safetensors(test::vae_tensors()));
  dir.write("m/text_encoder/model.safetensors", serialize_safetensors(test::text_encoder_tensors(1024)));
  dir.write("m/scheduler/scheduler_config.json", std::string("{\"prediction_type\": \"v_prediction\"}"));
  dir.write("m/tokenizer/vocab.json", std::string("{}"));
  dir.write("m/tokenizer/merges.txt", std::string(""));

  const ModelSource m = ModelSource::open((dir.path() / "m").string());
  EXPECT_EQ(m.layout(), ModelLayout::kDiffusersFolder);
  EXPECT_EQ(m.files().size(), 4u);
  EXPECT_EQ(m.component("unet")->tensors.size(), unet.size());
  EXPECT_NE(m.component("vae"), nullptr);
  EXPECT_TRUE(m.scheduler_config().has_value());
  EXPECT_EQ(m.tokenizer_files(), "tokenizer/ (vocab.json + merges.txt)");
  EXPECT_EQ(m.weight_elements(), elements_of(unet) + elements_of(test::vae_tensors()) +
                                     elements_of(test::text_encoder_tensors(1024)));
}

TEST(ModelSource, ClearErrorsForWhatCannotBeLoaded) {
  test::TempDir dir;
  EXPECT_NE(error_of((dir.path() / "nothing").string()).find("no such file or directory"), std::string::npos);
  dir.write("empty_folder/readme.txt", std::string("hi"));
  EXPECT_NE(error_of((dir.path() / "empty_folder").string()).find("not a diffusers model folder"), std::string::npos);
  dir.write("pickled/unet/diffusion_pytorch_model.bin", std::vector<uint8_t>{'P', 'K', 3, 4, 1, 2, 3, 4});
  EXPECT_NE(error_of((dir.path() / "pickled").string()).find("never unpickles"), std::string::npos);
  dir.write("raw.ckpt", std::vector<uint8_t>{0x80, 2, '}', 'q', 0, 0, 0, 0, 0, 0});
  EXPECT_NE(error_of((dir.path() / "raw.ckpt").string()).find("never unpickles"), std::string::npos);
  dir.write("text.safetensors", std::string("hello, this is not a checkpoint"));
  EXPECT_NE(error_of((dir.path() / "text.safetensors").string()).find("not a safetensors file"), std::string::npos);
  dir.write("bad_index/unet/diffusion_pytorch_model.safetensors.index.json",
            std::string("{\"weight_map\":{\"a\":\"../../etc/passwd\"}}"));
  EXPECT_NE(error_of((dir.path() / "bad_index").string()).find("plain file name"), std::string::npos);
}

}  // namespace
}  // namespace hd
