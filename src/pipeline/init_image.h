// Pictures in and out of the pipeline as 8-bit RGB. In: img2img's starting picture as the VAE encoder
// takes it, [1, H, W, 3] f32 in [-1, 1], the normalisation of diffusers' VaeImageProcessor (2 * v / 255 - 1).
// Out: one picture of a generation's [N, H, W, 3] image in [0, 1], rounded as numpy's round (every front
// end writes the same bytes for the same generation).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "io/png.h"

namespace hd {

OwnedTensor init_image_of(const RgbImage& image);

// Picture `index` of host f32 `images` [N, H, W, 3] in [0, 1].
RgbImage rgb8_of(const Tensor& images, int64_t index);

}  // namespace hd
