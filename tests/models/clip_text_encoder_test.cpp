// The text encoders against transformers' CLIPTextModel on tiny seeded models
// (tests/fixtures/models/tiny_sd{1,2}, recorded by tools/make_fixtures.py --only models).
#include "models/clip_text_encoder.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fixture_util.h"
#include "io/model_source.h"
#include "test_util.h"

namespace hd {
namespace {

void check_family(const std::string& family, bool quick_gelu) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family);
  const ClipTextEncoder encoder = ClipTextEncoder::load(*model.component("text_encoder"));
  EXPECT_EQ(encoder.config().layers, 3);
  EXPECT_EQ(encoder.config().heads, 4);
  EXPECT_EQ(encoder.config().quick_gelu, quick_gelu);

  const test::Fixture fixture("models/tiny_" + family + "_components.safetensors");
  const std::vector<int64_t> ids64 = fixture.ints("input_ids");
  OwnedTensor ids(Shape{2, 77}, DType::kI32);
  for (size_t i = 0; i < ids64.size(); ++i) ids.ptr<int32_t>()[i] = int32_t(ids64[i]);
  const OwnedTensor hidden = encoder.forward(ids);
  const std::vector<float> expected = fixture.floats("last_hidden_state");
  const std::vector<double> reference(expected.begin(), expected.end());
  const double err = test::relative_l2(hidden, reference);
  std::printf("%s text encoder: relative L2 error %.3g against transformers\n", family.c_str(), err);
  EXPECT_LT(err, 1e-4);  // the bound for every component
}

TEST(ClipTextEncoder, Sd1MatchesTransformers) { check_family("sd1", true); }
TEST(ClipTextEncoder, Sd2MatchesTransformers) { check_family("sd2", false); }

// SDXL's two encoders (tiny_sdxl_pipeline): the penultimate hidden state (transformers'
// hidden_states[-2]), the last one, and encoder 2's projected pooled embedding (text_embeds).
TEST(ClipTextEncoder, SdxlEncodersMatchTransformers) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline");
  const test::Fixture fixture("models/tiny_sdxl_pipeline_components.safetensors");
  for (const char* name : {"encoder1", "encoder2"}) {
    const bool second = std::string(name) == "encoder2";
    const ClipTextEncoder encoder = ClipTextEncoder::load(*model.component(second ? "text_encoder_2" : "text_encoder"));
    EXPECT_EQ(encoder.config().projection_dim, second ? 24 : 0);
    EXPECT_EQ(encoder.config().quick_gelu, !second);
    const std::vector<int64_t> ids64 = fixture.ints(std::string(name) + ".input_ids");
    OwnedTensor ids(Shape{2, 77}, DType::kI32);
    for (size_t i = 0; i < ids64.size(); ++i) ids.ptr<int32_t>()[i] = int32_t(ids64[i]);
    const ClipTextOutput penultimate = encoder.encode(ids, ClipHiddenState::kPenultimate, second);
    const ClipTextOutput last = encoder.encode(ids, ClipHiddenState::kLastNormed, false);
    const double err_penultimate =
        test::relative_l2(penultimate.hidden, test::as_reference(fixture.tensor(std::string(name) + ".penultimate")));
    const double err_last =
        test::relative_l2(last.hidden, test::as_reference(fixture.tensor(std::string(name) + ".last_hidden_state")));
    std::printf("%s: penultimate rel. L2 %.2e, last %.2e\n", name, err_penultimate, err_last);
    EXPECT_LT(err_penultimate, 1e-4);
    EXPECT_LT(err_last, 1e-4);
    EXPECT_EQ(last.pooled.view().data, nullptr);
    if (second) {
      const double err_pooled = test::relative_l2(penultimate.pooled, test::as_reference(fixture.tensor("encoder2.text_embeds")));
      std::printf("%s: pooled rel. L2 %.2e\n", name, err_pooled);
      EXPECT_LT(err_pooled, 1e-4);
    } else {
      EXPECT_THROW(encoder.encode(ids, ClipHiddenState::kPenultimate, true), Error);  // no text_projection
    }
  }
}

TEST(ClipTextEncoder, WrongShapesAndOpenClipNamesAreClearErrors) {
  test::TempDir dir;
  // A token embedding that disagrees with the position embedding's width.
  dir.write("m/text_encoder/model.safetensors",
            serialize_safetensors({{"embeddings.token_embedding.weight", "F32", {10, 8}, test::zero_bytes(320)},
                                   {"embeddings.position_embedding.weight", "F32", {77, 4}, test::zero_bytes(77 * 16)}}));
  EXPECT_THROW(ClipTextEncoder::load(*ModelSource::open((dir.path() / "m").string()).component("text_encoder")), Error);
  dir.write("o/text_encoder/model.safetensors",
            serialize_safetensors({{"model.token_embedding.weight", "F32", {10, 8}, test::zero_bytes(320)}}));
  try {
    ClipTextEncoder::load(*ModelSource::open((dir.path() / "o").string()).component("text_encoder"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("OpenCLIP"), std::string::npos);
  }
}

}  // namespace
}  // namespace hd
