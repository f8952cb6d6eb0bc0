#include "core/layout.h"

namespace hd {

void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) dst[((b * h + y) * w + x) * c + ch] = src[((b * c + ch) * h + y) * w + x];
}

void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) dst[((b * c + ch) * h + y) * w + x] = src[((b * h + y) * w + x) * c + ch];
}

}  // namespace hd
