// Tiled VAE decoding: the tiling itself (where tiles fall, how they blend, how the crops cover the image)
// against decoders whose answers are known, and on the built-in model's real VAE against diffusers'
// tiled and whole decodes of the same latents.
#include "pipeline/tiled_decode.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "fixture_util.h"
#include "pipeline/default_model.h"
#include "pipeline/stable_diffusion.h"
#include "test_util.h"

namespace hd {
namespace {

// A "decoder" that only upsamples: every pixel is its latent's value. Tiling cannot change its answer.
OwnedTensor nearest(const Tensor& l, int64_t scale) {
  OwnedTensor out(Shape{l.dim(0), l.dim(1) * scale, l.dim(2) * scale, l.dim(3)}, DType::kF32);
  const int64_t h = l.dim(1), w = l.dim(2), c = l.dim(3);
  for (int64_t n = 0; n < l.dim(0); ++n)
    for (int64_t y = 0; y < h * scale; ++y)
      for (int64_t x = 0; x < w * scale; ++x)
        for (int64_t ch = 0; ch < c; ++ch)
          out.ptr<float>()[((n * h * scale + y) * w * scale + x) * c + ch] =
              l.ptr<float>()[((n * h + y / scale) * w + x / scale) * c + ch];
  return out;
}

TEST(TiledDecode, ALocalDecoderGivesTheUntiledImage) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (const auto& [n, h, w] : {std::tuple{2, 40, 24}, std::tuple{1, 16, 16}, std::tuple{1, 7, 50}}) {
    const OwnedTensor latents = test::random_tensor(rng, Shape{n, h, w, 3});
    int calls = 0;
    const OwnedTensor tiled = decode_in_tiles(latents, 4, VaeTiles{16, 0.25f}, [&](const Tensor& t) {
      ++calls;
      EXPECT_LE(t.dim(1), 16);
      EXPECT_LE(t.dim(2), 16);
      return nearest(t, 4);
    });
    EXPECT_EQ(calls, int(((h + 11) / 12) * ((w + 11) / 12)));  // a tile every 12 latents each way
    EXPECT_LE(test::relative_l2(tiled, test::as_reference(nearest(latents, 4))), 1e-6) << h << "x" << w;
  }
}

// Tiles decoded to constants (the first tile 1, the second 5, ...): the rows where a tile meets the one
// above are the linear fade diffusers' blend_v makes, a[-extent + y]·(1 - y/extent) + b[y]·y/extent.
TEST(TiledDecode, NeighboursFadeLinearlyOverTheOverlap) {
  const OwnedTensor latents(Shape{1, 20, 8, 1}, DType::kF32);  // two tiles of 16 rows: at 0 and 12
  float next = 1.0f;
  const OwnedTensor image = decode_in_tiles(latents, 2, VaeTiles{16, 0.25f}, [&](const Tensor& t) {
    OwnedTensor out(Shape{1, t.dim(1) * 2, t.dim(2) * 2, 1}, DType::kF32);
    for (int64_t i = 0; i < out.view().numel(); ++i) out.ptr<float>()[i] = next;
    next += 4.0f;
    return out;
  });
  // 32-pixel tiles, 8 pixels of overlap: the first tile keeps rows 0-23, the second fills 24-39 and
  // fades in from the first over its first 8.
  ASSERT_EQ(image.view().shape, (Shape{1, 40, 16, 1}));
  const auto at = [&](int64_t y, int64_t x) { return image.ptr<float>()[y * 16 + x]; };
  EXPECT_EQ(at(23, 3), 1.0f);
  for (int64_t y = 0; y < 8; ++y) EXPECT_FLOAT_EQ(at(24 + y, 5), 1.0f * (1.0f - y / 8.0f) + 5.0f * (y / 8.0f)) << y;
  EXPECT_EQ(at(39, 15), 5.0f);
}

TEST(TiledDecode, RefusesTilesThatDoNotCropEvenlyAndBadLatents) {
  const OwnedTensor latents(Shape{1, 20, 20, 4}, DType::kF32);
  const auto decoder = [](const Tensor& t) { return nearest(t, 8); };
  EXPECT_THROW(decode_in_tiles(latents, 8, VaeTiles{10, 0.25f}, decoder), Error);  // 7-latent stride, 60-px crop
  EXPECT_THROW(decode_in_tiles(latents, 8, VaeTiles{16, 1.0f}, decoder), Error);
  const OwnedTensor f16(Shape{1, 20, 20, 4}, DType::kF16);
  EXPECT_THROW(decode_in_tiles(f16, 8, VaeTiles{16, 0.25f}, decoder), Error);
}

// The built-in model's VAE (trained; 4 pixels a latent, 16-latent tiles) on seeded latents larger than a
// tile, against diffusers' own decode of them (tests/fixtures/models/shapes_tiny_tiled_vae.safetensors,
// tools/make_fixtures.py --only tiled_vae): tiled as its tiled_decode, and whole. Each tile's GroupNorms
// and attention see only that tile, so a tiled picture differs from the whole one; by as much as in
// diffusers, which is what the last check holds us to.
TEST(TiledDecode, MatchesDiffusersTiledDecode) {
  const StableDiffusion sd = StableDiffusion::load(default_model_folder(), std::nullopt);
  const test::Fixture fixture("models/shapes_tiny_tiled_vae.safetensors");
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const OwnedTensor latents = fixture.nhwc(name + ".latents");
    DecodeReport whole_report, tiled_report;
    const OwnedTensor whole = sd.decode(latents, &whole_report, VaeTiling::kAuto);
    const OwnedTensor tiled = sd.decode(latents, &tiled_report, VaeTiling::kBlended);
    EXPECT_FALSE(whole_report.tiled);
    EXPECT_TRUE(tiled_report.tiled);
    const double whole_err = test::relative_l2(whole, test::as_reference(fixture.nhwc(name + ".whole")));
    const double tiled_err = test::relative_l2(tiled, test::as_reference(fixture.nhwc(name + ".tiled")));
    const double ours = test::relative_l2(tiled, test::as_reference(whole));
    const double theirs = c["tiled_vs_whole_relative_l2"].get<double>();
    std::printf("%s: whole vs diffusers %.2e, tiled vs diffusers' tiled %.2e; tiled vs whole: ours %.4f, diffusers' %.4f\n",
                name.c_str(), whole_err, tiled_err, ours, theirs);
    EXPECT_LE(whole_err, 1e-5);
    EXPECT_LE(tiled_err, 1e-5);
    EXPECT_NEAR(ours, theirs, 1e-4);
  }
}

// The pipeline's --vae-tiling: exact tiles, which give the whole decode's picture (no seams).
TEST(TiledDecode, ThePipelinesTilesAreExact) {
  const StableDiffusion sd = StableDiffusion::load(default_model_folder(), std::nullopt);
  const test::Fixture fixture("models/shapes_tiny_tiled_vae.safetensors");
  const OwnedTensor latents = fixture.nhwc("wide.latents");
  DecodeReport whole_report, tiled_report;
  const OwnedTensor whole = sd.decode(latents, &whole_report, VaeTiling::kAuto);
  const OwnedTensor tiled = sd.decode(latents, &tiled_report, VaeTiling::kExact);
  EXPECT_TRUE(tiled_report.tiled);
  EXPECT_LE(test::relative_l2(tiled, test::as_reference(whole)), 1e-5);
  EXPECT_LE(test::relative_l2(tiled, test::as_reference(fixture.nhwc("wide.whole"))), 1e-4);
}

}  // namespace
}  // namespace hd
