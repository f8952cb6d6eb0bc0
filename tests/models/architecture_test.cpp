#include "models/architecture.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model_fixtures.h"
#include "test_util.h"

namespace hd {
namespace {

using test::FixtureFamily;

ArchitectureInfo detect_single_file(const test::TempDir& dir, std::vector<SafetensorsWriteItem> tensors) {
  const auto path = dir.write("model.safetensors", serialize_safetensors(std::move(tensors)));
  return detect_architecture(ModelSource::open(path.string()));
}

TEST(Architecture, DetectsEachFamilyInLdmNaming) {
  test::TempDir dir;
  auto sd1 = detect_single_file(dir, test::unet_tensors(FixtureFamily::kSD1, true, 4, "model.diffusion_model."));
  EXPECT_EQ(sd1.family, ModelFamily::kSD1);
  EXPECT_EQ(sd1.prediction, "epsilon");
  EXPECT_EQ(sd1.context_dim, 768);

  auto sd2 = detect_single_file(dir, test::unet_tensors(FixtureFamily::kSD2, true, 4, "model.diffusion_model."));
  EXPECT_EQ(sd2.family, ModelFamily::kSD2);
  EXPECT_EQ(sd2.prediction, "unknown");  // SD2.x single files do not say epsilon or v

  auto sd2v = test::unet_tensors(FixtureFamily::kSD2, true, 4, "model.diffusion_model.");
  sd2v.push_back({"v_pred", "F32", {}, test::zero_bytes(4)});
  EXPECT_EQ(detect_single_file(dir, sd2v).prediction, "v_prediction");

  auto xl = detect_single_file(dir, test::unet_tensors(FixtureFamily::kSDXL, true, 4, "model.diffusion_model."));
  EXPECT_EQ(xl.family, ModelFamily::kSDXL);

  auto inpaint = detect_single_file(dir, test::unet_tensors(FixtureFamily::kSD1, true, 9, "model.diffusion_model."));
  EXPECT_EQ(inpaint.unet_in_channels, 9);
}

TEST(Architecture, DetectsFamilyOfABareDiffusersUnet) {
  test::TempDir dir;
  auto xl = detect_single_file(dir, test::unet_tensors(FixtureFamily::kSDXL, false));
  EXPECT_EQ(xl.family, ModelFamily::kSDXL);
  auto sd2 = detect_single_file(dir, test::unet_tensors(FixtureFamily::kSD2, false));
  EXPECT_EQ(sd2.family, ModelFamily::kSD2);
  auto none = detect_single_file(dir, {{"something", "F32", {1}, test::zero_bytes(4)}});
  EXPECT_EQ(none.family, ModelFamily::kUnknown);
}

TEST(Architecture, FolderPredictionComesFromSchedulerConfig) {
  test::TempDir dir;
  dir.write("m/unet/diffusion_pytorch_model.safetensors", serialize_safetensors(test::unet_tensors(FixtureFamily::kSD2, false)));
  dir.write("m/scheduler/scheduler_config.json", std::string("{\"prediction_type\":\"v_prediction\"}"));
  const auto info = detect_architecture(ModelSource::open((dir.path() / "m").string()));
  EXPECT_EQ(info.family, ModelFamily::kSD2);
  EXPECT_EQ(info.prediction, "v_prediction");
  EXPECT_EQ(info.prediction_source, "scheduler_config.json");

  dir.write("bad/unet/diffusion_pytorch_model.safetensors", serialize_safetensors(test::unet_tensors(FixtureFamily::kSD1, false)));
  dir.write("bad/scheduler/scheduler_config.json", std::string("{not json"));
  EXPECT_THROW(detect_architecture(ModelSource::open((dir.path() / "bad").string())), Error);
}

TEST(Architecture, TextEncoderAloneTellsSd1FromSd2) {
  test::TempDir dir;
  dir.write("m/text_encoder/model.safetensors", serialize_safetensors(test::text_encoder_tensors(1024)));
  EXPECT_EQ(detect_architecture(ModelSource::open((dir.path() / "m").string())).family, ModelFamily::kSD2);
}

}  // namespace
}  // namespace hd
