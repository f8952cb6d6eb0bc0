// Vae::decode_tiled_exact: the decoder's up path over tiles in lockstep, GroupNorm by GroupNorm, so that
// every norm sees the whole image's statistics and every convolution its whole receptive field.
//
// Between norms the tiles' activations wait in pinned host memory (copies at full link speed) and only
// one tile's work is on the device. Each norm is a barrier: its statistics come from every tile's core
// (summed on the device, combined on the host), so a resnet takes two passes over the tiles. The first
// computes conv1's output only for norm2's statistics; the second computes it again (a convolution costs
// less than storing it and reading it back), runs the rest of the resnet and sends the tile's output to
// the host. A level's upsampler is never stored either: the pass that ends the level runs it for the
// next norm's statistics, and the next level's passes run it again on the stored activation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/error.h"
#include "models/vae.h"
#include "ops/ops.h"
#include "ops/placement.h"

namespace hd {

namespace {

struct Rect {
  int64_t y0, y1, x0, x1;
  Rect scaled(int64_t s) const { return {y0 * s, y1 * s, x0 * s, x1 * s}; }
  int64_t pixels() const { return (y1 - y0) * (x1 - x0); }
};

// A tile: its core (the tiles' cores partition the image) and its extent (the core and a halo, clipped to
// the image), in latents; two host slots for its activation at the current step, the step's input and
// output in turn.
struct Tile {
  Rect core, extent;
  void* slot[2];
};

// The dense host view of a tile's activation with `channels` at `scale` pixels per latent.
Tensor slot_view(const Tile& t, int slot, int64_t n, int64_t scale, int64_t channels, DType dtype) {
  const Rect e = t.extent.scaled(scale);
  return Tensor::contiguous(t.slot[slot], dtype, Shape{n, e.y1 - e.y0, e.x1 - e.x0, channels});
}

// The view of a tile's core inside an activation `x` over its extent, at `scale` pixels per latent.
Tensor core_of(const Tensor& x, const Tile& t, int64_t scale) {
  const Rect core = t.core.scaled(scale), extent = t.extent.scaled(scale);
  return x.slice(1, core.y0 - extent.y0, core.y1 - core.y0).slice(2, core.x0 - extent.x0, core.x1 - core.x0);
}

// Copies between host views of one shape whose rows and samples may be strided (a tile's core inside its
// extent, or inside the image), a row of pixels at a time.
void copy_rows(const Tensor& src, const Tensor& dst) {
  HD_ASSERT(src.shape == dst.shape && src.dtype == dst.dtype && src.strides[2] == src.dim(3) &&
            dst.strides[2] == dst.dim(3) && src.strides[3] == 1 && dst.strides[3] == 1);
  const auto element = int64_t(dtype_size(src.dtype));
  const size_t row_bytes = size_t(src.dim(2) * src.dim(3) * element);
  for (int64_t b = 0; b < src.dim(0); ++b)
    for (int64_t y = 0; y < src.dim(1); ++y)
      std::memcpy(static_cast<char*>(dst.data) + (b * dst.strides[0] + y * dst.strides[1]) * element,
                  static_cast<const char*>(src.data) + (b * src.strides[0] + y * src.strides[1]) * element, row_bytes);
}

OwnedTensor on_device(const Tensor& host, const Device& device) {
  OwnedTensor placed(host.shape, host.dtype, device);
  ops::copy(host, placed);
  return placed;
}

// Every tile's statistics for one GroupNorm, [tiles, N, groups, 2] on the device, each tile's recorded
// from its core; affine() combines them into the norm's map, on the device.
class NormStatistics {
 public:
  NormStatistics(const std::vector<Tile>& tiles, int64_t n, int groups, const Device& device)
      : tiles_(&tiles),
        n_(n),
        groups_(groups),
        parts_(Shape{int64_t(tiles.size()), n, groups, 2}, DType::kF32, device) {}

  // `core`: the tile's core at `scale` pixels per latent (core_of).
  void record(size_t tile, const Tensor& core, int64_t scale) {
    scale_ = scale;
    const Tensor part = parts_.view().slice(0, int64_t(tile), 1).reshape(Shape{n_, groups_, 2});
    ops::group_statistics(core, groups_, part);
  }
  OwnedTensor affine(const GroupNorm& norm) const {
    HD_ASSERT(norm.groups == groups_);
    OwnedTensor host(parts_.view().shape, DType::kF32);
    ops::copy(parts_, host);
    std::vector<int64_t> pixels;
    for (const Tile& t : *tiles_) pixels.push_back(t.core.scaled(scale_).pixels());
    return on_device(ops::group_norm_affine(host, pixels, norm.gamma, norm.beta, norm.eps), parts_.view().device);
  }

 private:
  const std::vector<Tile>* tiles_;
  int64_t n_;
  int groups_;
  int64_t scale_ = 1;
  OwnedTensor parts_;
};

OwnedTensor normalized(const Tensor& x, const Tensor& affine) {
  OwnedTensor y = OwnedTensor::like(x, x.shape);
  ops::group_norm_apply(x, affine, /*fuse_silu=*/true, y);
  return y;
}

}  // namespace

OwnedTensor Vae::decode_tiled_exact(const Tensor& latents, int64_t tile_latents) const {
  HD_CHECK(latents.rank() == 4 && latents.dim(3) == config_.latent_channels && latents.device.is_cpu() &&
               latents.dtype == DType::kF32,
           "vae tiled decode: latents ", latents.describe(), " must be host f32 [N, h, w, ", config_.latent_channels,
           "]");
  HD_CHECK(tile_latents >= 1, "vae tiled decode: tiles of ", tile_latents, " latents");
  for (const Level& level : up_)
    HD_CHECK_KIND(!level.resample || !level.resnets.empty(), ErrorKind::kUnsupported,
                  "vae tiled decode: an upsampler without resnets before it");
  const ops::Placement& p = placement_;
  const Device& device = p.device;
  const int64_t n = latents.dim(0), h = latents.dim(1), w = latents.dim(2);

  // The halo: the up path's receptive field in latents (each 3x3 convolution reaches one pixel further at
  // its resolution; a level's resnets have two, its upsampler one, conv_out one at the end).
  double reach = 0;
  int64_t scale = 1;
  for (const Level& level : up_) {
    reach += 2.0 * double(level.resnets.size()) / double(scale);
    if (level.resample) {
      scale *= 2;
      reach += 1.0 / double(scale);
    }
  }
  reach += 1.0 / double(scale);
  const auto halo = int64_t(std::ceil(reach));
  std::vector<Tile> tiles;
  for (int64_t y = 0; y < h; y += tile_latents) {
    for (int64_t x = 0; x < w; x += tile_latents) {
      const Rect core{y, std::min(h, y + tile_latents), x, std::min(w, x + tile_latents)};
      const Rect extent{std::max<int64_t>(0, core.y0 - halo), std::min(h, core.y1 + halo),
                        std::max<int64_t>(0, core.x0 - halo), std::min(w, core.x1 + halo)};
      tiles.push_back({core, extent, {}});
    }
  }

  // What waits on the host between passes: the head's output and each resnet's. A level's upsampler is
  // not stored: the next passes run it again on the stored activation (nearest 2x quadruples the bytes,
  // and moving them costs more than the convolution).
  int64_t slot_values = 0;
  scale = 1;
  const auto fit = [&](int64_t channels) {
    for (const Tile& t : tiles) slot_values = std::max(slot_values, n * t.extent.scaled(scale).pixels() * channels);
  };
  fit(decoder_in_.out_channels());
  for (const Level& level : up_) {
    for (const ResnetBlock& r : level.resnets) fit(r.conv2.out_channels());
    if (level.resample) scale *= 2;
  }
  const size_t slot_bytes =
      (size_t(slot_values) * dtype_size(p.dtype) + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
  Arena host(Buffer::pinned_host(device, 2 * tiles.size() * slot_bytes));
  for (Tile& t : tiles)
    for (void*& slot : t.slot)
      slot = host.allocate(Shape{int64_t(slot_bytes / 4)}, DType::kF32, "a tile's activation").data;

  scale = 1;
  // The stored activation: in slot `in` of every tile, `channels` wide at `scale` pixels per latent; the
  // steps see it through `pending`, the upsampler still to run on it (at 2·scale then). One tile's stays
  // on the device from one pass to the next: passes that read the tiles alternate their order, so each
  // starts with the tile the last one ended with.
  int in = 0;
  int64_t channels = 0;
  const Conv2d* pending = nullptr;
  std::optional<std::pair<size_t, OwnedTensor>> kept;
  const auto stored = [&](size_t i) {
    if (kept && kept->first == i) {
      OwnedTensor x = std::move(kept->second);
      kept.reset();
      return x;
    }
    return on_device(slot_view(tiles[i], in, n, scale, channels, p.dtype), device);
  };
  const auto upsample_pending = [&](const Tensor& x) { return pending->upsampled(x); };
  const auto input_scale = [&] { return pending ? 2 * scale : scale; };

  // The latent-resolution head (post_quant_conv, conv_in, the mid block with its attention over every
  // position) is small: decoded whole, its statistics taken over each tile's core, its tiles cut on the host.
  NormStatistics statistics(tiles, n, up_.front().resnets.front().norm1.groups, device);
  {
    const OwnedTensor placed = ops::place(latents, p);
    OwnedTensor x = post_quant_conv_ ? (*post_quant_conv_)(placed) : OwnedTensor();
    const OwnedTensor head = (*decoder_mid_)(decoder_in_(post_quant_conv_ ? x.view() : placed.view()));
    channels = head.view().dim(3);
    OwnedTensor whole(head.view().shape, head.view().dtype);
    ops::copy(head, whole);
    for (size_t i = 0; i < tiles.size(); ++i) {
      const Rect e = tiles[i].extent, c = tiles[i].core;
      copy_rows(whole.view().slice(1, e.y0, e.y1 - e.y0).slice(2, e.x0, e.x1 - e.x0),
                slot_view(tiles[i], in, n, 1, channels, p.dtype));
      statistics.record(i, head.view().slice(1, c.y0, c.y1 - c.y0).slice(2, c.x0, c.x1 - c.x0), 1);
    }
  }

  for (size_t l = 0; l < up_.size(); ++l) {
    const Level& level = up_[l];
    for (size_t k = 0; k < level.resnets.size(); ++k) {
      const ResnetBlock& r = level.resnets[k];
      const bool last_of_level = k + 1 == level.resnets.size();
      const int64_t at = input_scale();
      const OwnedTensor first = statistics.affine(r.norm1);
      const auto inner = [&](const Tensor& x) { return r.conv1(normalized(x, first)); };
      // Pass 1, tiles in order: conv1's output, for norm2's statistics.
      NormStatistics second_statistics(tiles, n, r.norm2.groups, device);
      for (size_t i = 0; i < tiles.size(); ++i) {
        OwnedTensor raw = stored(i);
        const OwnedTensor h = inner(pending ? upsample_pending(raw).view() : raw.view());
        second_statistics.record(i, core_of(h, tiles[i], at), at);
        if (i + 1 == tiles.size()) kept.emplace(i, std::move(raw));
      }
      const OwnedTensor second = second_statistics.affine(r.norm2);
      // Pass 2, tiles in reverse: the whole resnet; the statistics the next norm sees (after the level's
      // upsampler, which runs here for them only); the output to the host.
      const GroupNorm& next_norm = !last_of_level ? level.resnets[k + 1].norm1
                                   : l + 1 < up_.size() ? up_[l + 1].resnets.front().norm1
                                                        : decoder_norm_out_;
      const Conv2d* next_pending = last_of_level && level.resample ? &*level.resample : nullptr;
      const int64_t next_at = next_pending ? 2 * at : at;
      statistics = NormStatistics(tiles, n, next_norm.groups, device);
      for (size_t i = tiles.size(); i-- > 0;) {
        OwnedTensor x = stored(i);
        if (pending) x = upsample_pending(x);
        const OwnedTensor skip = r.shortcut ? (*r.shortcut)(x) : OwnedTensor();
        OwnedTensor y = r.conv2(normalized(inner(x), second), r.shortcut ? &skip.view() : &x.view());
        statistics.record(
            i, core_of(next_pending ? next_pending->upsampled(y).view() : y.view(), tiles[i], next_at),
            next_at);
        ops::copy(y, slot_view(tiles[i], 1 - in, n, at, r.conv2.out_channels(), p.dtype));
        if (i == 0) kept.emplace(i, std::move(y));
      }
      in = 1 - in;
      scale = at;
      channels = r.conv2.out_channels();
      pending = next_pending;
    }
  }

  // conv_norm_out, SiLU, conv_out; the cores side by side in the image.
  const OwnedTensor last = statistics.affine(decoder_norm_out_);
  const int64_t out_scale = input_scale();
  OwnedTensor image(Shape{n, h * out_scale, w * out_scale, decoder_out_.out_channels()}, DType::kF32);
  for (size_t i = 0; i < tiles.size(); ++i) {
    OwnedTensor x = stored(i);
    if (pending) x = upsample_pending(x);
    const OwnedTensor out = ops::to_host_f32(decoder_out_(normalized(x, last)));
    const Rect core = tiles[i].core.scaled(out_scale);
    copy_rows(core_of(out, tiles[i], out_scale),
              image.view().slice(1, core.y0, core.y1 - core.y0).slice(2, core.x0, core.x1 - core.x0));
  }
  return image;
}

}  // namespace hd
