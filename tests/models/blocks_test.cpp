#include "models/blocks.h"

#include <gtest/gtest.h>

#include <string>

#include "io/model_source.h"

namespace hd {
namespace {

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

// What a GPU placement holds beside the checkpoint's tensors: the upsamplers' phases. The tiny SD1.x
// model has one upsampler in its UNet and one in its VAE decoder, each 64 -> 64 channels, whose phases
// are [2, 2, 64, 2, 2, 64]; the text encoder has none. The same from the single file (LDM names mapped).
TEST(GpuExtraWeightElements, AreTheUpsamplersPhases) {
  for (const std::string path : {kModels + "tiny_sd1", kModels + "tiny_sd1.safetensors"}) {
    SCOPED_TRACE(path);
    const ModelSource source = ModelSource::open(path);
    ASSERT_NE(source.component("unet"), nullptr);
    EXPECT_EQ(gpu_extra_weight_elements(*source.component("unet")), 16 * 64 * 64);
    EXPECT_EQ(gpu_extra_weight_elements(*source.component("vae")), 16 * 64 * 64);
    EXPECT_EQ(gpu_extra_weight_elements(*source.component("text_encoder")), 0);
  }
}

}  // namespace
}  // namespace hd
