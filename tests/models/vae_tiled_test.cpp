// Vae::decode_tiled_exact against the whole decode and diffusers' own whole decode, on the built-in
// model's trained VAE (4 pixels a latent) and seeded latents several tiles wide
// (tests/fixtures/models/shapes_tiny_tiled_vae.safetensors): exact tiling must give the whole decode's
// picture, where diffusers' blended tiles differ from it by 0.53-0.68 relative L2.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "fixture_util.h"
#include "io/model_source.h"
#include "models/vae.h"
#include "pipeline/default_model.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(VaeTiledExact, EqualsTheWholeDecodeForAnyTileSize) {
  const ModelSource model = ModelSource::open(default_model_folder());
  const Vae vae = Vae::load(*model.component("vae"));
  const test::Fixture fixture("models/shapes_tiny_tiled_vae.safetensors");
  for (const std::string name : {"square", "wide"}) {
    const OwnedTensor latents = fixture.nhwc(name + ".latents");  // 24x24 and 20x36 latents
    const OwnedTensor whole = vae.decode(latents);
    const std::vector<double> diffusers = test::as_reference(fixture.nhwc(name + ".whole"));
    for (const int64_t tile : {int64_t(16), int64_t(7), int64_t(1000)}) {  // 2x2 / 3x6 tiles, ragged; one tile
      const OwnedTensor tiled = vae.decode_tiled_exact(latents, tile);
      ASSERT_EQ(tiled.view().shape, whole.view().shape);
      const double vs_whole = test::relative_l2(tiled, test::as_reference(whole));
      const double vs_diffusers = test::relative_l2(tiled, diffusers);
      std::printf("%s, %lld-latent tiles: relative L2 %.2e against the whole decode, %.2e against diffusers' whole\n",
                  name.c_str(), (long long)tile, vs_whole, vs_diffusers);
      EXPECT_LE(vs_whole, 1e-5) << tile;  // f32 sums in another order; the issue asks for 1e-2
      EXPECT_LE(vs_diffusers, 1e-4) << tile;
    }
  }
}

TEST(VaeTiledExact, RejectsBadInput) {
  const ModelSource model = ModelSource::open(default_model_folder());
  const Vae vae = Vae::load(*model.component("vae"));
  const OwnedTensor latents(Shape{1, 8, 8, 4}, DType::kF32), wrong(Shape{1, 8, 8, 3}, DType::kF32);
  EXPECT_THROW(vae.decode_tiled_exact(latents, 0), Error);
  EXPECT_THROW(vae.decode_tiled_exact(wrong, 4), Error);
}

}  // namespace
}  // namespace hd
