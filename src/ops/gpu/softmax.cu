// Softmax over the last dimension: one group of 32 lanes per row (the maximum, the sum of exponentials,
// then the output), f32 arithmetic for every dtype.
#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kFragmentLanes;

template <class T>
__global__ void __launch_bounds__(kThreads) softmax_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t rows,
                                                           int64_t cols, int64_t causal_queries) {
  const int lane = int(threadIdx.x) % kFragmentLanes;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kFragmentLanes;
  if (row >= rows) return;  // whole 32-lane groups leave together
  const T* in = x + row * cols;
  // Columns past `used` are masked (causal: a query sees the keys up to its own position, at least one).
  const int64_t seen = causal_queries > 0 ? row % causal_queries + 1 : cols, used = seen < cols ? seen : cols;
  float m = -INFINITY;
  for (int64_t c = lane; c < used; c += kFragmentLanes) m = fmaxf(m, to_float(in[c]));
  m = group_max(m);
  float sum = 0.f;
  for (int64_t c = lane; c < used; c += kFragmentLanes) sum += expf(to_float(in[c]) - m);
  const float inv = 1.f / group_sum(sum);
  for (int64_t c = lane; c < cols; c += kFragmentLanes)
    out[row * cols + c] = c < used ? from_float<T>(expf(to_float(in[c]) - m) * inv) : from_float<T>(0.f);
}

}  // namespace

void softmax(const Tensor& x, const Tensor& out, int64_t causal_queries) {
  HD_CHECK_KIND(out.dtype == x.dtype, ErrorKind::kUnsupported, "softmax: input and output dtypes differ");
  const int64_t cols = x.dim(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  if (rows == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  const unsigned blocks = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    softmax_kernel<T><<<blocks, kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x.data), static_cast<T*>(out.data), rows, cols, causal_queries);
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
