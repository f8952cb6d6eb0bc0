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
