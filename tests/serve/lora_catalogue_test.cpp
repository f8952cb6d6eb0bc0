#include "serve/lora_catalogue.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "test_util.h"

namespace hd::serve {
namespace {

TEST(LoraCatalogue, ListsTheFoldersLorasByStemSorted) {
  const test::TempDir dir;
  dir.write("style.safetensors", std::string("x"));
  dir.write("detail.v2.safetensors", std::string("x"));
  dir.write("notes.txt", std::string("not a LoRA"));
  dir.write("a:1.safetensors", std::string("x"));  // no <lora:...> tag could name it
  std::filesystem::create_directory(dir.path() / "sub.safetensors");
  const LoraCatalogue c = LoraCatalogue::from(dir.path().string());
  ASSERT_EQ(c.entries().size(), 2u);
  EXPECT_EQ(c.entries()[0].name, "detail.v2");
  EXPECT_EQ(c.entries()[1].name, "style");
  EXPECT_EQ(c.find("style").path, (dir.path() / "style.safetensors").lexically_normal().string());
  test::expect_error_containing([&] { c.find("a:1"); },
                                "no LoRA named \"a:1\" (this server has: detail.v2, style)");
  EXPECT_TRUE(LoraCatalogue::from(std::nullopt).entries().empty());
  test::expect_error_containing([&] { LoraCatalogue::from((dir.path() / "none").string()); },
                                "the LoRA folder does not exist");
}

}  // namespace
}  // namespace hd::serve
