// The four output phases of a 3x3 convolution (padding 1) of a nearest-2x-upsampled image. Output row
// 2y + dy reads upsampled rows 2y + dy - 1 .. 2y + dy + 1, which are rows y - 1 + dy .. y + dy of the image
// before upsampling (dy = 0: row y - 1 once and row y twice; dy = 1: row y twice, row y + 1 once), and
// likewise for columns: each phase (dy, dx) is a 2x2 convolution of the original image, padded 1 - dy rows
// at the top and 1 - dx columns at the left, whose taps sum the 3x3 taps that land on the same pixel.
// 16 multiply-adds per input pixel and channel pair where the upsampled convolution takes 36. Shared by
// the CPU's and the GPU's weight transforms (ops::upsample_conv2d_phases), which sum in this order.
#pragma once

#include "ops/host_device.h"

namespace hd::ops {

// The rows [first, last] of the 3x3 kernel that row `tap` (0 or 1) of phase `phase`'s 2x2 kernel sums
// (and the same for columns).
HD_HOST_DEVICE constexpr int phase_first_row(int phase, int tap) {
  return tap == 0 ? 0 : 1 + phase;
}
HD_HOST_DEVICE constexpr int phase_last_row(int phase, int tap) {
  return tap == 0 ? phase : 2;
}

}  // namespace hd::ops
