// The SDXL refiner on the GPU (f16): alone on an init image, and after the base as an ensemble of expert
// denoisers, against diffusers' recorded runs (tiny_sdxl_refiner_runs.safetensors), within the bound the
// other f16 pipelines keep.
#include <gtest/gtest.h>

#include "fixture_util.h"
#include "io/png.h"
#include "ops/gpu/gpu_test_util.h"
#include "pipeline/init_image.h"
#include "pipeline/recorded_run.h"
#include "test_util.h"

namespace hd {
namespace {

constexpr double kMinPsnr = 30.0;  // a picture made in 16-bit storage against one made in f32

TEST(GpuExpertEnsemble, TinyRefinerAndEnsembleMatchDiffusersRecordedRuns) {
  const std::string models = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";
  const ops::Placement gpu{test::gpu0(), DType::kF16};
  const StableDiffusion base = StableDiffusion::load(models + "tiny_sdxl_pipeline", std::nullopt, std::nullopt, gpu);
  const StableDiffusion refiner = StableDiffusion::load(models + "tiny_sdxl_refiner", std::nullopt, std::nullopt, gpu);
  const OwnedTensor init = init_image_of(read_png(models + "img2img_init.png"));
  const test::Fixture fixture("models/tiny_sdxl_refiner_runs.safetensors");
  int runs = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const test::RunDistance d =
        test::distance_to_recording(test::run_refiner_case(c, base, refiner, init.view()), fixture, name, "refiner f16");
    EXPECT_GE(d.image_psnr_db, kMinPsnr);
    ++runs;
  }
  EXPECT_EQ(runs, 8);
}

}  // namespace
}  // namespace hd
