// `hipdiffusion generate` end to end on the tiny SD1.x fixture model: a PNG with its parameters, the
// saved latents, and a clear one-line error with exit code 1 (or 2 for usage) for each bad input.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cli/cli_runner.h"
#include "fixture_util.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kModel = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1";
const std::string kFixtures = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

TEST(GenerateCli, WritesPngWithParametersAndLatents) {
  test::TempDir dir;
  const auto png = dir.path() / "out.png";
  const auto latents = dir.path() / "latents.safetensors";
  const auto r = test::run_cli("generate --model " + kModel + " --prompt 'a red circle' --negative-prompt blurry --steps 3 "
                               "--width 32 --height 48 --seed 7 --sampler dpmpp_2m --schedule karras --output " +
                               test::quoted(png) + " --save-latents " + test::quoted(latents));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("step 3/3"), std::string::npos) << r.out;
  const RgbImage image = read_png(png.string());
  EXPECT_EQ(image.width, 32);
  EXPECT_EQ(image.height, 48);
  const auto text = read_png_text(png.string());
  ASSERT_EQ(text.size(), 1u);
  EXPECT_EQ(text[0].second.rfind("a red circle\nNegative prompt: blurry\nSteps: 3, Sampler: DPM++ 2M, Schedule type: Karras, "
                                 "CFG scale: 7.5, Seed: 7, Size: 32x48", 0), 0u) << text[0].second;
  const auto st = SafetensorsFile::open(latents.string());
  EXPECT_EQ(st.at("latents").shape, (std::vector<int64_t>{1, 4, 24, 16}));  // NCHW, the tiny VAE scales by 2
}

// --lora merges a LoRA into the weights: the latents are diffusers' with the LoRA fused at that scale
// (tools/lora_fixtures.py's recording), and the PNG's parameters carry it as A1111's prompt tag.
TEST(GenerateCli, LoraIsMergedAndWrittenAsA1111sTag) {
  test::TempDir dir;
  const auto png = dir.path() / "out.png";
  const auto latents = dir.path() / "latents.safetensors";
  const auto r =
      test::run_cli("generate --model " + kModel + " --lora " + kFixtures +
                    "tiny_sd1_lora_kohya.safetensors:0.7 --prompt 'a red circle on a blue background' "
                    "--negative-prompt 'blurry, green' --steps 5 --width 32 --height 32 --seed 42 "
                    "--timestep-spacing leading --output " +
                    test::quoted(png) + " --save-latents " + test::quoted(latents));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto text = read_png_text(png.string());
  ASSERT_EQ(text.size(), 1u);
  EXPECT_EQ(text[0].second.rfind("a red circle on a blue background <lora:tiny_sd1_lora_kohya:0.7>\n", 0), 0u)
      << text[0].second;
  const test::Fixture recording("models/tiny_sd1_lora_runs.safetensors");
  const auto saved = SafetensorsFile::open(latents.string());
  const OwnedTensor ours = saved.load(saved.at("latents"), DType::kF32);
  EXPECT_LT(test::relative_l2(ours.view(),
                              test::as_reference(recording.tensor("tiny_sd1_lora_kohya.latents").view())),
            1e-3);
}

// The README's main command: no --model means the built-in shapes model, at the size it was trained for.
TEST(GenerateCli, WithoutModelUsesTheDefaultModelAtItsOwnSize) {
  test::TempDir dir;
  const auto png = dir.path() / "out.png";
  const auto r = test::run_cli("generate --prompt 'a green triangle on a white background' --output " + test::quoted(png));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("models/shapes-tiny"), std::string::npos) << r.out;
  const RgbImage image = read_png(png.string());
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(image.height, 64);
  // The size follows the model when not given: the tiny SD1.x fixture was made for 32x32.
  const auto tiny = test::run_cli("generate --model " + kModel + " --prompt x --steps 1 --output " + test::quoted(png));
  ASSERT_EQ(tiny.exit_code, 0) << tiny.out;
  EXPECT_EQ(read_png(png.string()).width, 32);
}

TEST(GenerateCli, Img2ImgTakesItsSizeFromTheImage) {
  test::TempDir dir;
  const auto png = dir.path() / "out.png";
  const auto r = test::run_cli("generate --model " + kModel + " --prompt 'a red circle' --steps 4 --strength 0.5 "
                               "--init-image " + std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/img2img_init.png --output " +
                               test::quoted(png));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("step 2/2"), std::string::npos) << r.out;  // strength 0.5 of 4 steps
  const RgbImage image = read_png(png.string());
  EXPECT_EQ(image.width, 24);
  EXPECT_EQ(image.height, 32);
  EXPECT_NE(read_png_text(png.string())[0].second.find("Denoising strength: 0.5"), std::string::npos);
}

TEST(GenerateCli, SingleFileWithConfigFolder) {
  test::TempDir dir;
  const auto png = dir.path() / "single.png";
  const auto r = test::run_cli("generate --model " + kModel + ".safetensors --config " + kModel +
                               " --prompt 'a red circle' --steps 2 --width 32 --height 32 --output " + test::quoted(png));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(read_png(png.string()).width, 32);
  const auto bad = test::run_cli("generate --model " + kModel + ".safetensors --prompt x --prediction sample --output /dev/null");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
}

// SDXL through the command line, size conditioning given by flags: the latents are diffusers' recorded
// run (tiny_sdxl_pipeline_runs.safetensors, case euler_discrete_cfg5_micro).
TEST(GenerateCli, SdxlWithSizeConditioningMatchesDiffusers) {
  test::TempDir dir;
  const auto png = dir.path() / "out.png";
  const auto latents = dir.path() / "latents.safetensors";
  const auto r = test::run_cli(
      "generate --model " + std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline --prompt "
      "'a red circle on a blue background' --negative-prompt 'blurry, green' --steps 5 --cfg-scale 5 --width 32 "
      "--timestep-spacing leading "
      "--height 24 --seed 42 --original-size 40x48 --crop-top-left 4,8 --target-size 32x24 --negative-original-size "
      "20x16 --negative-crop-top-left 6,2 --negative-target-size 32x24 --output " + test::quoted(png) +
      " --save-latents " + test::quoted(latents));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SDXL"), std::string::npos) << r.out;
  const auto text = read_png_text(png.string());
  ASSERT_EQ(text.size(), 1u);
  EXPECT_NE(text[0].second.find("original size: 40x48, crop top-left: 4,8, target size: 32x24, Negative original size: "
                                "20x16, Negative crop top-left: 6,2"), std::string::npos) << text[0].second;
  const auto st = SafetensorsFile::open(latents.string());
  const auto& entry = st.at("latents");
  ASSERT_EQ(entry.shape, (std::vector<int64_t>{1, 4, 12, 16}));
  const OwnedTensor saved = st.load(entry, DType::kF32);
  const std::vector<float> got(saved.ptr<float>(), saved.ptr<float>() + saved.view().numel());
  const test::Fixture fixture("models/tiny_sdxl_pipeline_runs.safetensors");
  const std::vector<float> expected = fixture.floats("euler_discrete_cfg5_micro.latents");
  const double err = test::relative_l2(got, std::vector<double>(expected.begin(), expected.end()));
  EXPECT_LT(err, 1e-3);

  const auto bad_crop = test::run_cli("generate --model " + std::string(HD_SOURCE_DIR) +
                                      "/tests/fixtures/models/tiny_sdxl_pipeline --prompt x --crop-top-left 4");
  EXPECT_EQ(bad_crop.exit_code, 1) << bad_crop.out;
  EXPECT_NE(bad_crop.out.find("--crop-top-left must be X,Y"), std::string::npos) << bad_crop.out;
  const auto half_negative = test::run_cli("generate --model " + std::string(HD_SOURCE_DIR) +
                                           "/tests/fixtures/models/tiny_sdxl_pipeline --prompt x --negative-target-size 32x32");
  EXPECT_EQ(half_negative.exit_code, 1) << half_negative.out;
  EXPECT_NE(half_negative.out.find("both the negative original size and the negative target size"), std::string::npos)
      << half_negative.out;
  const auto not_sdxl = test::run_cli("generate --model " + kModel + " --prompt x --steps 1 --original-size 64x64");
  EXPECT_EQ(not_sdxl.exit_code, 1) << not_sdxl.out;
  EXPECT_NE(not_sdxl.out.find("is SDXL's; this model's UNet does not take it"), std::string::npos) << not_sdxl.out;
}

// SDXL's base and refiner as an ensemble of expert denoisers: the latents are diffusers' recorded run
// (tiny_sdxl_refiner_runs.safetensors, case euler_discrete_f0.8), and the PNG says which refiner took over where.
TEST(GenerateCli, SdxlWithRefinerMatchesDiffusers) {
  test::TempDir dir;
  const std::string models = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";
  const std::vector<float> expected =
      test::Fixture("models/tiny_sdxl_refiner_runs.safetensors").floats("euler_discrete_f0.8.latents");
  // On one device, and on two (CFG parallel: each computes one guidance half of both models' steps).
  for (const std::string devices : {"", "--devices cpu,cpu "}) {
    SCOPED_TRACE(devices);
    const auto png = dir.path() / "out.png";
    const auto latents = dir.path() / "latents.safetensors";
    const auto r = test::run_cli(
        "generate --model " + models + "tiny_sdxl_pipeline --refiner " + models + "tiny_sdxl_refiner --high-noise-frac 0.8 "
        "--prompt 'a red circle on a blue background' --negative-prompt 'blurry, green' --steps 10 --cfg-scale 5 "
        "--width 32 --height 24 --seed 93 --timestep-spacing leading " + devices + "--output " + test::quoted(png) +
        " --save-latents " + test::quoted(latents));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("SDXL refiner"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("step 10/10"), std::string::npos) << r.out;  // the base's 8 and the refiner's 2 in one count
    if (!devices.empty()) {
      EXPECT_NE(r.out.find("devices: 2, CFG parallel"), std::string::npos) << r.out;
    }
    const auto text = read_png_text(png.string());
    ASSERT_EQ(text.size(), 1u);
    EXPECT_NE(text[0].second.find("Refiner: " + models + "tiny_sdxl_refiner, Refiner switch at: 0.8"), std::string::npos)
        << text[0].second;
    const auto st = SafetensorsFile::open(latents.string());
    const OwnedTensor saved = st.load(st.at("latents"), DType::kF32);
    const std::vector<float> got(saved.ptr<float>(), saved.ptr<float>() + saved.view().numel());
    EXPECT_LT(test::relative_l2(got, std::vector<double>(expected.begin(), expected.end())), 1e-3);
  }

  // The refiner alone starts from an image, not from noise; the fraction needs a refiner.
  const auto alone = test::run_cli("generate --model " + models + "tiny_sdxl_refiner --prompt x --steps 2");
  EXPECT_EQ(alone.exit_code, 1) << alone.out;
  EXPECT_NE(alone.out.find("it does not start from noise"), std::string::npos) << alone.out;
  const auto fraction = test::run_cli("generate --model " + models + "tiny_sdxl_pipeline --prompt x --high-noise-frac 0.5");
  EXPECT_EQ(fraction.exit_code, 1) << fraction.out;
  EXPECT_NE(fraction.out.find("--high-noise-frac applies to --refiner only"), std::string::npos) << fraction.out;
}

// Several devices (here ranks of the CPU, the tests' stand-in for GPUs): the same pictures as one device.
TEST(GenerateCli, DevicesSpreadTheBatchTheGuidanceOrTheImageAndDrawTheSamePictures) {
  test::TempDir dir;
  const std::string base = "generate --model " + kModel + " --prompt 'a red circle' --steps 3 --seed 11 --sampler euler_a ";
  const auto one = test::run_cli(base + "--batch 3 --output " + test::quoted(dir.path() / "one.png"));
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const auto data = test::run_cli(base + "--batch 3 --devices cpu,cpu --output " + test::quoted(dir.path() / "data.png"));
  ASSERT_EQ(data.exit_code, 0) << data.out;
  EXPECT_NE(data.out.find("devices: 2, data parallel"), std::string::npos) << data.out;
  // Within one level of 255: the ranks' batches are other shapes, whose sums may round otherwise.
  const auto within_a_level = [](const RgbImage& a, const RgbImage& b) {
    if (a.pixels.size() != b.pixels.size()) return false;
    for (size_t j = 0; j < a.pixels.size(); ++j)
      if (std::abs(int(a.pixels[j]) - int(b.pixels[j])) > 1) return false;
    return true;
  };
  for (int i = 1; i <= 3; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_TRUE(within_a_level(read_png((dir.path() / ("data-" + n + ".png")).string()),
                               read_png((dir.path() / ("one-" + n + ".png")).string()))) << "picture " << n;
  }
  const auto alone = test::run_cli(base + "--output " + test::quoted(dir.path() / "alone.png"));
  ASSERT_EQ(alone.exit_code, 0) << alone.out;
  const auto cfg = test::run_cli(base + "--devices cpu,cpu --output " + test::quoted(dir.path() / "cfg.png"));
  ASSERT_EQ(cfg.exit_code, 0) << cfg.out;
  EXPECT_NE(cfg.out.find("devices: 2, CFG parallel"), std::string::npos) << cfg.out;
  EXPECT_TRUE(within_a_level(read_png((dir.path() / "cfg.png").string()), read_png((dir.path() / "alone.png").string())));
  // Two guided pictures on four: a pair each (CFG x data parallel), against one device's batch of two.
  const auto two = test::run_cli(base + "--batch 2 --output " + test::quoted(dir.path() / "two.png"));
  ASSERT_EQ(two.exit_code, 0) << two.out;
  const auto pairs = test::run_cli(base + "--batch 2 --devices cpu,cpu,cpu,cpu --output " +
                                   test::quoted(dir.path() / "pairs.png"));
  ASSERT_EQ(pairs.exit_code, 0) << pairs.out;
  EXPECT_NE(pairs.out.find("devices: 4, CFG x data parallel (2 pairs"), std::string::npos) << pairs.out;
  for (int i = 1; i <= 2; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_TRUE(within_a_level(read_png((dir.path() / ("pairs-" + n + ".png")).string()),
                               read_png((dir.path() / ("two-" + n + ".png")).string()))) << "picture " << n;
  }
  const auto split = test::run_cli(base + "--devices cpu,cpu,cpu,cpu --parallel split --output " +
                                   test::quoted(dir.path() / "split.png"));
  ASSERT_EQ(split.exit_code, 0) << split.out;
  EXPECT_NE(split.out.find("devices: 4, image split"), std::string::npos) << split.out;
  EXPECT_TRUE(within_a_level(read_png((dir.path() / "split.png").string()), read_png((dir.path() / "alone.png").string())));
  const auto displaced = test::run_cli(base + "--devices cpu,cpu --parallel displaced --displaced-warmup 1 --output " +
                                       test::quoted(dir.path() / "displaced.png"));
  ASSERT_EQ(displaced.exit_code, 0) << displaced.out;
  EXPECT_NE(displaced.out.find("devices: 2, displaced image split (each computes a strip; after 1 exact steps"),
            std::string::npos)
      << displaced.out;
}

TEST(GenerateCli, BadInputsAreOneLineErrors) {
  const std::string base = "generate --model " + kModel + " --output /dev/null --steps 1 --width 32 --height 32 ";
  const std::pair<std::string, std::string> cases[] = {
    {"--prompt x --width 30", "multiple of 8"},
    {"--prompt x --steps 0", "steps must be between 1 and 1000"},
    {"--prompt x --steps many", "not a number"},
    {"--prompt x --cfg-scale nan", "CFG scale must be a finite number"},
    {"--prompt x --cfg-scale -2", "CFG scale must be a finite number"},
    {"--prompt x --sampler heun", "unknown sampler"},
    {"--prompt x --schedule exponential", "unknown schedule"},
    {"--prompt x --sampler ddim --schedule karras", "Karras"},
    {"--prompt x --init-image /nonexistent.png --strength 0.5", "nonexistent.png"},
    {"--prompt x --strength 0.5", "--init-image"},
    {"--prompt x --init-image " + std::string(HD_SOURCE_DIR) +
         "/tests/fixtures/models/img2img_init.png --strength 2",
     "[0, 1]"},
    {"--prompt x --init-image " + std::string(HD_SOURCE_DIR) +
         "/tests/fixtures/models/img2img_init.png --width 64",
     "not resized"},
#if !defined(HD_WITH_GPU)
    {"--prompt x --device cuda:0", "no GPU kernels"},
#endif
    {"--prompt x --device tpu", "device"},
    {"--prompt x --dtype f16", "the CPU computes in f32"},
    {"--prompt x --device cuda:0 --dtype f32", "f16 or bf16"},
    {"--prompt x --dtype f8", "unknown dtype 'f8' (expected f32, f16 or bf16)"},
    {"--prompt x --seed -1", "--seed"},
    {"--prompt \"$(printf 'caf\\303')\"", "UTF-8"},
    {"--prompt x --max-device-memory 4", "applies to a GPU"},
#if defined(HD_WITH_GPU)
    {"--prompt x --device cuda:0 --max-device-memory 0", "above 0"},
#endif
    {"--prompt x --max-device-memory lots", "not a number"},
    {"--prompt x --kernels vendor", "--kernels must be 'own'"},
    {"--prompt x --tune full", "--tune must be 'quick'"},
    {"--prompt x --device cpu --devices cpu,cpu", "--device and --devices"},
    {"--prompt x --parallel cfg", "--parallel applies to --devices"},
    {"--prompt x --devices cpu,cpu --parallel pipeline", "(auto, data, cfg, split or displaced)"},
    {"--prompt x --devices cpu,cpu --parallel cfg --cfg-scale 1",
     "CFG parallel needs classifier-free guidance"},
    {"--prompt x --devices cpu,cpu --parallel data", "needs a batch of at least 2, not 1"},
    {"--prompt x --devices cpu,cpu,cpu --parallel split",
     "needs a height that is a multiple of 12 pixels, not 32"},
    {"--prompt x --devices cpu,,cpu", "has an empty entry"},
    {"--prompt x --devices cpu,cpu --parallel split --displaced-warmup 2",
     "applies to --parallel displaced only"},
    {"--prompt x --devices cpu,cpu --height 64 --parallel displaced --displaced-warmup 0",
     "warm-up is 1 or more exact steps"},
    {"--prompt x --devices cpu,cpu --refiner " + kModel, "a base and its refiner are SDXL models"},
    {"--prompt x --lora /nonexistent.safetensors", "/nonexistent.safetensors: no such LoRA file"},
    {"--prompt x --lora " + kFixtures + "tiny_sdxl_lora_kohya.safetensors", "another model family"},
    {"--prompt x --lora " + kFixtures + "tiny_sd1_lora_kohya.safetensors:nan",
     "scale must be a finite number"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = test::run_cli(base + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find(expected), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("hipdiffusion: error: ", 0), 0u) << args << ": " << r.out;
  }
  const auto weak = test::run_cli("generate --model " + kModel + " --prompt x --steps 4 --strength 0.1 --init-image " +
                                 std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/img2img_init.png");
  EXPECT_EQ(weak.exit_code, 1) << weak.out;
  EXPECT_EQ(weak.out.rfind("hipdiffusion: error: a strength of 0.1 with 4 steps leaves no denoising step", 0), 0u) << weak.out;
  const auto bad_variable = test::run_cli("generate --model " + kModel + " --prompt x --steps 1", "HD_KERNELS=vendor");
  EXPECT_EQ(bad_variable.exit_code, 1) << bad_variable.out;
  EXPECT_NE(bad_variable.out.find("HD_KERNELS must be 'own'"), std::string::npos) << bad_variable.out;
  const auto bad_policy = test::run_cli("generate --model " + kModel + " --prompt x --steps 1", "HD_TUNE=slow");
  EXPECT_EQ(bad_policy.exit_code, 1) << bad_policy.out;
  EXPECT_NE(bad_policy.out.find("HD_TUNE must be 'quick'"), std::string::npos) << bad_policy.out;
  EXPECT_EQ(test::run_cli("generate --model " + kModel).exit_code, 2);            // no prompt
  EXPECT_EQ(test::run_cli("generate --prompt x --bogus 1").exit_code, 2);         // unknown flag
  EXPECT_EQ(test::run_cli("generate --prompt x --vae-tiling --vae-tiling-blended").exit_code, 2);
  EXPECT_EQ(test::run_cli("generate --prompt x --model /nonexistent").exit_code, 1);
}

}  // namespace
}  // namespace hd

namespace hd {
namespace {

TEST(GenerateCli, ConfigValueOfTheWrongTypeIsABadInputError) {
  test::TempDir dir;
  const auto model = dir.path() / "m";
  std::filesystem::copy(kModel, model, std::filesystem::copy_options::recursive);
  dir.write("m/vae/config.json", std::string(R"({"norm_num_groups": "sixteen"})"));
  const auto r = test::run_cli("generate --model " + test::quoted(model) + " --prompt x --steps 1 --width 32 --height 32 --output /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out.rfind("hipdiffusion: error: a JSON file of the model has a value of the wrong type", 0), 0u) << r.out;
}

}  // namespace
}  // namespace hd
