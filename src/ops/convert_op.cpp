// Front half of convert and copy, and device preparation.
#include <cstring>
#include <vector>

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

namespace {

// A copy between views as dense runs: `run` bytes at a time, over the outer dimensions (sizes and byte
// strides of both sides, innermost first) that do not merge into the run.
struct RunCopy {
  int64_t run = 0;
  struct Dim {
    int64_t size, src_stride, dst_stride;
  };
  std::vector<Dim> outer;
};

RunCopy plan_runs(const Tensor& src, const Tensor& dst) {
  const auto element = int64_t(dtype_size(src.dtype));
  RunCopy plan;
  plan.run = element;
  int d = src.rank() - 1;
  HD_CHECK_KIND(d < 0 || src.dim(d) == 1 || (src.strides[size_t(d)] == 1 && dst.strides[size_t(d)] == 1),
                ErrorKind::kUnsupported, "copy: views ", src.describe(), " and ", dst.describe(),
                " must have a dense last dimension");
  // Dimensions merge into the run while both sides are dense across them.
  for (; d >= 0; --d) {
    const int64_t size = src.dim(d);
    if (size != 1 && (src.strides[size_t(d)] * element != plan.run || dst.strides[size_t(d)] * element != plan.run))
      break;
    plan.run *= size;
  }
  for (; d >= 0; --d) {
    if (src.dim(d) == 1) continue;
    const int64_t s = src.strides[size_t(d)] * element, t = dst.strides[size_t(d)] * element;
    HD_CHECK_KIND(s >= 0 && t >= plan.run, ErrorKind::kUnsupported, "copy: the view ", dst.describe(),
                  " overlaps itself");
    plan.outer.push_back({src.dim(d), s, t});
  }
  return plan;
}

// copy's path for views on one device. A GPU copies up to three levels of runs in one kernel; else the
// innermost outer dimension is a 2-D copy (rows of `run` bytes at two pitches), the others looped over.
void copy_views(const Tensor& src, const Tensor& dst) {
  const RunCopy plan = plan_runs(src, dst);
#if defined(HD_WITH_GPU)
  if (src.device.is_gpu() && plan.outer.size() <= 3) {
    gpu::StridedRuns runs;
    runs.run = plan.run;
    runs.levels = int(plan.outer.size());
    for (size_t i = 0; i < plan.outer.size(); ++i)
      runs.size[i] = plan.outer[i].size, runs.src_stride[i] = plan.outer[i].src_stride,
      runs.dst_stride[i] = plan.outer[i].dst_stride;
    return gpu::copy_runs(src.data, dst.data, runs, src.device);
  }
#endif
  const RunCopy::Dim rows = plan.outer.empty() ? RunCopy::Dim{1, 0, 0} : plan.outer.front();
  const size_t loops = plan.outer.size() > 1 ? plan.outer.size() - 1 : 0;
  std::vector<int64_t> index(loops, 0);
  const auto* from = static_cast<const char*>(src.data);
  auto* to = static_cast<char*>(dst.data);
  while (true) {
    int64_t s = 0, t = 0;
    for (size_t i = 0; i < loops; ++i) s += index[i] * plan.outer[i + 1].src_stride, t += index[i] * plan.outer[i + 1].dst_stride;
    if (src.device.is_cpu()) {
      for (int64_t r = 0; r < rows.size; ++r)
        std::memmove(to + t + r * rows.dst_stride, from + s + r * rows.src_stride, size_t(plan.run));
    } else {
#if defined(HD_WITH_GPU)
      gpu::copy_2d(from + s, size_t(rows.src_stride), to + t, size_t(rows.dst_stride), size_t(plan.run),
                   size_t(rows.size), src.device);
#else
      no_kernel("copy", src.device);
#endif
    }
    size_t i = 0;
    for (; i < loops && ++index[i] == plan.outer[i + 1].size; ++i) index[i] = 0;
    if (i == loops) return;
  }
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  const OpScope scope("copy", src.device.is_cpu() ? dst.device : src.device);
  HD_CHECK(src.shape == dst.shape && src.dtype == dst.dtype, "copy: ", src.describe(), " does not match ",
           dst.describe());
  if (src.numel() == 0) return;
  if (!src.is_contiguous() || !dst.is_contiguous()) {
    HD_CHECK_KIND(src.device == dst.device, ErrorKind::kUnsupported, "copy: views ", src.describe(), " and ",
                  dst.describe(), " are on two devices; only dense tensors move between devices");
    return copy_views(src, dst);
  }
  if (src.device.is_cpu() && dst.device.is_cpu()) {
    std::memmove(dst.data, src.data, src.nbytes());
    return;
  }
#if defined(HD_WITH_GPU)
  gpu::copy(src, dst);
#else
  no_kernel("copy", src.device.is_cpu() ? dst.device : src.device);
#endif
}

void fill_zeros(const Tensor& t) {
  const OpScope scope("fill_zeros", t.device);
  HD_CHECK_KIND(t.is_contiguous(), ErrorKind::kUnsupported, "fill_zeros: ", t.describe(), " is not dense");
  if (t.numel() == 0) return;
  if (t.device.is_cpu()) {
    std::memset(t.data, 0, t.nbytes());
    return;
  }
#if defined(HD_WITH_GPU)
  gpu::fill_zeros(t.data, t.nbytes(), t.device);
#else
  no_kernel("fill_zeros", t.device);
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
