// The models a server offers: named once at start, found by name, stem or A1111 title, nothing else.
#include "serve/model_catalogue.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "test_util.h"

namespace hd::serve {
namespace {

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

TEST(ModelCatalogue, ListsGivenModelsThenTheFolderSorted) {
  test::TempDir dir;
  dir.write("b.safetensors", std::string("x"));
  dir.write("a.safetensors", std::string("x"));
  dir.write("notes.txt", std::string("not a model"));
  std::filesystem::create_directory(dir.path() / "folder-model");
  dir.write("folder-model/model_index.json", std::string("{}"));
  std::filesystem::create_directory(dir.path() / "empty-folder");
  const ModelCatalogue c = ModelCatalogue::from({kModels + "tiny_sd1"}, dir.path().string());
  std::vector<std::string> names;
  for (const auto& e : c.entries()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tiny_sd1", "a.safetensors", "b.safetensors", "folder-model"}));
  EXPECT_EQ(c.first().name, "tiny_sd1");
  EXPECT_EQ(c.find("a").path, (dir.path() / "a.safetensors").string());   // the stem, A1111's model_name
  EXPECT_EQ(c.find("b.safetensors [6ce0161689]").name, "b.safetensors");  // A1111's title with its hash
  EXPECT_EQ(c.find("folder-model").name, "folder-model");
}

TEST(ModelCatalogue, NoPathInARequestReachesTheFileSystem) {
  const ModelCatalogue c = ModelCatalogue::from({kModels + "tiny_sd1"}, std::nullopt);
  for (const std::string& name :
       {kModels + "tiny_sd2", std::string("../tiny_sd2"), std::string("tiny_sd2"), std::string("")}) {
    SCOPED_TRACE(name);
    test::expect_error_containing([&] { c.find(name); }, "(this server has: tiny_sd1)");
  }
}

TEST(ModelCatalogue, BadStartsAreClearErrors) {
  test::TempDir dir;
  dir.write("tiny_sd1.safetensors", std::string("x"));
  test::expect_error_containing(
      [&] { ModelCatalogue::from({"/nonexistent/model.safetensors"}, std::nullopt); },
      "/nonexistent/model.safetensors: not a model");
  test::expect_error_containing([&] { ModelCatalogue::from({}, "/nonexistent-folder"); },
                                "the models folder does not exist");
  test::expect_error_containing(
      [&] {
        ModelCatalogue::from(
            {kModels + "tiny_sd1.safetensors", (dir.path() / "tiny_sd1.safetensors").string()}, std::nullopt);
      },
      "two models are named tiny_sd1.safetensors");
}

TEST(ModelCatalogue, WithoutModelsTheBuiltInOne) {
  const ModelCatalogue c = ModelCatalogue::from({}, std::nullopt);
  ASSERT_EQ(c.entries().size(), 1u);
  EXPECT_EQ(c.first().name, "shapes-tiny");
}

}  // namespace
}  // namespace hd::serve
