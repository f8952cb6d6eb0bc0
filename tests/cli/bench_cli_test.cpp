// `hipdiffusion bench` end to end on the CPU with the tiny SD1.x fixture model: the JSON report's stage
// times are there and consistent, the per-op profile counts what ran, and bad flags are clear errors (2
// for usage, 1 for bad values).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kModel = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1";

// The --json report: stdout's JSON object, after the progress lines the runner takes from stderr.
nlohmann::json json_report(const std::string& args) {
  const auto r = test::run_cli("bench --model " + kModel + " " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const size_t start = r.out.find("\n{");
  if (start == std::string::npos) {
    ADD_FAILURE() << "no JSON in " << r.out;
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(r.out.substr(start + 1));
}

TEST(BenchCli, ReportsStageTimesAsJson) {
  const auto j = json_report("--steps 3 --repeats 2");
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["steps"], 3);
  EXPECT_EQ(j["repeats"], 2);
  EXPECT_EQ(j["batch"], 1);
  EXPECT_EQ(j["unet_batch"], 2);  // CFG 7.5 by default
  EXPECT_EQ(j["width"], 32);      // the model's own size
  EXPECT_EQ(j["device"], "cpu f32");
  EXPECT_EQ(j["kernels"], "all");  // the vendor libraries allowed unless --kernels own or HD_KERNELS=own
  EXPECT_EQ(j["peak_device_memory_bytes"], 0);
  for (const char* stage : {"text_encoding_ms", "unet_step_ms", "denoising_ms", "vae_decode_ms", "image_ms"})
    EXPECT_GT(j[stage].get<double>(), 0.0) << stage;
  EXPECT_LE(j["unet_step_ms"].get<double>(), j["denoising_ms"].get<double>());
  EXPECT_LE(j["denoising_ms"].get<double>(), j["image_ms"].get<double>());
  // The PNG that generate would write, timed after each image: each run's sum exceeds its image alone,
  // so the sums' median exceeds the images'.
  EXPECT_GT(j["png_encode_ms"].get<double>(), 0.0);
  EXPECT_GT(j["image_with_png_ms"].get<double>(), j["image_ms"].get<double>());
  // Loading and the first image have rows of their own; the CPU has no kernels to choose among.
  EXPECT_GT(j["load_ms"].get<double>(), 0.0);
  EXPECT_GT(j["first_image_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["tune_policy"], "quick");
  EXPECT_EQ(j["first_image_shapes_tuned"], 0);
}

TEST(BenchCli, ReportsWhichKernelsItWasAllowed) {
  EXPECT_EQ(json_report("--steps 1 --repeats 1 --kernels own")["kernels"], "own");
  EXPECT_EQ(json_report("--steps 1 --repeats 1 --batch 2")["unet_batch"], 4);
}

// --profile: the ops of one more generation, each timed on its own; the text encoder's, the UNet's and the
// VAE's kinds of op are all there, each call counted.
TEST(BenchCli, ProfileTimesEachKindOfOp) {
  const auto j = json_report("--steps 2 --repeats 1 --profile");
  ASSERT_TRUE(j.contains("profile"));
  std::map<std::string, nlohmann::json> ops;
  double sum = 0;
  for (const auto& op : j["profile"]["ops"]) {
    ops[op["op"].get<std::string>()] = op;
    sum += op["ms"].get<double>();
    EXPECT_GT(op["calls"].get<int64_t>(), 0);
  }
  for (const char* op : {"conv2d", "linear", "attention", "group_norm + silu", "layer_norm", "sampler_step"})
    EXPECT_EQ(ops.count(op), 1u) << op << " missing from " << j.dump();
  EXPECT_EQ(ops["sampler_step"]["calls"], 2);  // one a step
  EXPECT_LE(sum, j["profile"]["image_ms"].get<double>());
}

TEST(BenchCli, PrintsATableByDefault) {
  const auto r = test::run_cli("bench --model " + kModel + " --steps 1 --repeats 1 --cfg-scale 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("UNet step (batch 1, sampler incl.)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("whole image"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loading the model (to ready weights)"), std::string::npos) << r.out;
}

// `tune` fills the cache for a GPU; on the CPU there is nothing to choose, which it says.
TEST(TuneCli, RefusesTheCpuAndBadSizesClearly) {
  const auto cpu = test::run_cli("tune --model " + kModel);
  EXPECT_EQ(cpu.exit_code, 1) << cpu.out;
  EXPECT_NE(cpu.out.find("nothing to tune"), std::string::npos) << cpu.out;
  EXPECT_EQ(test::run_cli("tune --size 512x512").exit_code, 2);  // no model
#if defined(HD_WITH_GPU)
  const auto bad = test::run_cli("tune --model " + kModel + " --device cuda:0 --size 512by512");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--size must be WxH"), std::string::npos) << bad.out;
#endif
}

// A folder with an SDXL UNet and a VAE but no text encoders is timed by components: the tiny
// SDXL-structured UNet fixture with the tiny SD1.x fixture's VAE.
TEST(BenchCli, TimesTheUnetAndVaeOfAnSdxlModel) {
  namespace fs = std::filesystem;
  const test::TempDir dir;
  const fs::path fixtures = fs::path(HD_SOURCE_DIR) / "tests/fixtures/models";
  fs::copy(fixtures / "tiny_sdxl" / "unet", dir.path() / "unet", fs::copy_options::recursive);
  fs::copy(fixtures / "tiny_sd1" / "vae", dir.path() / "vae", fs::copy_options::recursive);
  const auto r = test::run_cli("bench --model " + test::quoted(dir.path()) +
                               " --width 16 --height 24 --steps 2 --repeats 2 --profile --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find("\n{") + 1));
  EXPECT_TRUE(j["components_only"].get<bool>());
  EXPECT_EQ(j["unet_batch"], 2);
  EXPECT_EQ(j["height"], 24);
  EXPECT_TRUE(j["text_encoding_ms"].is_null());
  EXPECT_TRUE(j["image_ms"].is_null());
  EXPECT_TRUE(j["png_encode_ms"].is_null());
  EXPECT_TRUE(j["image_with_png_ms"].is_null());
  EXPECT_TRUE(j["vae_output_finite"].get<bool>());
  for (const char* stage : {"unet_step_ms", "unet_steps_back_to_back_ms", "vae_decode_ms"})
    EXPECT_GT(j[stage].get<double>(), 0.0) << stage;
  std::map<std::string, int64_t> calls;
  for (const auto& op : j["profile"]["ops"]) calls[op["op"].get<std::string>()] = op["calls"].get<int64_t>();
  for (const char* op : {"conv2d", "linear", "attention", "timestep_embedding", "concat_channels"})
    EXPECT_GT(calls[op], 0) << op << " missing from " << j.dump();
  const auto bad_size = test::run_cli("bench --model " + test::quoted(dir.path()) + " --width 12 --height 16");
  EXPECT_EQ(bad_size.exit_code, 1) << bad_size.out;
  EXPECT_NE(bad_size.out.find("multiples of 8"), std::string::npos) << bad_size.out;
}

TEST(BenchCli, BadFlagsAreClearErrors) {
  const auto both = test::run_cli("bench --model " + kModel + " --arch sd15");
  EXPECT_EQ(both.exit_code, 2) << both.out;
  EXPECT_NE(both.out.find("--model PATH or --arch"), std::string::npos) << both.out;
  EXPECT_EQ(test::run_cli("bench").exit_code, 2);
  EXPECT_EQ(test::run_cli("bench --arch sd15 --jsn").exit_code, 2);
  const auto repeats = test::run_cli("bench --model " + kModel + " --repeats 0");
  EXPECT_EQ(repeats.exit_code, 1) << repeats.out;
  EXPECT_NE(repeats.out.find("--repeats must be between 1 and 1000"), std::string::npos) << repeats.out;
  EXPECT_EQ(test::run_cli("bench --arch sd4").exit_code, 1);
  const auto steps = test::run_cli("bench --arch sd15 --steps 0");  // refused before any model is written
  EXPECT_EQ(steps.exit_code, 1) << steps.out;
  EXPECT_NE(steps.out.find("steps must be between 1 and 1000"), std::string::npos) << steps.out;
  EXPECT_EQ(steps.out.find("writing"), std::string::npos) << steps.out;
}

}  // namespace
}  // namespace hd
