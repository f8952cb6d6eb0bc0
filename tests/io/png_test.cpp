#include "io/png.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(Png, RoundTripsPixelsAndUtf8Text) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  RgbImage image{7, 5, {}};
  for (int i = 0; i < 7 * 5 * 3; ++i) image.pixels.push_back(uint8_t(rng.integer(0, 255)));
  test::TempDir dir;
  const std::string path = (dir.path() / "x.png").string();
  const std::string parameters = "a café, 日本 🐱\nNegative prompt: blurry\nSteps: 20, Sampler: Euler, Seed: 1";
  write_png(path, image, {{"parameters", parameters}});
  const RgbImage back = read_png(path);
  EXPECT_EQ(back.width, 7);
  EXPECT_EQ(back.height, 5);
  EXPECT_EQ(back.pixels, image.pixels);
  const auto text = read_png_text(path);
  ASSERT_EQ(text.size(), 1u);
  EXPECT_EQ(text[0].first, "parameters");
  EXPECT_EQ(text[0].second, parameters);
}

TEST(Png, UnreadableFilesAreClearErrors) {
  test::TempDir dir;
  const auto not_png = dir.write("fake.png", std::string("this is not a png"));
  try {
    read_png(not_png.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fake.png"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_png((dir.path() / "absent.png").string()), Error);
  EXPECT_THROW(write_png((dir.path() / "no" / "such" / "dir.png").string(), RgbImage{1, 1, {0, 0, 0}}), Error);
  EXPECT_THROW(write_png((dir.path() / "bad.png").string(), RgbImage{2, 2, {0, 0, 0}}), Error);
}

}  // namespace
}  // namespace hd
