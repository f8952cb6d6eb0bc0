// The text-conditioning stage against diffusers' StableDiffusionXLPipeline.encode_prompt on the tiny
// SDXL pipeline (tests/fixtures/models/tiny_sdxl_pipeline, from tools/make_fixtures.py --only
// sdxl_pipeline): both encoders' penultimate states concatenated, the pooled embedding, zeros.
#include "pipeline/text_conditioning.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fixture_util.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kSdxl = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline";

TEST(TextConditioning, SdxlMatchesDiffusersEncodePrompt) {
  const ModelSource model = ModelSource::open(kSdxl);
  const TextConditioning text = TextConditioning::load(model, ModelFamily::kSDXL, std::nullopt, {});
  EXPECT_EQ(text.context_width(), 32 + 48);
  EXPECT_EQ(text.pooled_width(), 24);
  const test::Fixture fixture("models/tiny_sdxl_pipeline_components.safetensors");
  const auto& c = fixture.cases()[0];
  for (const auto& [prompt, embeds, pooled] :
       {std::tuple{c["prompt"].get<std::string>(), "prompt_embeds", "pooled_prompt_embeds"},
        {c["negative_prompt"].get<std::string>(), "negative_prompt_embeds", "negative_pooled_prompt_embeds"}}) {
    const PromptConditioning got = text.encode(prompt, 2);  // a batch of two: the same rows twice
    ASSERT_EQ(got.context.view().shape, (Shape{2, 77, 80}));
    ASSERT_EQ(got.pooled.view().shape, (Shape{2, 24}));
    for (int b = 0; b < 2; ++b) {
      const double context_err = test::relative_l2(OwnedTensor::copy_of(got.context.view().slice(0, b, 1)),
                                                   test::as_reference(fixture.tensor(embeds)));
      const double pooled_err = test::relative_l2(OwnedTensor::copy_of(got.pooled.view().slice(0, b, 1)),
                                                  test::as_reference(fixture.tensor(pooled)));
      std::printf("%-24s context rel. L2 %.2e, pooled %.2e\n", embeds, context_err, pooled_err);
      EXPECT_LT(context_err, 1e-4);
      EXPECT_LT(pooled_err, 1e-4);
    }
  }
  const PromptConditioning zeros = text.zeros(3);
  ASSERT_EQ(zeros.context.view().shape, (Shape{3, 77, 80}));
  ASSERT_EQ(zeros.pooled.view().shape, (Shape{3, 24}));
  for (const OwnedTensor* t : {&zeros.context, &zeros.pooled}) {
    const float* v = t->ptr<float>();
    EXPECT_TRUE(std::all_of(v, v + t->view().numel(), [](float x) { return x == 0.0f; }));
  }
}

TEST(TextConditioning, SdxlWithoutItsSecondEncoderIsAClearError) {
  test::TempDir dir;
  namespace fs = std::filesystem;
  for (const char* part : {"text_encoder", "tokenizer", "tokenizer_2", "unet"})
    fs::copy(fs::path(kSdxl) / part, dir.path() / part, fs::copy_options::recursive);
  const ModelSource model = ModelSource::open(dir.path().string());
  try {
    TextConditioning::load(model, ModelFamily::kSDXL, std::nullopt, {});
    FAIL() << "loaded without text_encoder_2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no text_encoder_2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hd
