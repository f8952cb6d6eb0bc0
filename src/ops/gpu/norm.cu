// GroupNorm (optionally followed by SiLU) and LayerNorm over channels-last tensors, f32 statistics.
//
// GroupNorm runs in three kernels so that the whole GPU works on it even when there are few
// (sample, group) pairs (SD: 2 x 32): partial sums over slices of the positions, their combination per
// group, then one elementwise pass with 16-byte accesses. The partial sums are of x minus the group's
// first value, so a large mean does not cancel the variance away.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = 256;

__device__ float block_sum(float v, float* shared) {  // shared: kThreads / 32 floats; all threads get the sum
  v = group_sum(v);
  const int lane = int(threadIdx.x) % kFragmentLanes, part = int(threadIdx.x) / kFragmentLanes;
  __syncthreads();
  if (lane == 0) shared[part] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < kThreads / kFragmentLanes; ++i) total += shared[i];
  return total;
}

template <class T>
__global__ void __launch_bounds__(kThreads) group_partial_sums_kernel(const T* __restrict__ x, int64_t positions, int channels,
                                                                      int groups, int splits, float2* __restrict__ partial) {
  __shared__ float shared[kThreads / kFragmentLanes];
  const int split = int(blockIdx.x), g = int(blockIdx.y), n = int(blockIdx.z);
  const int per_group = channels / groups;
  const int64_t begin = positions * split / splits, end = positions * (split + 1) / splits;
  const T* base = x + int64_t(n) * positions * channels + int64_t(g) * per_group;
  const float shift = to_float(base[0]);
  float sum = 0.f, squares = 0.f;
  const int64_t count = (end - begin) * per_group;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const float d = to_float(base[(begin + e / per_group) * channels + e % per_group]) - shift;
    sum += d;
    squares += d * d;
  }
  sum = block_sum(sum, shared);
  squares = block_sum(squares, shared);
  if (threadIdx.x == 0) partial[(int64_t(n) * groups + g) * splits + split] = make_float2(sum, squares);
}

// The same partial sums with 16-byte loads (C % 8 == 0, 16-bit types): each thread walks one 8-channel
// column down its block's positions; the threads' sums are then added per channel in a fixed order (not
// with atomics), so that the statistics, and every output after them, are the same bits on every run.
template <class T>
__global__ void __launch_bounds__(kThreads) group_partial_sums_vector_kernel(const T* __restrict__ x, int64_t positions,
                                                                             int channels, int groups, int splits,
                                                                             float2* __restrict__ partial) {
  extern __shared__ float channel_sums[];  // [2][channels]: sums, then sums of squares
  __shared__ float per_thread[kThreads][16];
  const int split = int(blockIdx.x), n = int(blockIdx.y);
  const int per_group = channels / groups, columns = channels / 8;
  const int64_t begin = positions * split / splits, end = positions * (split + 1) / splits;
  const T* sample = x + int64_t(n) * positions * channels;
  const int column = int(threadIdx.x) % columns, rows_per_pass = kThreads / columns;
  const int row0 = int(threadIdx.x) / columns;
  if (row0 < rows_per_pass) {  // threads past the last whole row of columns idle
    float shift[8], sum[8] = {}, squares[8] = {};
    for (int j = 0; j < 8; ++j) shift[j] = to_float(sample[((column * 8 + j) / per_group) * per_group]);
    for (int64_t p = begin + row0; p < end; p += rows_per_pass) {
      T in[8];
      *reinterpret_cast<uint4*>(in) = *reinterpret_cast<const uint4*>(sample + p * channels + column * 8);
      for (int j = 0; j < 8; ++j) {
        const float d = to_float(in[j]) - shift[j];
        sum[j] += d;
        squares[j] += d * d;
      }
    }
    for (int j = 0; j < 8; ++j) {
      per_thread[threadIdx.x][j] = sum[j];
      per_thread[threadIdx.x][8 + j] = squares[j];
    }
  }
  __syncthreads();
  for (int c = int(threadIdx.x); c < channels; c += kThreads) {
    float s = 0.f, q = 0.f;
    for (int r = 0; r < rows_per_pass; ++r) {  // thread r * columns + c / 8 walked channel c in row r
      s += per_thread[r * columns + c / 8][c % 8];
      q += per_thread[r * columns + c / 8][8 + c % 8];
    }
    channel_sums[c] = s;
    channel_sums[channels + c] = q;
  }
  __syncthreads();
  for (int g = int(threadIdx.x); g < groups; g += kThreads) {
    float s = 0.f, q = 0.f;
    for (int c = g * per_group; c < (g + 1) * per_group; ++c) s += channel_sums[c], q += channel_sums[channels + c];
    partial[(int64_t(n) * groups + g) * splits + split] = make_float2(s, q);
  }
}

template <class T>
__global__ void group_finalize_kernel(const T* __restrict__ x, int64_t positions, int channels, int groups, int splits,
                                      float eps, const float2* __restrict__ partial, float2* __restrict__ mean_rstd,
                                      int pairs) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= pairs) return;
  const int n = i / groups, g = i % groups;
  double sum = 0, squares = 0;
  for (int s = 0; s < splits; ++s) {
    sum += partial[int64_t(i) * splits + s].x;
    squares += partial[int64_t(i) * splits + s].y;
  }
  const double count = double(positions) * (channels / groups);
  const double shifted_mean = sum / count;
  const double var = fmax(squares / count - shifted_mean * shifted_mean, 0.0);
  const float shift = to_float(x[int64_t(n) * positions * channels + int64_t(g) * (channels / groups)]);
  mean_rstd[i] = make_float2(float(shift + shifted_mean), float(1.0 / sqrt(var + double(eps))));
}

__device__ inline float silu(float v) { return v / (1.f + __expf(-v)); }

template <class T>
__global__ void __launch_bounds__(kThreads) group_apply_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                                               const T* __restrict__ beta, T* __restrict__ out,
                                                               int64_t positions, int channels, int groups,
                                                               const float2* __restrict__ mean_rstd, bool fuse_silu,
                                                               int64_t total) {
  // Eight channels per thread (16 bytes of f16/bf16; the launcher falls back to one when C % 8 != 0).
  const int per_group = channels / groups;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t v = int64_t(blockIdx.x) * kThreads + threadIdx.x; v * 8 < total; v += stride) {
    const int64_t i0 = v * 8;
    const int64_t n = i0 / (positions * channels);
    const int c0 = int(i0 % channels);
    T in[8], res[8];
    *reinterpret_cast<uint4*>(in) = *reinterpret_cast<const uint4*>(x + i0);
    for (int j = 0; j < 8; ++j) {
      const int c = c0 + j;
      const float2 mr = mean_rstd[n * groups + c / per_group];
      float y = (to_float(in[j]) - mr.x) * mr.y * to_float(gamma[c]) + to_float(beta[c]);
      if (fuse_silu) y = silu(y);
      res[j] = from_float<T>(y);
    }
    *reinterpret_cast<uint4*>(out + i0) = *reinterpret_cast<const uint4*>(res);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) group_apply_scalar_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                                                      const T* __restrict__ beta, T* __restrict__ out,
                                                                      int64_t positions, int channels, int groups,
                                                                      const float2* __restrict__ mean_rstd,
                                                                      bool fuse_silu, int64_t total) {
  const int per_group = channels / groups;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / (positions * channels);
    const int c = int(i % channels);
    const float2 mr = mean_rstd[n * groups + c / per_group];
    float y = (to_float(x[i]) - mr.x) * mr.y * to_float(gamma[c]) + to_float(beta[c]);
    out[i] = from_float<T>(fuse_silu ? silu(y) : y);
  }
}

template <class T>
void group_norm_typed(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps, bool fuse_silu,
                      const Tensor& out) {
  const int64_t samples = x.dim(0), channels = x.dim(-1), total = x.numel();
  const int64_t positions = total / (samples * channels);
  const int pairs = int(samples * groups);
  // Enough blocks of partial sums to fill the GPU several times over: the scalar kernel has a block per
  // (slice, group, sample), the vector one a block per (slice, sample) covering every group.
  const bool vector = channels % 8 == 0 && channels / 8 <= kThreads && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(out.data) % 16 == 0 && sizeof(T) == 2;
  const int64_t wanted = (4 * multiprocessor_count(x.device.index) + (vector ? samples : pairs) - 1) /
                         (vector ? samples : pairs);
  // ...but at least kMinSlice positions a slice: shorter ones spend more on setting up than on reading.
  constexpr int64_t kMinSlice = 32;
  const int slices = int(std::clamp<int64_t>(std::min(wanted, (positions + kMinSlice - 1) / kMinSlice), 1,
                                             std::max<int64_t>(positions, 1)));
  auto* partial = static_cast<float2*>(scratch(x.device, size_t(pairs) * (size_t(slices) + 1) * sizeof(float2)));
  float2* mean_rstd = partial + int64_t(pairs) * slices;
  const T* xp = static_cast<const T*>(x.data);
  if (vector) {
    const size_t channel_sums = 2 * channels * sizeof(float);
    group_partial_sums_vector_kernel<T><<<dim3(unsigned(slices), unsigned(samples)), kThreads, channel_sums,
                                          current_stream()>>>(xp, positions, int(channels), groups, slices, partial);
  } else {
    group_partial_sums_kernel<T><<<dim3(unsigned(slices), unsigned(groups), unsigned(samples)), kThreads, 0,
                                   current_stream()>>>(xp, positions, int(channels), groups, slices, partial);
  }
  HD_GPU_CHECK_LAUNCH();
  group_finalize_kernel<T><<<unsigned((pairs + 127) / 128), 128, 0, current_stream()>>>(
      xp, positions, int(channels), groups, slices, eps, partial, mean_rstd, pairs);
  HD_GPU_CHECK_LAUNCH();
  const auto* g = static_cast<const T*>(gamma.data);
  const auto* b = static_cast<const T*>(beta.data);
  auto* o = static_cast<T*>(out.data);
  const int64_t items = vector ? total / 8 : total;
  const unsigned blocks = unsigned(std::min<int64_t>((items + kThreads - 1) / kThreads, 65535));
  if (vector) {
    group_apply_kernel<T><<<blocks, kThreads, 0, current_stream()>>>(
        xp, g, b, o, positions, int(channels), groups, mean_rstd, fuse_silu, total);
  } else {
    group_apply_scalar_kernel<T><<<blocks, kThreads, 0, current_stream()>>>(
        xp, g, b, o, positions, int(channels), groups, mean_rstd, fuse_silu, total);
  }
  HD_GPU_CHECK_LAUNCH();
}

// One group of 32 lanes per row: the mean, then the variance about it (two reads of a row that sits in
// cache), then the output.
template <class T>
__global__ void __launch_bounds__(kThreads) layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                                              const T* __restrict__ beta, T* __restrict__ out,
                                                              int64_t rows, int channels, float eps) {
  const int lane = int(threadIdx.x) % kFragmentLanes;
  const int64_t row = int64_t(blockIdx.x) * (kThreads / kFragmentLanes) + threadIdx.x / kFragmentLanes;
  if (row >= rows) return;  // whole 32-lane groups leave together, so the shuffles below stay complete
  const T* in = x + row * channels;
  float sum = 0.f;
  for (int c = lane; c < channels; c += kFragmentLanes) sum += to_float(in[c]);
  const float mean = group_sum(sum) / float(channels);
  float squares = 0.f;
  for (int c = lane; c < channels; c += kFragmentLanes) {
    const float d = to_float(in[c]) - mean;
    squares += d * d;
  }
  const float rstd = rsqrtf(group_sum(squares) / float(channels) + eps);
  for (int c = lane; c < channels; c += kFragmentLanes)
    out[row * channels + c] = from_float<T>((to_float(in[c]) - mean) * rstd * to_float(gamma[c]) + to_float(beta[c]));
}

template <class T>
void layer_norm_typed(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out) {
  const int64_t channels = x.dim(-1), rows = x.numel() / std::max<int64_t>(channels, 1);
  if (rows == 0) return;
  constexpr int kRowsPerBlock = kThreads / kFragmentLanes;
  layer_norm_kernel<T><<<unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, current_stream()>>>(
      static_cast<const T*>(x.data), static_cast<const T*>(gamma.data), static_cast<const T*>(beta.data),
      static_cast<T*>(out.data), rows, int(channels), eps);
  HD_GPU_CHECK_LAUNCH();
}

void check_same_dtype(const char* op, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out) {
  HD_CHECK_KIND(gamma.dtype == x.dtype && beta.dtype == x.dtype && out.dtype == x.dtype, ErrorKind::kUnsupported, op,
                ": on the GPU, input, gamma, beta and output share one dtype; got ", dtype_name(x.dtype), ", ",
                dtype_name(gamma.dtype), ", ", dtype_name(beta.dtype), ", ", dtype_name(out.dtype));
}

}  // namespace

void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps, bool fuse_silu,
                const Tensor& out) {
  check_same_dtype("group_norm", x, gamma, beta, out);
  if (x.numel() == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_element_type(x.dtype, [&](auto* type) {
    group_norm_typed<std::remove_pointer_t<decltype(type)>>(x, gamma, beta, groups, eps, fuse_silu, out);
  });
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out) {
  check_same_dtype("layer_norm", x, gamma, beta, out);
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_element_type(x.dtype, [&](auto* type) {
    layer_norm_typed<std::remove_pointer_t<decltype(type)>>(x, gamma, beta, eps, out);
  });
}

}  // namespace hd::gpu
