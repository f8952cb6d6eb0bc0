// The SDXL refiner against diffusers on the tiny refiner (tests/fixtures/models/tiny_sdxl_refiner*, from
// tools/make_fixtures.py --only sdxl_refiner): StableDiffusionXLImg2ImgPipeline with the refiner alone
// (aesthetic-score conditioning, force_zeros_for_empty_prompt false), and the base + refiner "ensemble of
// expert denoisers" (denoising_end, then denoising_start on the handed latents, one generator), from the
// folder and from the single file (conditioner.embedders.0.model.*).
#include <gtest/gtest.h>

#include "core/error.h"
#include "fixture_util.h"
#include "io/png.h"
#include "pipeline/expert_ensemble.h"
#include "pipeline/init_image.h"
#include "pipeline/recorded_run.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";
const std::string kBase = kModels + "tiny_sdxl_pipeline", kRefiner = kModels + "tiny_sdxl_refiner";

void check_recorded_runs(const StableDiffusion& refiner, const std::string& label) {
  const StableDiffusion base = StableDiffusion::load(kBase, std::nullopt);
  EXPECT_EQ(refiner.micro_conditioning(), MicroConditioning::kAestheticScore);
  const RgbImage png = read_png(kModels + "img2img_init.png");
  const OwnedTensor init = init_image_of(png);
  const test::Fixture fixture("models/tiny_sdxl_refiner_runs.safetensors");
  int refined = 0, ensembles = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    ++(c["kind"] == "refiner" ? refined : ensembles);
    const test::RunDistance d =
        test::distance_to_recording(test::run_refiner_case(c, base, refiner, init.view()), fixture, name, label);
    EXPECT_LT(d.latents_relative_l2, 1e-3);
    EXPECT_GE(d.image_psnr_db, 40.0);
  }
  EXPECT_EQ(refined, 4);
  EXPECT_EQ(ensembles, 4);
}

TEST(ExpertEnsemble, TinyRefinerMatchesDiffusers) {
  check_recorded_runs(StableDiffusion::load(kRefiner, std::nullopt), "refiner");
}

TEST(ExpertEnsemble, TinyRefinerSingleFileMatchesDiffusers) {
  check_recorded_runs(StableDiffusion::load(kRefiner + ".safetensors", std::nullopt, kRefiner), "refiner single file");
}

// The base hands over the latents of its share: the same as diffusers' base with denoising_end.
TEST(ExpertEnsemble, BaseShareMatchesDiffusersDenoisingEnd) {
  const StableDiffusion base = StableDiffusion::load(kBase, std::nullopt);
  const test::Fixture fixture("models/tiny_sdxl_refiner_runs.safetensors");
  int checked = 0;
  for (const auto& c : fixture.cases()) {
    if (c["kind"] != "ensemble") continue;
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    GenerationParams p = test::recorded_run_params(c);
    p.denoising_end = c["high_noise_frac"].get<double>();
    TorchCpuGenerator generator(p.seed);
    StageTimes times;
    const OwnedTensor latents = base.denoise(p, generator, &times);
    EXPECT_LT(test::relative_l2(latents, test::as_reference(fixture.nhwc(name + ".base_latents"))), 1e-3);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

// diffusers' cutoff: round(T - fraction * T); the base keeps the timesteps at or above it, the refiner
// those below.
TEST(ExpertEnsemble, DenoisingStepsSplitTheScheduleAtTheCutoff) {
  const std::vector<float> leading10 = {901, 801, 701, 601, 501, 401, 301, 201, 101, 1};
  GenerationParams p;
  p.steps = 10;
  p.denoising_end = 0.8;  // cutoff 200
  StepRange r = denoising_steps(p, leading10, 1000, false);
  EXPECT_EQ(r.first, 0);
  EXPECT_EQ(r.end, 8);
  p.denoising_end.reset();
  p.denoising_start = 0.8;
  r = denoising_steps(p, leading10, 1000, false);
  EXPECT_EQ(r.first, 8);
  EXPECT_EQ(r.end, 10);
  // Python's round is half to even: with T = 2, 0.75 cuts at round(0.5) = 0, not 1.
  GenerationParams two = p;
  two.steps = 2;
  two.denoising_start.reset();
  two.denoising_end = 0.75;
  EXPECT_EQ(denoising_steps(two, {1, 0}, 2, false).end, 2);
  p.denoising_start = 0.05;  // cutoff 950: every timestep is below it
  EXPECT_EQ(denoising_steps(p, leading10, 1000, false).first, 0);
  p.denoising_start = 0.9995;  // cutoff 0 (round(0.5) = 0): none below, no step left
  EXPECT_THROW(denoising_steps(p, leading10, 1000, false), Error);
  p.denoising_start.reset();
  p.denoising_end = 0.05;  // cutoff 950: none at or above, the base would run no step
  EXPECT_THROW(denoising_steps(p, leading10, 1000, false), Error);
}

// An img2img whose strength starts the image below the switch leaves the base no step: the picture is
// the refiner's img2img of the init image alone (which TinyRefinerMatchesDiffusers holds to diffusers).
TEST(ExpertEnsemble, Img2ImgStartingBelowTheSwitchIsTheRefinersAlone) {
  const StableDiffusion base = StableDiffusion::load(kBase, std::nullopt);
  const StableDiffusion refiner = StableDiffusion::load(kRefiner, std::nullopt);
  const OwnedTensor init = init_image_of(read_png(kModels + "img2img_init.png"));  // 24x32
  GenerationParams p;
  p.prompt = "a red square";
  p.width = 24;
  p.height = 32;
  p.steps = 10;
  p.seed = 7;
  p.strength = 0.15;  // one step, from below 0.8 of the schedule's noise
  const RefinerShares shares = refiner_shares(base, refiner, p, 0.8, true);
  EXPECT_EQ(shares.base_steps, 0);
  EXPECT_EQ(shares.refiner_steps, 1);
  EXPECT_FALSE(shares.refiner.denoising_start.has_value());
  int last_done = 0, total = 0;
  const GenerationResult ensemble = generate_with_refiner(
      base, refiner, p, 0.8, [&](int done, int all) { last_done = done, total = all; }, &init.view());
  const GenerationResult alone = refiner.generate(shares.refiner, {}, &init.view());
  EXPECT_LT(test::relative_l2(ensemble.image, test::as_reference(alone.image)), 1e-7);
  EXPECT_EQ(last_done, 1);
  EXPECT_EQ(total, 1);
  // A strength that starts above the switch leaves the base its share, and txt2img is refused as before.
  p.strength = 0.5;
  EXPECT_GT(refiner_shares(base, refiner, p, 0.8, true).base_steps, 0);
  // (cutoff round(1000 - 0.1) = 1000: every timestep lies below it)
  test::expect_error_containing([&] { (void)refiner_shares(base, refiner, p, 0.0001, false); },
                                "before the denoising end");
}

TEST(ExpertEnsemble, BadPairsAndParametersAreClearErrors) {
  const StableDiffusion base = StableDiffusion::load(kBase, std::nullopt);
  const StableDiffusion refiner = StableDiffusion::load(kRefiner, std::nullopt);
  GenerationParams p;
  p.width = 32;
  p.height = 24;
  p.steps = 4;
  const auto error_of = [](const auto& run) -> std::string {
    try {
      run();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // A refiner does not start from noise, nor serve as the base.
  EXPECT_NE(error_of([&] { refiner.generate(p); }).find("refiner"), std::string::npos);
  EXPECT_NE(error_of([&] { generate_with_refiner(refiner, base, p, 0.8); }).find("refiner"), std::string::npos);
  // The refiner takes no target size when alone; in an ensemble the base's is the base's.
  GenerationParams sized = p;
  sized.sizes.target_size = std::array<int, 2>{24, 32};
  EXPECT_NE(error_of([&] { refiner.validate(sized, true); }).find("target size"), std::string::npos);
  EXPECT_NO_THROW(generate_with_refiner(base, refiner, sized, 0.5));
  // Aesthetic scores are the refiner's alone.
  GenerationParams scored = p;
  scored.aesthetic_score = 7.0f;
  EXPECT_THROW(base.validate(scored, false), Error);
  scored.aesthetic_score = std::nanf("");
  EXPECT_THROW(refiner.validate(scored, true), Error);
  // Fractions outside (0, 1), and one that leaves the refiner no step (cutoff round(0.1) = 0).
  EXPECT_THROW(generate_with_refiner(base, refiner, p, 1.0), Error);
  EXPECT_THROW(generate_with_refiner(base, refiner, p, 0.0), Error);
  EXPECT_NE(error_of([&] { generate_with_refiner(base, refiner, p, 0.9999); }).find("after the denoising start"),
            std::string::npos);
  // An SD1.x model's latents are another space.
  const StableDiffusion sd1 = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  EXPECT_NE(error_of([&] { generate_with_refiner(base, sd1, p, 0.8); }).find("SDXL"), std::string::npos);
  EXPECT_THROW(base.check_same_latent_space(sd1), Error);
  // A denoising start without handed latents.
  GenerationParams started = p;
  started.denoising_start = 0.5;
  EXPECT_THROW(base.generate(started), Error);
}

}  // namespace
}  // namespace hd
