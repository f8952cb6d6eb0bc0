#include "io/png.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

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

TEST(Png, EncodesAndDecodesInMemoryAsTheFileHolds) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  RgbImage image{9, 4, {}};
  for (int i = 0; i < 9 * 4 * 3; ++i) image.pixels.push_back(uint8_t(rng.integer(0, 255)));
  test::TempDir dir;
  const std::string path = (dir.path() / "x.png").string();
  write_png(path, image, {{"parameters", "a prompt"}});
  const std::vector<uint8_t> bytes = encode_png(image, {{"parameters", "a prompt"}});
  std::ifstream file(path, std::ios::binary);
  const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, on_disk);
  const RgbImage back = decode_png(bytes, "the picture");
  EXPECT_EQ(back.width, 9);
  EXPECT_EQ(back.height, 4);
  EXPECT_EQ(back.pixels, image.pixels);
  const std::vector<uint8_t> junk = {'G', 'I', 'F', '8', '9', 'a', 0, 1};
  test::expect_error_containing([&] { decode_png(junk, "init image 2"); }, "init image 2 is not a PNG");
  std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + long(bytes.size() / 2));
  test::expect_error_containing([&] { decode_png(truncated, "init image 1"); }, "init image 1");
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
