// Front half of convert: checks, then the CPU loop or the GPU kernel.
#include "core/error.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

void convert(const Tensor& src, const Tensor& dst) {
  HD_CHECK(src.device == dst.device, "convert: source on ", src.device.to_string(), " but destination on ",
           dst.device.to_string());
  check_shape("convert", "destination", dst, src.shape);
  HD_CHECK(is_floating(src.dtype) && is_floating(dst.dtype), "convert: ", dtype_name(src.dtype), " to ",
           dtype_name(dst.dtype), " is not a floating-point conversion");
  HD_CHECK_KIND(src.is_contiguous() && dst.is_contiguous(), ErrorKind::kUnsupported,
                "convert: both tensors must be contiguous");
  if (src.device.is_cpu()) {
    hd::convert(src.data, src.dtype, dst.data, dst.dtype, size_t(src.numel()));
    return;
  }
#if defined(HD_WITH_GPU)
  gpu::convert(src, dst);
#else
  no_kernel("convert", src.device);
#endif
}

}  // namespace hd::ops
