// `hipdiffusion tokenize`: ids on stdout, and clear errors when the tokenizer cannot be found.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/cli_runner.h"
#include "io/safetensors.h"
#include "model_fixtures.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kClipFolder = std::string(HD_SOURCE_DIR) + "/tests/fixtures/tokenizer/clip";

TEST(TokenizeCli, PrintsSeventySevenIdsForAFolderModel) {
  test::TempDir dir;
  dir.write("m/unet/diffusion_pytorch_model.safetensors",
            serialize_safetensors(test::unet_tensors(test::FixtureFamily::kSD1, false)));
  std::filesystem::create_directories(dir.path() / "m" / "tokenizer");
  for (const char* f : {"vocab.json", "merges.txt"})
    std::filesystem::copy_file(kClipFolder + "/" + f, dir.path() / "m" / "tokenizer" / f);
  const auto r = test::run_cli("tokenize --model " + test::quoted(dir.path() / "m") + " --prompt 'a red circle'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::istringstream ids(r.out);
  std::vector<int> values;
  for (int v; ids >> v;) values.push_back(v);
  ASSERT_EQ(values.size(), 77u) << r.out;
  EXPECT_EQ(values[0], 49406);
  EXPECT_EQ(values[4], 49407);  // bos, three words, eos
}

TEST(TokenizeCli, SingleFileWithoutTokenizerSaysWhereItLooked) {
  test::TempDir dir;
  const auto ckpt = dir.write("model.safetensors", serialize_safetensors(test::unet_tensors(
                                                       test::FixtureFamily::kSD1, true, 4, "model.diffusion_model.")));
  const auto r = test::run_cli("tokenize --model " + test::quoted(ckpt) + " --prompt x", "HF_HUB_CACHE=" + dir.path().string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no tokenizer found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--vocab DIR"), std::string::npos) << r.out;
  const auto with_vocab = test::run_cli("tokenize --model " + test::quoted(ckpt) + " --prompt x --vocab " + kClipFolder);
  EXPECT_EQ(with_vocab.exit_code, 0) << with_vocab.out;
  EXPECT_EQ(test::run_cli("tokenize --model " + test::quoted(ckpt)).exit_code, 2);
  EXPECT_EQ(test::run_cli("tokenize --model " + test::quoted(ckpt) + " --prompt x --bogus 1").exit_code, 2);
  const auto bad_utf8 = test::run_cli("tokenize --model " + test::quoted(ckpt) + " --vocab " + kClipFolder + " --prompt \"$(printf '\\377')\"");
  EXPECT_EQ(bad_utf8.exit_code, 1) << bad_utf8.out;
  EXPECT_NE(bad_utf8.out.find("UTF-8"), std::string::npos) << bad_utf8.out;
}

}  // namespace
}  // namespace hd
