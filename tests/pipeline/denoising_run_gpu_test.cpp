// Denoising runs stepped together on the GPU (one UNet batch, a captured graph per batch shape) give each
// run what it gets alone, within f16 rounding: the batch's products may take other tiles than a lone run's.
#include <gtest/gtest.h>

#include <string>

#include "ops/gpu/gpu_test_util.h"
#include "pipeline/run_company.h"
#include "pipeline/stable_diffusion.h"

namespace hd {
namespace {

using test::company_params;

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

TEST(GpuDenoisingRun, RunsSteppedTogetherGiveWhatEachGivesAlone) {
  for (const char* model : {"tiny_sd1", "tiny_sdxl_pipeline"}) {
    SCOPED_TRACE(model);
    const StableDiffusion sd =
        StableDiffusion::load(kModels + model, std::nullopt, std::nullopt, {test::gpu0(), DType::kF16});
    GenerationParams b = company_params("a blue circle", 2, 1.0f, SamplerKind::kDpmpp2m, 5, 64);
    b.batch = 2;
    test::check_company(sd,
                        {company_params("a red square", 1, 7.5f, SamplerKind::kEulerAncestral, 6, 64), b,
                         company_params("", 3, 3.0f, SamplerKind::kEuler, 4, 64)},
                        5e-3);
  }
}

}  // namespace
}  // namespace hd
