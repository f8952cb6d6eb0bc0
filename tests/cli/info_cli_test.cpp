// Runs the real `hipdiffusion` binary: exit codes, stdout and the one-line errors a user sees.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli/cli_runner.h"
#include "io/safetensors.h"
#include "model_fixtures.h"
#include "test_util.h"

namespace hd {
namespace {

using test::quoted;
using test::run_cli;

TEST(InfoCli, DescribesTheBundledExample) {
  const auto r = run_cli(std::string("info ") + HD_SOURCE_DIR + "/data/tiny-sd15-structure.safetensors");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("architecture: SD1.x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prediction:   epsilon"), std::string::npos) << r.out;
  for (const char* c : {"unet", "vae", "text_encoder"}) EXPECT_NE(r.out.find(c), std::string::npos) << r.out;
}

TEST(InfoCli, DescribesADiffusersFolder) {
  test::TempDir dir;
  dir.write("m/unet/diffusion_pytorch_model.safetensors",
            serialize_safetensors(test::unet_tensors(test::FixtureFamily::kSDXL, false)));
  dir.write("m/vae/diffusion_pytorch_model.safetensors", serialize_safetensors(test::vae_tensors()));
  const auto r = run_cli("info " + quoted(dir.path() / "m"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("architecture: SDXL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("diffusers folder"), std::string::npos) << r.out;
}

// SDXL's folders: both tokenizers listed; the refiner told by its 1280-wide cross-attention, its
// single file's one embedder read as text_encoder_2.
TEST(InfoCli, DescribesSdxlBaseAndRefiner) {
  const std::string models = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";
  const auto base = run_cli("info " + models + "tiny_sdxl_pipeline");
  EXPECT_EQ(base.exit_code, 0) << base.out;
  EXPECT_NE(base.out.find("tokenizer:    tokenizer/ (tokenizer.json), tokenizer_2/ (tokenizer.json)"), std::string::npos)
      << base.out;
  const auto refiner = run_cli("info " + models + "tiny_sdxl_refiner.safetensors");
  EXPECT_EQ(refiner.exit_code, 0) << refiner.out;
  EXPECT_NE(refiner.out.find("the refiner's"), std::string::npos) << refiner.out;
  EXPECT_NE(refiner.out.find("  text_encoder_2 "), std::string::npos) << refiner.out;
  EXPECT_EQ(refiner.out.find("  text_encoder "), std::string::npos) << refiner.out;
}

TEST(InfoCli, MalformedInputIsOneLineAndExitCodeOne) {
  test::TempDir dir;
  std::vector<uint8_t> truncated = serialize_safetensors({{"w", "F32", {4}, test::zero_bytes(16)}});
  truncated.resize(truncated.size() - 3);
  const auto cases = {
      std::pair{dir.write("trunc.safetensors", truncated), std::string("run past the data")},
      std::pair{dir.write("model.ckpt", std::vector<uint8_t>{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}), std::string("never unpickles")},
      std::pair{dir.write("huge.safetensors", std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{'}),
                std::string("exceeds the limit")},
      std::pair{dir.path() / "absent.safetensors", std::string("no such file")},
  };
  for (const auto& [path, expected] : cases) {
    const auto r = run_cli("info " + quoted(path));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_EQ(r.out.rfind("hipdiffusion: error: ", 0), 0u) << r.out;
  }
}

TEST(InfoCli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_cli("").exit_code, 2);
  EXPECT_EQ(run_cli("info").exit_code, 2);
  EXPECT_EQ(run_cli("info a b").exit_code, 2);
  EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
  EXPECT_EQ(run_cli("--help").exit_code, 0);
  const auto v = run_cli("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("hipdiffusion ", 0), 0u);
}

}  // namespace
}  // namespace hd
