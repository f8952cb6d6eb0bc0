// GroupNorm statistics of a strided view (a tile's core inside its halo): each (sample, group)'s mean and
// sum of squared deviations, which the host combines over the tiles (ops::group_norm_affine); and their
// combination on the device (ops::group_norm_combine: the strips of an image split over GPUs).
//
// Two kernels, as group_norm's first pass: blocks sum slices of the view's pixels, then one block per
// sample adds the slices in a fixed order (the same bits on every run). Sums are of x minus the group's
// first value in the view, so that a large mean does not cancel the spread away.
#include <algorithm>
#include <type_traits>

#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/group_sums.cuh"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = kGroupSumThreads;

// Where pixel p (row-major over the view's rows and columns) of sample n starts.
struct StridedPixels {
  int64_t sample_stride, row_stride, column_stride;
  int columns;
  __device__ int64_t offset(int n, int64_t p) const {  // p < 2^31: 32-bit division
    const int pixel = int(p);
    return n * sample_stride + (pixel / columns) * row_stride + (pixel % columns) * column_stride;
  }
};

// 16-byte loads (16-bit types, C % 8 == 0, C <= 2048, every stride a multiple of 8): a block per (slice,
// sample), block_group_sums_vector over the slice's pixels. partial [N][slices][groups] (sum, squares).
template <class T>
__global__ void __launch_bounds__(kThreads) partial_sums_vector_kernel(const T* __restrict__ x, StridedPixels at,
                                                                       int64_t pixels, int channels, int groups,
                                                                       int slices, float2* __restrict__ partial) {
  extern __shared__ float channel_sums[];  // [2][channels]
  const int slice = int(blockIdx.x), n = int(blockIdx.y);
  const int64_t begin = pixels * slice / slices, end = pixels * (slice + 1) / slices;
  block_group_sums_vector<T>(
      [&](int64_t p) { return x + at.offset(n, p); }, begin, end, channels, groups,
      /*offset=*/nullptr, channel_sums,
      [&](int g, float2 sums) { partial[(int64_t(n) * slices + slice) * groups + g] = sums; });
}

// Any dtype and channel count: a block per (slice, group, sample).
template <class T>
__global__ void __launch_bounds__(kThreads) partial_sums_scalar_kernel(const T* __restrict__ x, StridedPixels at,
                                                                       int64_t pixels, int channels, int groups,
                                                                       int slices, float2* __restrict__ partial) {
  __shared__ float shared[kThreads / kFragmentLanes];
  const int slice = int(blockIdx.x), g = int(blockIdx.y), n = int(blockIdx.z);
  const int per_group = channels / groups;
  const int64_t begin = pixels * slice / slices, end = pixels * (slice + 1) / slices;
  const float shift = to_float(x[at.offset(n, 0) + int64_t(g) * per_group]);
  const float2 sums = block_group_sums(
      [&](int64_t e) {
        return to_float(x[at.offset(n, begin + e / per_group) + int64_t(g) * per_group + e % per_group]) - shift;
      },
      (end - begin) * per_group, shared);
  if (threadIdx.x == 0) partial[(int64_t(n) * slices + slice) * groups + g] = sums;
}

// A block per sample, a thread per group: the slices' sums in slice order, in double; then the mean and
// the squared deviations from it. stats [N][groups] (mean, M2).
template <class T>
__global__ void __launch_bounds__(kThreads) finalize_kernel(const T* __restrict__ x, StridedPixels at, int64_t pixels,
                                                            int channels, int groups, int slices,
                                                            const float2* __restrict__ partial,
                                                            float2* __restrict__ stats) {
  const int n = int(blockIdx.x), per_group = channels / groups;
  for (int g = int(threadIdx.x); g < groups; g += kThreads) {
    double sum = 0, squares = 0;
    for (int s = 0; s < slices; ++s) {
      const float2 v = partial[(int64_t(n) * slices + s) * groups + g];
      sum += v.x;
      squares += v.y;
    }
    const double count = double(pixels) * per_group, shifted_mean = sum / count;
    const double shift = to_float(x[at.offset(n, 0) + int64_t(g) * per_group]);
    stats[int64_t(n) * groups + g] =
        make_float2(float(shift + shifted_mean), float(fmax(squares - sum * shifted_mean, 0.0)));
  }
}

template <class T>
void group_statistics_typed(const Tensor& x, int groups, const Tensor& stats) {
  const int64_t samples = x.dim(0), channels = x.dim(3), pixels = x.dim(1) * x.dim(2);
  HD_CHECK_KIND(pixels < (int64_t(1) << 31) && samples <= 65535, ErrorKind::kUnsupported, "group_statistics: ",
                x.describe(), " is larger than its kernels index");
  const StridedPixels at{x.strides[0], x.strides[1], x.strides[2], int(x.dim(2))};
  const bool vector = sizeof(T) == 2 && channels % 8 == 0 && channels / 8 <= kThreads && is_aligned(x.data, 16) &&
                      at.sample_stride % 8 == 0 && at.row_stride % 8 == 0 && at.column_stride % 8 == 0;
  // As group_norm: about four blocks per multiprocessor, at least 8 pixels a slice.
  const int64_t blocks_per_slice = vector ? samples : samples * groups;
  const int64_t wanted = (multiprocessor_count(x.device.index) * 4 + blocks_per_slice - 1) / blocks_per_slice;
  const int slices = int(std::clamp<int64_t>(std::min(wanted, (pixels + 7) / 8), 1, pixels));
  auto* partial = static_cast<float2*>(scratch(x.device, size_t(samples * slices * groups) * sizeof(float2)));
  const T* xp = static_cast<const T*>(x.data);
  if (vector) {
    partial_sums_vector_kernel<T><<<dim3(unsigned(slices), unsigned(samples)), kThreads,
                                    2 * channels * sizeof(float), current_stream()>>>(xp, at, pixels, int(channels),
                                                                                     groups, slices, partial);
  } else {
    HD_CHECK_KIND(groups <= 65535, ErrorKind::kUnsupported, "group_statistics: ", groups, " groups (at most 65535)");
    partial_sums_scalar_kernel<T><<<dim3(unsigned(slices), unsigned(groups), unsigned(samples)), kThreads, 0,
                                    current_stream()>>>(xp, at, pixels, int(channels), groups, slices, partial);
  }
  HD_GPU_CHECK_LAUNCH();
  finalize_kernel<T><<<unsigned(samples), kThreads, 0, current_stream()>>>(
      xp, at, pixels, int(channels), groups, slices, partial, static_cast<float2*>(stats.data));
  HD_GPU_CHECK_LAUNCH();
}

// As many parts as a group of ranks can have (parse_device_list's 64).
constexpr int kMaxParts = 64;
struct PartPixels {
  int64_t count[kMaxParts];
};

// A thread per (sample, group): Chan's pairwise merge of the parts in part order, in double, as the CPU's
// group_norm_combine; then the scale and shift of each of the group's channels.
template <class T>
__global__ void __launch_bounds__(kThreads) combine_kernel(const float2* __restrict__ parts, PartPixels pixels,
                                                           int count, int samples, int groups, int per_group,
                                                           const T* __restrict__ gamma, const T* __restrict__ beta,
                                                           float eps, float2* __restrict__ affine) {
  const int task = int(blockIdx.x) * kThreads + int(threadIdx.x);
  if (task >= samples * groups) return;
  const int s = task / groups, group = task % groups, channels = groups * per_group;
  double total = 0, mean = 0, squares = 0;
  for (int p = 0; p < count; ++p) {
    const float2 part = parts[(int64_t(p) * samples + s) * groups + group];
    const double m = double(pixels.count[p] * per_group), delta = double(part.x) - mean, merged = total + m;
    mean += delta * m / merged;
    squares += double(part.y) + delta * delta * total * m / merged;
    total = merged;
  }
  const double rstd = 1.0 / sqrt(fmax(0.0, squares / total) + double(eps));
  for (int ch = group * per_group; ch < (group + 1) * per_group; ++ch) {
    const double scale = double(to_float(gamma[ch])) * rstd;
    affine[int64_t(s) * channels + ch] = make_float2(float(scale), float(double(to_float(beta[ch])) - mean * scale));
  }
}

}  // namespace

void group_statistics(const Tensor& x, int groups, const Tensor& stats) {
  if (x.dim(0) == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_element_type(x.dtype, [&](auto* type) {
    group_statistics_typed<std::remove_pointer_t<decltype(type)>>(x, groups, stats);
  });
}

void group_norm_combine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                        const Tensor& beta, float eps, const Tensor& affine) {
  const int count = int(parts.dim(0)), samples = int(parts.dim(1)), groups = int(parts.dim(2));
  HD_CHECK_KIND(count <= kMaxParts, ErrorKind::kUnsupported, "group_norm_combine: ", count, " parts (at most ",
                kMaxParts, ")");
  if (samples == 0) return;
  PartPixels pixels{};
  for (int p = 0; p < count; ++p) pixels.count[p] = positions[size_t(p)];
  HD_GPU_CHECK(cudaSetDevice(parts.device.index));
  const int tasks = samples * groups, per_group = int(gamma.numel() / groups);
  with_element_type(gamma.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    combine_kernel<T><<<unsigned((tasks + kThreads - 1) / kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const float2*>(parts.data), pixels, count, samples, groups, per_group,
        static_cast<const T*>(gamma.data), static_cast<const T*>(beta.data), eps, static_cast<float2*>(affine.data));
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
