// Front half of convert and copy, and device preparation.
#include <cstring>

#include "core/error.h"
#include "core/startup_trace.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/device_memory.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#endif

namespace hd::ops {

void convert(const Tensor& src, const Tensor& dst) {
  const OpScope scope("convert", src.device);
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

void copy(const Tensor& src, const Tensor& dst) {
  const OpScope scope("copy", src.device.is_cpu() ? dst.device : src.device);
  HD_CHECK(src.shape == dst.shape && src.dtype == dst.dtype, "copy: ", src.describe(), " does not match ",
           dst.describe());
  HD_CHECK_KIND(src.is_contiguous() && dst.is_contiguous(), ErrorKind::kUnsupported,
                "copy: both tensors must be contiguous");
  if (src.device.is_cpu() && dst.device.is_cpu()) {
    if (src.nbytes() > 0) std::memmove(dst.data, src.data, src.nbytes());
    return;
  }
#if defined(HD_WITH_GPU)
  gpu::copy(src, dst);
#else
  no_kernel("copy", src.device.is_cpu() ? dst.device : src.device);
#endif
}

void prepare_device(const Device& device) {
  if (device.is_cpu()) return;
#if defined(HD_WITH_GPU)
  HD_CHECK_KIND(device.type == gpu::build_device_type(), ErrorKind::kUnsupported, "device ", device.to_string(),
                ": this build's GPU kernels are for ",
                gpu::build_device_type() == DeviceType::kCuda ? "cuda" : "hip", " devices");
  gpu::initialize();
  int count = 0;
  {
    const StartupSpan span("GPU found");
    count = gpu::device_count();
  }
  HD_CHECK_KIND(device.index < count, ErrorKind::kUnsupported, "device ", device.to_string(), " does not exist: ",
                count == 0 ? std::string("no usable GPU was found (is the driver loaded?)")
                           : str_cat("this machine has ", count, " GPU", count == 1 ? "" : "s"));
  {
    const StartupSpan span("GPU context");
    (void)gpu::native_stream(device);
  }
#else
  throw Error(ErrorKind::kUnsupported, str_cat("device ", device.to_string(),
                                               ": this build has no GPU kernels; build with the cuda or hip preset"));
#endif
}

std::vector<Device> gpu_devices() {
  std::vector<Device> out;
#if defined(HD_WITH_GPU)
  gpu::initialize();
  for (int i = 0; i < gpu::device_count(); ++i) out.push_back(Device{gpu::build_device_type(), i});
#endif
  return out;
}

void synchronize(const Device& device) {
  if (device.is_cpu()) return;
#if defined(HD_WITH_GPU)
  gpu::synchronize(device);
#else
  no_kernel("synchronize", device);
#endif
}

size_t peak_device_memory(const Device& device, bool since_mark) {
  if (device.is_cpu()) return 0;
#if defined(HD_WITH_GPU)
  const gpu::MemoryStats stats = gpu::memory_stats(device);
  return since_mark ? stats.peak_since_mark : stats.peak_in_use;
#else
  (void)since_mark;
  no_kernel("peak_device_memory", device);
#endif
}

void set_device_memory_limit(const Device& device, size_t bytes) {
  HD_CHECK(device.is_gpu(), "a device memory limit applies to a GPU, not ", device.to_string());
#if defined(HD_WITH_GPU)
  gpu::set_memory_limit(device, bytes);
#else
  (void)bytes;
  no_kernel("set_device_memory_limit", device);
#endif
}

size_t device_memory_budget(const Device& device) {
  if (device.is_cpu()) return 0;
#if defined(HD_WITH_GPU)
  if (const size_t limit = gpu::memory_stats(device).limit) return limit;
  size_t free_bytes = 0, total_bytes = 0;
  gpu::device_memory_info(device, &free_bytes, &total_bytes);
  return total_bytes;
#else
  no_kernel("device_memory_budget", device);
#endif
}

size_t device_memory_in_use(const Device& device) {
  if (device.is_cpu()) return 0;
#if defined(HD_WITH_GPU)
  return gpu::memory_stats(device).in_use;
#else
  no_kernel("device_memory_in_use", device);
#endif
}

size_t mark_device_memory(const Device& device) {
  if (device.is_cpu()) return 0;
#if defined(HD_WITH_GPU)
  gpu::mark_peak(device);
  return gpu::memory_stats(device).in_use;
#else
  no_kernel("mark_device_memory", device);
#endif
}

}  // namespace hd::ops
