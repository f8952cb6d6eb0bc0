// VAE decoding in tiles, for images whose decode would not fit in device memory at once: diffusers'
// AutoencoderKL.tiled_decode, step for step. Latent tiles of `latent` rows and columns start every
// latent·(1 - overlap) latents; each is decoded on its own; each decoded tile is blended linearly into
// its upper and left neighbours over overlap·latent·scale pixels and cropped to (1 - overlap)·latent·scale,
// and the crops are laid side by side. The device holds one tile's activations at a time, so peak memory
// no longer grows with the image; the blending happens on the host.
//
// Each tile's GroupNorms see only that tile, so a tiled picture is close to, not equal to, the untiled
// one (as in diffusers).
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"
#include "models/vae.h"

namespace hd {

// When and how the VAE decodes in tiles. kAuto: whole, unless that runs out of device memory, then as
// kExact. kExact: in exact tiles (Vae::decode_tiled_exact: the whole decode's picture, no seams, with one
// tile's activations on the device and the others in host memory). kBlended: in diffusers' blended tiles
// (decode_in_tiles below, as diffusers' enable_tiling: each tile normalised on its own, so tiles differ
// from the whole decode; for matching diffusers' tiled output).
enum class VaeTiling { kAuto, kExact, kBlended };

// `vae`'s decode of unscaled latents [N, h, w, c] (any device, any float dtype) as `tiling` says. Latents
// within one tile (diffusers' tile: the VAE's sample_size in pixels) decode whole. A whole decode gives the
// picture on the VAE's device in its dtype; tiles give a host f32 picture, and exact tiles shrink by halves
// (down to 16 latents) until one fits. `tiled`, when given, says which happened.
OwnedTensor decode_bounded(const Vae& vae, const Tensor& latents, VaeTiling tiling, bool* tiled = nullptr);

struct VaeTiles {
  int64_t latent = 64;    // diffusers: the VAE's sample_size / 8 (512-pixel tiles for SD)
  float overlap = 0.25f;  // diffusers' tile_overlap_factor
};

// latents: host f32 [N, h, w, c]; `scale`: pixels per latent (8 for SD); decode_tile maps host f32 latents
// [N, th, tw, c] to a host f32 image [N, th·scale, tw·scale, channels]. Returns the host f32 image.
OwnedTensor decode_in_tiles(const Tensor& latents, int64_t scale, const VaeTiles& tiles,
                            const std::function<OwnedTensor(const Tensor&)>& decode_tile);

}  // namespace hd
