// `hipdiffusion bench` end to end on the CPU with the tiny SD1.x fixture model: the JSON report's stage
// times are there and consistent, and bad flags are clear errors (2 for usage, 1 for bad values).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace hd {
namespace {

const std::string kModel = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1";

TEST(BenchCli, ReportsStageTimesAsJson) {
  const auto r = test::run_cli("bench --model " + kModel + " --steps 3 --repeats 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // stdout holds the JSON object; the runner adds stderr's progress lines before it.
  const size_t start = r.out.find("\n{");
  ASSERT_NE(start, std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(start + 1));
  EXPECT_EQ(j["steps"], 3);
  EXPECT_EQ(j["repeats"], 2);
  EXPECT_EQ(j["unet_batch"], 2);  // CFG 7.5 by default
  EXPECT_EQ(j["width"], 32);      // the model's own size
  EXPECT_EQ(j["device"], "cpu f32");
  EXPECT_EQ(j["peak_device_memory_bytes"], 0);
  for (const char* stage : {"text_encoding_ms", "unet_step_ms", "denoising_ms", "vae_decode_ms", "image_ms"})
    EXPECT_GT(j[stage].get<double>(), 0.0) << stage;
  EXPECT_LE(j["unet_step_ms"].get<double>(), j["denoising_ms"].get<double>());
  EXPECT_LE(j["denoising_ms"].get<double>(), j["image_ms"].get<double>());
}

TEST(BenchCli, PrintsATableByDefault) {
  const auto r = test::run_cli("bench --model " + kModel + " --steps 1 --repeats 1 --cfg-scale 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("UNet step (sampler incl.)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("whole image"), std::string::npos) << r.out;
}

TEST(BenchCli, BadFlagsAreClearErrors) {
  const auto both = test::run_cli("bench --model " + kModel + " --arch sd15");
  EXPECT_EQ(both.exit_code, 2) << both.out;
  EXPECT_NE(both.out.find("--model PATH or --arch"), std::string::npos) << both.out;
  EXPECT_EQ(test::run_cli("bench").exit_code, 2);
  EXPECT_EQ(test::run_cli("bench --arch sd15 --jsn").exit_code, 2);
  const auto sdxl = test::run_cli("bench --arch sdxl");
  EXPECT_EQ(sdxl.exit_code, 1) << sdxl.out;
  EXPECT_NE(sdxl.out.find("SDXL UNet is not implemented yet"), std::string::npos) << sdxl.out;
  const auto profile = test::run_cli("bench --model " + kModel + " --profile");
  EXPECT_EQ(profile.exit_code, 1) << profile.out;
  EXPECT_NE(profile.out.find("not implemented yet"), std::string::npos) << profile.out;
  const auto repeats = test::run_cli("bench --model " + kModel + " --repeats 0");
  EXPECT_EQ(repeats.exit_code, 1) << repeats.out;
  EXPECT_NE(repeats.out.find("--repeats must be between 1 and 1000"), std::string::npos) << repeats.out;
  EXPECT_EQ(test::run_cli("bench --arch sd4").exit_code, 1);
}

}  // namespace
}  // namespace hd
