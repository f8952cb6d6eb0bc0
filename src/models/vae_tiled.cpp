// Vae::decode_tiled_exact: the decoder's up path over tiles in lockstep, GroupNorm by GroupNorm, so that
// every norm sees the whole image's statistics and every convolution its whole receptive field.
#include <algorithm>
#include <cmath>
#include <vector>

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
};

// A tile: its core (the tiles' cores partition the image) and its extent (the core and a halo, clipped to
// the image), in latents; its activation over the extent at the current resolution, on the host.
struct Tile {
  Rect core, extent;
  OwnedTensor x;  // the input of the next step, [N, extent rows, extent columns, C] in the model's dtype
};

// Host copies in the model's dtype: moving f16 is half the bytes of f32, and no conversion runs on the
// host (converting every activation to and from f32 there took most of a 1024x1024 decode's time).
OwnedTensor to_host(const Tensor& t) {
  OwnedTensor host(t.shape, t.dtype);
  ops::copy(t, host);
  return host;
}
OwnedTensor to_device(const Tensor& t, const Device& device) {
  OwnedTensor placed(t.shape, t.dtype, device);
  ops::copy(t, placed);
  return placed;
}

// The per-channel scale and shift [N, 1, 1, C] that normalise with the whole image's statistics of each
// (sample, group) over the tiles' cores, then apply gamma and beta: x·a + b is the GroupNorm of x.
std::pair<OwnedTensor, OwnedTensor> group_norm_affine(const std::vector<Tile>& tiles, const GroupNorm& norm,
                                                      int64_t scale) {
  const Tensor& first = tiles.front().x.view();
  const int64_t n = first.dim(0), c = first.dim(3), groups = norm.groups, per_group = c / groups;
  std::vector<double> sum(size_t(n * groups), 0.0), squares(size_t(n * groups), 0.0);
  int64_t pixels = 0;
  for (const Tile& t : tiles) {
    const Rect core = t.core.scaled(scale), extent = t.extent.scaled(scale);
    const int64_t width = extent.x1 - extent.x0, core_width = core.x1 - core.x0;
    const auto* bytes = static_cast<const char*>(t.x.view().data);
    const size_t element = dtype_size(t.x.view().dtype);
    std::vector<float> row(size_t(core_width * c));  // one row of the core, in f32
    pixels += (core.y1 - core.y0) * core_width;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t y = core.y0; y < core.y1; ++y) {
        const int64_t first = ((b * (extent.y1 - extent.y0) + (y - extent.y0)) * width + (core.x0 - extent.x0)) * c;
        convert(bytes + size_t(first) * element, t.x.view().dtype, row.data(), DType::kF32, row.size());
        for (int64_t x = 0; x < core_width; ++x) {
          const float* px = row.data() + x * c;
          for (int64_t g = 0; g < groups; ++g) {
            double s = 0, q = 0;
            for (int64_t k = 0; k < per_group; ++k) {
              const double value = px[g * per_group + k];
              s += value;
              q += value * value;
            }
            sum[size_t(b * groups + g)] += s;
            squares[size_t(b * groups + g)] += q;
          }
        }
      }
    }
  }
  const OwnedTensor gamma = ops::to_host_f32(norm.gamma), beta = ops::to_host_f32(norm.beta);
  OwnedTensor a(Shape{n, 1, 1, c}, DType::kF32), shift(Shape{n, 1, 1, c}, DType::kF32);
  const double count = double(pixels * per_group);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t i = size_t(b * groups + ch / per_group);
      const double mean = sum[i] / count, variance = std::max(0.0, squares[i] / count - mean * mean);
      const double rstd = 1.0 / std::sqrt(variance + double(norm.eps));
      const double factor = double(gamma.ptr<float>()[ch]) * rstd;
      a.ptr<float>()[b * c + ch] = float(factor);
      shift.ptr<float>()[b * c + ch] = float(double(beta.ptr<float>()[ch]) - mean * factor);
    }
  }
  return {std::move(a), std::move(shift)};
}

// Writes the dense host `src` [N, H, W, C] into the host f32 NHWC view `dst` of its shape (strided in rows
// and columns, dense in channels), a row of pixels at a time, converting to f32.
void paste(const Tensor& src, const Tensor& dst) {
  HD_CHECK(src.shape == dst.shape && dst.strides[3] == 1 && dst.dtype == DType::kF32,
           "vae tiled decode: cannot paste ", src.describe());
  const auto* from = static_cast<const char*>(src.data);
  float* to = dst.ptr<float>();
  const int64_t rows = src.dim(1), row_values = src.dim(2) * src.dim(3);
  const size_t element = dtype_size(src.dtype);
  for (int64_t b = 0; b < src.dim(0); ++b)
    for (int64_t y = 0; y < rows; ++y)
      convert(from + size_t((b * rows + y) * row_values) * element, src.dtype,
              to + b * dst.strides[0] + y * dst.strides[1], DType::kF32, size_t(row_values));
}

// GroupNorm with the given affine, then SiLU, on the device.
OwnedTensor normalize(const Tensor& x, const std::pair<OwnedTensor, OwnedTensor>& affine, const ops::Placement& p) {
  OwnedTensor y = OwnedTensor::like(x, x.shape);
  ops::mul(x, ops::place(affine.first, p), y);
  ops::add(y, ops::place(affine.second, p), y);
  ops::silu(y, y);
  return y;
}

}  // namespace

OwnedTensor Vae::decode_tiled_exact(const Tensor& latents, int64_t tile_latents) const {
  HD_CHECK(latents.rank() == 4 && latents.dim(3) == config_.latent_channels && latents.device.is_cpu() &&
               latents.dtype == DType::kF32,
           "vae tiled decode: latents ", latents.describe(), " must be host f32 [N, h, w, ", config_.latent_channels,
           "]");
  HD_CHECK(tile_latents >= 1, "vae tiled decode: tiles of ", tile_latents, " latents");
  const ops::Placement& p = placement_;
  // The latent-resolution head (post_quant_conv, conv_in, the mid block with its attention over every
  // position) is small: decoded whole.
  OwnedTensor head;
  {
    const OwnedTensor placed = ops::place(latents, p);
    OwnedTensor x = post_quant_conv_ ? (*post_quant_conv_)(placed) : OwnedTensor();
    OwnedTensor h = decoder_in_(post_quant_conv_ ? x.view() : placed.view());
    head = to_host((*decoder_mid_)(h));
  }
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
  const int64_t n = latents.dim(0), h = latents.dim(1), w = latents.dim(2);

  std::vector<Tile> tiles;
  for (int64_t y = 0; y < h; y += tile_latents) {
    for (int64_t x = 0; x < w; x += tile_latents) {
      const Rect core{y, std::min(h, y + tile_latents), x, std::min(w, x + tile_latents)};
      const Rect extent{std::max<int64_t>(0, core.y0 - halo), std::min(h, core.y1 + halo),
                        std::max<int64_t>(0, core.x0 - halo), std::min(w, core.x1 + halo)};
      tiles.push_back({core, extent,
                       OwnedTensor::copy_of(head.view()
                                                .slice(1, extent.y0, extent.y1 - extent.y0)
                                                .slice(2, extent.x0, extent.x1 - extent.x0))});
    }
  }
  // Each step: the whole image's statistics of every tile's input, then every tile through the step on
  // the device, its output back on the host.
  const auto for_each_tile = [&](const auto& step) {
    for (Tile& t : tiles) t.x = to_host(step(to_device(t.x, p.device)));
  };
  scale = 1;
  for (const Level& level : up_) {
    for (const ResnetBlock& r : level.resnets) {
      const auto first = group_norm_affine(tiles, r.norm1, scale);
      std::vector<OwnedTensor> inputs;  // the resnet's input per tile, kept on the host for its residual
      for (Tile& t : tiles) {
        inputs.push_back(std::move(t.x));
        t.x = to_host(r.conv1(normalize(to_device(inputs.back(), p.device), first, p)));
      }
      const auto second = group_norm_affine(tiles, r.norm2, scale);
      size_t i = 0;
      for_each_tile([&](const OwnedTensor& h_tile) {
        const OwnedTensor x = to_device(inputs[i++], p.device);
        const OwnedTensor y = normalize(h_tile, second, p);
        if (r.shortcut) {
          const OwnedTensor skip = (*r.shortcut)(x);
          return r.conv2(y, &skip.view());
        }
        return r.conv2(y, &x.view());
      });
    }
    if (level.resample) {
      for_each_tile([&](const OwnedTensor& x) {
        const Tensor& v = x.view();
        OwnedTensor up = OwnedTensor::like(v, Shape{v.dim(0), 2 * v.dim(1), 2 * v.dim(2), v.dim(3)});
        ops::upsample_nearest_2x(x, up);
        return (*level.resample)(up);
      });
      scale *= 2;
    }
  }
  const auto last = group_norm_affine(tiles, decoder_norm_out_, scale);
  for_each_tile([&](const OwnedTensor& x) { return decoder_out_(normalize(x, last, p)); });

  // The cores, side by side.
  const int64_t channels = tiles.front().x.view().dim(3);
  OwnedTensor image(Shape{n, h * scale, w * scale, channels}, DType::kF32);
  for (const Tile& t : tiles) {
    const Rect core = t.core.scaled(scale), extent = t.extent.scaled(scale);
    const OwnedTensor inner = OwnedTensor::copy_of(t.x.view()
                                                       .slice(1, core.y0 - extent.y0, core.y1 - core.y0)
                                                       .slice(2, core.x0 - extent.x0, core.x1 - core.x0));
    paste(inner, image.view().slice(1, core.y0, core.y1 - core.y0).slice(2, core.x0, core.x1 - core.x0));
  }
  return image;
}

}  // namespace hd
