// The LDM -> diffusers name table against diffusers itself: the tiny single-file checkpoints
// (tests/fixtures/models/tiny_sd{1,2}.safetensors and tiny_sdxl_pipeline.safetensors, with SDXL's text
// encoders under conditioner.embedders.{0,1}, which diffusers' from_single_file reads back into
// exactly the folder's weights) must map onto the folder's own names and shapes, tensor for tensor.
#include "io/ldm_names.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "io/model_source.h"

namespace hd {
namespace {

std::map<std::string, std::vector<int64_t>> names_and_shapes(const ModelComponent& c) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& t : c.tensors) {
    std::string name = t.name;
    if (name.starts_with("text_model.")) name = name.substr(11);  // transformers 4 and 5 differ here
    if (name.ends_with("position_ids")) continue;                  // a buffer, not a weight
    std::vector<int64_t> shape = t.shape();
    if (shape.size() == 4 && shape[2] == 1 && shape[3] == 1 && name.find("mid_block.attentions") != std::string::npos) {
      shape.resize(2);  // the VAE's attention projections: 1x1 convolutions in LDM, linear in diffusers
    }
    out[name] = shape;
  }
  return out;
}

void check(const std::string& family) {
  const std::string base = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family;
  const ModelSource folder = ModelSource::open(base);
  const ModelSource single = ModelSource::open(base + ".safetensors");
  EXPECT_EQ(single.layout(), ModelLayout::kSingleFileLdm);
  std::vector<std::string> components = {"unet", "vae", "text_encoder"};
  if (family == "sdxl_pipeline") components.push_back("text_encoder_2");
  for (const std::string& component : components) {
    SCOPED_TRACE(family + " " + component);
    ASSERT_NE(single.component(component), nullptr);
    EXPECT_EQ(names_and_shapes(*single.component(component)), names_and_shapes(*folder.component(component)));
  }
}

TEST(LdmNames, Sd1SingleFileMapsOntoTheDiffusersFolder) { check("sd1"); }
TEST(LdmNames, Sd2OpenClipSingleFileMapsOntoTheDiffusersFolder) { check("sd2"); }
TEST(LdmNames, SdxlSingleFileMapsOntoTheDiffusersFolder) { check("sdxl_pipeline"); }

}  // namespace
}  // namespace hd
