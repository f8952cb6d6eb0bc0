#include "ops/gpu/gpu_test_util.h"

#include <cstring>

#include "ops/gpu/gpu_runtime.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd::test {

Device gpu0() {
  gpu::initialize();
  return Device{gpu::build_device_type(), 0};
}

OwnedTensor to_gpu(const Tensor& host_f32, DType dtype) {
  OwnedTensor narrow(host_f32.shape, dtype);
  ops::convert(host_f32, narrow);
  OwnedTensor dev(host_f32.shape, dtype, gpu0());
  gpu::copy(narrow, dev);
  return dev;
}

OwnedTensor poisoned_gpu(Shape shape, DType dtype) {
  OwnedTensor host(shape, dtype);
  std::memset(host.view().data, 0xff, host.view().nbytes());
  OwnedTensor dev(shape, dtype, gpu0());
  gpu::copy(host, dev);
  return dev;
}

OwnedTensor to_host_f32(const Tensor& gpu_tensor) {
  OwnedTensor host(gpu_tensor.shape, gpu_tensor.dtype);
  gpu::copy(gpu_tensor, host);
  OwnedTensor wide(gpu_tensor.shape, DType::kF32);
  ops::convert(host, wide);
  return wide;
}

OwnedTensor rounded_to(const Tensor& host_f32, DType dtype) {
  OwnedTensor narrow(host_f32.shape, dtype), wide(host_f32.shape, DType::kF32);
  ops::convert(host_f32, narrow);
  ops::convert(narrow, wide);
  return wide;
}

std::vector<double> reference_of(const Tensor& host_f32) {
  return to_doubles(host_f32);
}

}  // namespace hd::test
