// Moving test data between the host (f32, where the CPU reference computes) and a GPU tensor of any
// element type, and poisoning outputs so that an element a kernel fails to write is caught.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace hd::test {

Device gpu0();
// A GPU copy of host f32 values, stored as `dtype` (rounded to nearest even).
OwnedTensor to_gpu(const Tensor& host_f32, DType dtype);
// A GPU tensor filled with NaN bit patterns (all bits set) in any dtype.
OwnedTensor poisoned_gpu(Shape shape, DType dtype);
// A GPU tensor's values as host f32.
OwnedTensor to_host_f32(const Tensor& gpu);
// Host f32 values after a round trip through `dtype`: the inputs the GPU kernel actually sees.
OwnedTensor rounded_to(const Tensor& host_f32, DType dtype);
// Host f32 values as the doubles relative_l2 takes its reference in.
std::vector<double> reference_of(const Tensor& host_f32);

}  // namespace hd::test
