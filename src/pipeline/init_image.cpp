#include "pipeline/init_image.h"

namespace hd {

OwnedTensor init_image_of(const RgbImage& image) {
  OwnedTensor out(Shape{1, image.height, image.width, 3}, DType::kF32);
  float* v = out.ptr<float>();
  for (size_t i = 0; i < image.pixels.size(); ++i) v[i] = 2.0f * (float(image.pixels[i]) / 255.0f) - 1.0f;
  return out;
}

}  // namespace hd
