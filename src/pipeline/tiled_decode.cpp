#include "pipeline/tiled_decode.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"

namespace hd {

namespace {

// b's first `extent` rows (vertical) or columns become a's last ones fading into b's own, linearly:
// b[y] = a[len(a) - extent + y]·(1 - y/extent) + b[y]·(y/extent), as diffusers' blend_v / blend_h.
void blend(const OwnedTensor& a, OwnedTensor& b, int64_t extent, bool vertical) {
  const Tensor& av = a.view();
  const Tensor& bv = b.view();
  const int64_t n = bv.dim(0), c = bv.dim(3);
  const int64_t a_len = vertical ? av.dim(1) : av.dim(2), b_len = vertical ? bv.dim(1) : bv.dim(2);
  extent = std::min({a_len, b_len, extent});
  const int64_t across = vertical ? bv.dim(2) : bv.dim(1);  // the other direction (equal in a and b)
  const float* ap = a.ptr<float>();
  float* bp = b.ptr<float>();
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t y = 0; y < extent; ++y) {
      const float t = float(y) / float(extent);
      for (int64_t x = 0; x < across; ++x) {
        const int64_t ya = a_len - extent + y;
        const int64_t ia = vertical ? (img * av.dim(1) + ya) * av.dim(2) + x : (img * av.dim(1) + x) * av.dim(2) + ya;
        const int64_t ib = vertical ? (img * bv.dim(1) + y) * bv.dim(2) + x : (img * bv.dim(1) + x) * bv.dim(2) + y;
        for (int64_t ch = 0; ch < c; ++ch) bp[ib * c + ch] = ap[ia * c + ch] * (1.0f - t) + bp[ib * c + ch] * t;
      }
    }
  }
}

}  // namespace

OwnedTensor decode_in_tiles(const Tensor& latents, int64_t scale, const VaeTiles& tiles,
                            const std::function<OwnedTensor(const Tensor&)>& decode_tile) {
  HD_CHECK(latents.device.is_cpu() && latents.dtype == DType::kF32 && latents.rank() == 4 && latents.is_contiguous(),
           "tiled decode: latents ", latents.describe(), " must be host f32 [N, h, w, c]");
  HD_CHECK(tiles.latent >= 2 && tiles.overlap >= 0.0f && tiles.overlap < 1.0f && scale >= 1,
           "tiled decode: tiles of ", tiles.latent, " latents with overlap ", tiles.overlap, " are not usable");
  const int64_t n = latents.dim(0), h = latents.dim(1), w = latents.dim(2), c = latents.dim(3);
  // diffusers' integer arithmetic, so that the tiles fall where its own do.
  const int64_t stride = std::max<int64_t>(1, int64_t(float(tiles.latent) * (1.0f - tiles.overlap)));
  const int64_t tile_pixels = tiles.latent * scale;
  const int64_t extent = int64_t(float(tile_pixels) * tiles.overlap), limit = tile_pixels - extent;
  // Each tile keeps what lies before the next one starts: the crops then tile the image exactly.
  HD_CHECK(limit == stride * scale, "tiled decode: tiles of ", tiles.latent, " latents overlapping by ", tiles.overlap,
           " do not crop evenly (", limit, " kept pixels against a stride of ", stride * scale, ")");

  std::vector<std::vector<OwnedTensor>> rows;
  for (int64_t i = 0; i < h; i += stride) {
    rows.emplace_back();
    for (int64_t j = 0; j < w; j += stride) {
      const int64_t th = std::min(tiles.latent, h - i), tw = std::min(tiles.latent, w - j);
      OwnedTensor piece(Shape{n, th, tw, c}, DType::kF32);
      for (int64_t img = 0; img < n; ++img)
        for (int64_t y = 0; y < th; ++y)
          std::copy_n(latents.ptr<float>() + ((img * h + i + y) * w + j) * c, tw * c,
                      piece.ptr<float>() + ((img * th + y) * tw) * c);
      OwnedTensor decoded = decode_tile(piece);
      const Tensor& d = decoded.view();
      HD_CHECK_KIND(d.device.is_cpu() && d.dtype == DType::kF32 && d.rank() == 4 && d.dim(0) == n &&
                        d.dim(1) == th * scale && d.dim(2) == tw * scale,
                    ErrorKind::kInternal, "tiled decode: a tile decoded to ", d.describe());
      rows.back().push_back(std::move(decoded));
    }
  }
  const int64_t channels = rows[0][0].view().dim(3);
  OwnedTensor image(Shape{n, h * scale, w * scale, channels}, DType::kF32);
  int64_t y0 = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    int64_t x0 = 0, kept_rows = 0;
    for (size_t j = 0; j < rows[i].size(); ++j) {
      OwnedTensor& tile = rows[i][j];
      if (i > 0) blend(rows[i - 1][j], tile, extent, true);  // the neighbours as already blended, as diffusers
      if (j > 0) blend(rows[i][j - 1], tile, extent, false);
      const Tensor& t = tile.view();
      kept_rows = std::min(limit, t.dim(1));
      const int64_t kept_cols = std::min(limit, t.dim(2));
      for (int64_t img = 0; img < n; ++img)
        for (int64_t y = 0; y < kept_rows; ++y)
          std::copy_n(tile.ptr<float>() + ((img * t.dim(1) + y) * t.dim(2)) * channels, kept_cols * channels,
                      image.ptr<float>() + ((img * h * scale + y0 + y) * w * scale + x0) * channels);
      x0 += kept_cols;
    }
    y0 += kept_rows;
  }
  HD_CHECK_KIND(y0 == h * scale, ErrorKind::kInternal, "tiled decode: the crops cover ", y0, " of ", h * scale, " rows");
  return image;
}

OwnedTensor decode_bounded(const Vae& vae, const Tensor& latents, VaeTiling tiling, bool* tiled) {
  if (tiled != nullptr) *tiled = false;
  const ops::Placement& placement = vae.placement();
  const auto whole = [&](const Tensor& l) {
    const bool placed = l.device == placement.device && l.dtype == placement.dtype && l.is_contiguous();
    return placed ? vae.decode(l) : vae.decode(ops::place(l, placement));
  };
  HD_CHECK(latents.rank() == 4, "vae decode: latents ", latents.shape.to_string(), " must be [N, h, w, c]");
  const int64_t scale = int64_t(1) << (vae.config().block_out_channels.size() - 1);
  const int64_t tile = std::max<int64_t>(2, vae.config().sample_size / scale);
  const bool one_tile = latents.dim(1) <= tile && latents.dim(2) <= tile;
  if (tiling == VaeTiling::kAuto || one_tile) {
    try {
      return whole(latents);
    } catch (const Error& e) {
      // Out of device memory: the partial decode's tensors are gone with the exception, and the
      // allocator gives its cache back before it fails again; tiles need one tile's worth.
      if (e.kind() != ErrorKind::kOutOfMemory || placement.device.is_cpu() || one_tile) throw;
    }
  }
  if (tiled != nullptr) *tiled = true;
  const OwnedTensor host = ops::to_host_f32(latents);
  if (tiling == VaeTiling::kBlended)
    return decode_in_tiles(host, scale, VaeTiles{tile},
                           [&](const Tensor& l) { return ops::to_host_f32(whole(l)); });
  // Smaller tiles when one tile's work does not fit either, down to kMinTile latents (below that the
  // halos, 13 latents for SD's VAE, would make up most of every tile).
  constexpr int64_t kMinTile = 16;
  for (int64_t size = tile;; size /= 2) {
    try {
      return vae.decode_tiled_exact(host, size);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kOutOfMemory || placement.device.is_cpu() || size / 2 < kMinTile) throw;
    }
  }
}

}  // namespace hd
