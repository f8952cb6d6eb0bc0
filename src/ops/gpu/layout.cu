// Layout kernels on channels-last tensors: nearest 2x upsampling and channel concatenation. They move
// 16-bit or 32-bit elements without converting them, so one kernel per element size serves every dtype.
#include <type_traits>

#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/common.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = 256;

template <class E>  // E: uint16_t or uint32_t, the element's bits
__global__ void upsample_kernel(const E* __restrict__ x, E* __restrict__ out, int64_t h, int64_t w, int64_t c,
                                int64_t total) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t ch = i % c, ox = (i / c) % (2 * w), oy = (i / c / (2 * w)) % (2 * h), n = i / c / (2 * w) / (2 * h);
    out[i] = x[((n * h + oy / 2) * w + ox / 2) * c + ch];
  }
}

template <class E>
__global__ void concat_kernel(const E* __restrict__ a, const E* __restrict__ b, E* __restrict__ out, int64_t ca,
                              int64_t cb, int64_t total) {
  const int64_t c = ca + cb;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t row = i / c, ch = i % c;
    out[i] = ch < ca ? a[row * ca + ch] : b[row * cb + ch - ca];
  }
}

template <class F>
void with_bits(DType t, F f) {
  if (dtype_size(t) == 2) return f(static_cast<uint16_t*>(nullptr));
  f(static_cast<uint32_t*>(nullptr));
}

}  // namespace

void upsample_nearest_2x(const Tensor& x, const Tensor& out) {
  HD_CHECK_KIND(out.dtype == x.dtype, ErrorKind::kUnsupported, "upsample_nearest_2x: input and output dtypes differ");
  const int64_t total = out.numel();
  if (total == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_bits(x.dtype, [&](auto* bits) {
    using E = std::remove_pointer_t<decltype(bits)>;
    upsample_kernel<E><<<grid_stride_blocks(total, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const E*>(x.data), static_cast<E*>(out.data), x.dim(1), x.dim(2), x.dim(3), total);
  });
  HD_GPU_CHECK_LAUNCH();
}

void concat_channels(const Tensor& a, const Tensor& b, const Tensor& out) {
  HD_CHECK_KIND(a.dtype == b.dtype && out.dtype == a.dtype, ErrorKind::kUnsupported,
                "concat_channels: on the GPU all operands share one dtype");
  const int64_t total = out.numel();
  if (total == 0) return;
  HD_GPU_CHECK(cudaSetDevice(a.device.index));
  with_bits(a.dtype, [&](auto* bits) {
    using E = std::remove_pointer_t<decltype(bits)>;
    concat_kernel<E><<<grid_stride_blocks(total, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const E*>(a.data), static_cast<const E*>(b.data), static_cast<E*>(out.data), a.dim(-1), b.dim(-1),
        total);
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
