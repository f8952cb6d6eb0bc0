// The tokenizer against transformers' CLIPTokenizer on tricky prompts (ids recorded by
// tools/make_fixtures.py with the real CLIP vocabulary, tests/fixtures/tokenizer/).
#include "text/clip_tokenizer.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fixture_util.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kClipFolder = std::string(HD_SOURCE_DIR) + "/tests/fixtures/tokenizer/clip";

TEST(ClipTokenizer, MatchesTransformersOnTrickyPrompts) {
  const test::Fixture fixture("tokenizer/clip_token_ids.safetensors");
  test::TempDir sd2;  // SD2.x's tokenizer folder: the same files, pad token "!"
  for (const char* f : {"vocab.json", "merges.txt"}) std::filesystem::copy_file(kClipFolder + "/" + f, sd2.path() / f);
  sd2.write("special_tokens_map.json", std::string(R"({"pad_token": "!", "eos_token": "<|endoftext|>"})"));
  const ClipTokenizer sd1_tokenizer = ClipTokenizer::load(kClipFolder);
  const ClipTokenizer sd2_tokenizer = ClipTokenizer::load(sd2.path().string());
  EXPECT_EQ(sd1_tokenizer.pad_id(), 49407);
  EXPECT_EQ(sd2_tokenizer.pad_id(), 0);
  int compared = 0;
  for (const auto& c : fixture.cases()) {
    const std::string prompt = c["prompt"];
    const ClipTokenizer& tokenizer = c["pad_token"] == "!" ? sd2_tokenizer : sd1_tokenizer;
    const std::vector<int64_t> expected = fixture.ints(c["name"]);
    const std::vector<int32_t> got = tokenizer.encode(prompt);
    ASSERT_EQ(got.size(), 77u);
    std::vector<int32_t> want(expected.begin(), expected.end());
    EXPECT_EQ(got, want) << "prompt: '" << prompt << "'";
    ++compared;
  }
  EXPECT_EQ(compared, 24);
}

TEST(ClipTokenizer, RejectsInvalidUtf8AndMissingFiles) {
  const ClipTokenizer tokenizer = ClipTokenizer::load(kClipFolder);
  try {
    tokenizer.encode("caf\xc3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
  }
  test::TempDir empty;
  try {
    ClipTokenizer::load(empty.path().string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.json + merges.txt or tokenizer.json"), std::string::npos);
  }
}

TEST(ClipTokenizer, ReadsTokenizerJsonWithEitherMergeSpelling) {
  // A toy vocabulary: enough to see the merges and the pad token come from tokenizer.json.
  const std::string vocab = R"({"a</w>": 0, "b</w>": 1, "a": 2, "b": 3, "ab</w>": 4, "ab": 5, "<|startoftext|>": 6, "<|endoftext|>": 7})";
  test::TempDir dir;
  for (const std::string merges : {R"(["a b</w>"])", R"([["a", "b</w>"]])"}) {
    dir.write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": )" + merges + "}}");
    dir.write("tokenizer_config.json", std::string(R"({"pad_token": {"content": "a</w>"}})"));
    const ClipTokenizer t = ClipTokenizer::load(dir.path().string());
    const std::vector<int32_t> ids = t.encode("AB a");
    EXPECT_EQ(ids[0], 6);
    EXPECT_EQ(ids[1], 4);  // "ab" merged into one token
    EXPECT_EQ(ids[2], 0);
    EXPECT_EQ(ids[3], 7);
    EXPECT_EQ(ids[4], 0);  // padded with the configured pad token
  }
}

TEST(ClipTokenizer, TinyPipelineTokenizerJsonMatchesTransformers) {
  // tokenizer.json (merges as pairs) and tokenizer_config.json, as transformers 5 saves a pipeline.
  for (const char* family : {"sd1", "sd2"}) {
    const ClipTokenizer t = ClipTokenizer::load(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family + "/tokenizer");
    const test::Fixture fixture(std::string("models/tiny_") + family + "_components.safetensors");
    const std::vector<int64_t> ids = fixture.ints("input_ids");  // [2, 77]
    const std::vector<int32_t> first = t.encode("a red circle on a blue background"), second = t.encode("");
    EXPECT_EQ(std::vector<int64_t>(first.begin(), first.end()), std::vector<int64_t>(ids.begin(), ids.begin() + 77)) << family;
    EXPECT_EQ(std::vector<int64_t>(second.begin(), second.end()), std::vector<int64_t>(ids.begin() + 77, ids.end())) << family;
  }
}

}  // namespace
}  // namespace hd
