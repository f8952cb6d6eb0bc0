// The GPU kernels' launchers as seen from plain C++: the op API dispatches to these.
// Arguments arrive validated by src/ops/*.cpp.
#pragma once

#include "core/tensor.h"

namespace hd::gpu {

// dst = src converted between f32, f16 and bf16, rounding to nearest even (bit-identical to hd::convert).
void convert(const Tensor& src, const Tensor& dst);

}  // namespace hd::gpu
