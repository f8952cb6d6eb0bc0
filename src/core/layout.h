// Moving between PyTorch's NCHW layout (diffusers' latents, torch's noise order, saved latents) and the
// engine's NHWC, for host f32 data.
#pragma once

#include <cstdint>

namespace hd {

void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w);
void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w);

}  // namespace hd
