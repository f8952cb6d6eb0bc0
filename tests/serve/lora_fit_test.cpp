#include "serve/lora_fit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "test_util.h"

namespace hd::serve {
namespace {

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

TEST(LoraFitCache, KeepsEachPairsVerdict) {
  const test::TempDir dir;
  const std::string sd1_lora = (dir.path() / "detail.safetensors").string();
  const std::string xl_lora = (dir.path() / "xl.safetensors").string();
  std::filesystem::copy_file(kModels + "tiny_sd1_lora_kohya.safetensors", sd1_lora);
  std::filesystem::copy_file(kModels + "tiny_sdxl_lora_kohya.safetensors", xl_lora);
  const CatalogueEntry sd1{"tiny_sd1", "tiny_sd1", kModels + "tiny_sd1"};
  const CatalogueEntry sdxl{"tiny_sdxl", "tiny_sdxl", kModels + "tiny_sdxl_pipeline"};
  LoraFitCache cache;
  EXPECT_NO_THROW(cache.check(sd1, {"detail", sd1_lora}));
  EXPECT_NO_THROW(cache.check(sdxl, {"xl", xl_lora}));
  test::expect_error_containing(
      [&] {
        cache.check(sd1, {"xl", xl_lora});
      },
      "LoRA xl does not fit model tiny_sd1: ");
  test::expect_error_containing(
      [&] {
        cache.check(sdxl, {"detail", sd1_lora});
      },
      "LoRA detail does not fit model tiny_sdxl: ");
  // The verdicts are kept: with the files gone, each pair is answered as before.
  std::filesystem::remove(sd1_lora);
  std::filesystem::remove(xl_lora);
  EXPECT_NO_THROW(cache.check(sd1, {"detail", sd1_lora}));
  try {
    cache.check(sd1, {"xl", xl_lora});
    ADD_FAILURE() << "the kept verdict was lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  // A file that cannot be read is named, and not kept as a verdict: once it is there, it is checked.
  const std::string late = (dir.path() / "late.safetensors").string();
  test::expect_error_containing([&] { cache.check(sd1, {"late", late}); }, "no such LoRA file");
  std::filesystem::copy_file(kModels + "tiny_sd1_lora_kohya.safetensors", late);
  EXPECT_NO_THROW(cache.check(sd1, {"late", late}));
  // Nor is a model that cannot be read blamed on the LoRA.
  const CatalogueEntry missing{"missing", "missing", (dir.path() / "missing").string()};
  try {
    cache.check(missing, {"late", late});
    ADD_FAILURE() << "a missing model was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hd::serve
