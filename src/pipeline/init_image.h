// img2img's starting picture: an 8-bit RGB image as the VAE encoder takes it, [1, H, W, 3] f32 in [-1, 1],
// the normalisation of diffusers' VaeImageProcessor (2 * v / 255 - 1).
#pragma once

#include "core/tensor.h"
#include "io/png.h"

namespace hd {

OwnedTensor init_image_of(const RgbImage& image);

}  // namespace hd
