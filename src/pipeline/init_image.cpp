#include "pipeline/init_image.h"

#include <cmath>

#include "core/error.h"

namespace hd {

OwnedTensor init_image_of(const RgbImage& image) {
  OwnedTensor out(Shape{1, image.height, image.width, 3}, DType::kF32);
  float* v = out.ptr<float>();
  for (size_t i = 0; i < image.pixels.size(); ++i) v[i] = 2.0f * (float(image.pixels[i]) / 255.0f) - 1.0f;
  return out;
}

RgbImage rgb8_of(const Tensor& images, int64_t index) {
  HD_ASSERT(images.rank() == 4 && images.dim(3) == 3 && images.dtype == DType::kF32 && images.device.is_cpu() &&
            images.is_contiguous() && index >= 0 && index < images.dim(0));
  const int64_t pixels = images.dim(1) * images.dim(2) * 3;
  RgbImage rgb{int(images.dim(2)), int(images.dim(1)), std::vector<uint8_t>(size_t(pixels))};
  const float* src = images.ptr<float>() + index * pixels;
  for (int64_t i = 0; i < pixels; ++i) rgb.pixels[size_t(i)] = uint8_t(std::nearbyint(src[i] * 255.0f));
  return rgb;
}

}  // namespace hd
