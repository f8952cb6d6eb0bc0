// GroupNorm (optionally followed by SiLU) and LayerNorm over channels-last tensors, f32 statistics.
//
// GroupNorm takes two passes over x, so that the whole GPU works on it even when there are few
// (sample, group) pairs (SD: 2 x 32). The first reads slices of the positions and writes each slice's
// per-group partial sums; the last block of a sample to finish (counted with an atomic) adds the slices'
// sums in a fixed order, so that every run gives the same bits, and turns each group's mean and 1/std,
// with gamma and beta, into one affine map per channel, y = x * scale + shift. The second pass applies it
// (and SiLU) with 16-byte accesses. The partial sums are of x minus the group's first value, so a large
// mean does not cancel the variance away. A channel offset (a ResNet block's timestep embedding) costs
// nothing in either pass: it moves each channel's shift in the first, and its affine map in the second.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <type_traits>

#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/group_norm_resident.h"
#include "ops/gpu/group_sums.cuh"
#include "ops/gpu/numeric.cuh"
#include "ops/gpu/streaming_access.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = kGroupSumThreads;
// Tensors up to this size are taken to stay cached between the two passes (and for the kernel after
// them): within the L2 of the NVIDIA GPUs this build targets (40-60 MB) and the Infinity Cache of AMD's
// (64-256 MB; their L2 is 4-6 MB).
constexpr size_t kL2ResidentBytes = size_t(16) << 20;

// Reads memory another block wrote in this kernel: past the (non-coherent) L1 cache on both vendors.
__device__ inline float2 load_from_other_blocks(const float2* p) {
  const volatile float* v = reinterpret_cast<const volatile float*>(p);
  return make_float2(v[0], v[1]);
}

// One block turns sample n's partial sums [groups][slices] into the affine map of each channel:
// scale = gamma / std, shift = beta - mean * scale. Eight lanes share a group's slices (each adds every
// eighth slice, kAhead loads in flight), then the lanes' sums are added in lane order: in double, and in
// the same order on every run. `statistics`: 2 * groups floats of shared memory.
// offset: nullptr, or [N, C] added to x before the statistics (sums of x + offset minus the same shift).
template <class T>
__device__ void finalize_sample(int n, const T* __restrict__ x, const T* __restrict__ gamma,
                                const T* __restrict__ beta, const T* __restrict__ offset, int64_t positions,
                                int channels, int groups, int splits, float eps, const float2* partial,
                                float2* __restrict__ affine, float* statistics) {
  constexpr int kLanes = 8, kGroupsAtOnce = kThreads / kLanes;
  // The whole kernel waits for this block, whose lanes read up to 66 sums each ([1, 1024, 1024, 128]: 528
  // slices, 32 groups): 16 in flight rather than 4 took that statistics pass from 85.3 to 82.9 µs and
  // [2, 128, 128, 320]'s from 19.8 to 18.5 (H200); 32 gained little more. AMD keeps 4: with 16, clang 22
  // spilled 6 registers in the statistics kernel on gfx942, and no AMD GPU was there to say what pays.
#if defined(HD_GPU_HIP)
  constexpr int kAhead = 4;
#else
  constexpr int kAhead = 16;
#endif
  __shared__ double lane_sums[2][kThreads];
  const int per_group = channels / groups, lane = int(threadIdx.x) % kLanes;
  for (int g0 = 0; g0 < groups; g0 += kGroupsAtOnce) {
    const int g = g0 + int(threadIdx.x) / kLanes;
    double sum = 0, squares = 0;
    if (g < groups) {
      const float2* sums = partial + (int64_t(n) * groups + g) * splits;
      int s = lane;
      for (; s + (kAhead - 1) * kLanes < splits; s += kAhead * kLanes) {
        float2 v[kAhead];
        for (int j = 0; j < kAhead; ++j) v[j] = load_from_other_blocks(sums + s + j * kLanes);
        for (int j = 0; j < kAhead; ++j) sum += v[j].x, squares += v[j].y;
      }
      for (; s < splits; s += kLanes) {
        const float2 v = load_from_other_blocks(sums + s);
        sum += v.x;
        squares += v.y;
      }
    }
    lane_sums[0][threadIdx.x] = sum;
    lane_sums[1][threadIdx.x] = squares;
    __syncthreads();
    if (g < groups && lane == 0) {
      for (int l = 1; l < kLanes; ++l) sum += lane_sums[0][threadIdx.x + l], squares += lane_sums[1][threadIdx.x + l];
      const double count = double(positions) * per_group;
      const double shifted_mean = sum / count;
      const double var = fmax(squares / count - shifted_mean * shifted_mean, 0.0);
      const int first = g * per_group;
      float shift = to_float(x[int64_t(n) * positions * channels + first]);
      if (offset != nullptr) shift += to_float(offset[int64_t(n) * channels + first]);
      statistics[2 * g] = float(shift + shifted_mean);
      statistics[2 * g + 1] = float(1.0 / sqrt(var + double(eps)));
    }
    __syncthreads();
  }
  for (int c = int(threadIdx.x); c < channels; c += kThreads) {
    const float mean = statistics[2 * (c / per_group)], rstd = statistics[2 * (c / per_group) + 1];
    const float scale = rstd * to_float(gamma[c]);
    // (x + offset - mean) * scale + beta, as x * scale + shift.
    const float moved = offset != nullptr ? to_float(offset[int64_t(n) * channels + c]) - mean : -mean;
    affine[int64_t(n) * channels + c] = make_float2(scale, fmaf(moved, scale, to_float(beta[c])));
  }
}

// Partial sums for any dtype and channel count: a block per (slice, group, sample).
template <class T>
__global__ void __launch_bounds__(kThreads)
    group_partial_sums_kernel(const T* __restrict__ x, const T* __restrict__ offset, int64_t positions,
                              int channels, int groups, int splits, float2* __restrict__ partial) {
  __shared__ float shared[kThreads / kFragmentLanes];
  const int split = int(blockIdx.x), g = int(blockIdx.y), n = int(blockIdx.z);
  const int per_group = channels / groups;
  const int64_t begin = positions * split / splits, end = positions * (split + 1) / splits;
  const T* base = x + int64_t(n) * positions * channels + int64_t(g) * per_group;
  const T* moved = offset != nullptr ? offset + int64_t(n) * channels + int64_t(g) * per_group : nullptr;
  const float shift = to_float(base[0]) + (moved != nullptr ? to_float(moved[0]) : 0.f);
  const float2 sums = block_group_sums(
      [&](int64_t e) {
        const float v = to_float(base[(begin + e / per_group) * channels + e % per_group]);
        return (moved != nullptr ? v + to_float(moved[e % per_group]) : v) - shift;
      },
      (end - begin) * per_group, shared);
  if (threadIdx.x == 0) partial[(int64_t(n) * groups + g) * splits + split] = sums;
}

// ...and their combination, a block per sample (after the kernel above).
template <class T>
__global__ void __launch_bounds__(kThreads)
    group_finalize_kernel(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                          const T* __restrict__ offset, int64_t positions, int channels, int groups,
                          int splits, float eps, const float2* partial, float2* __restrict__ affine) {
  extern __shared__ float statistics[];
  finalize_sample(int(blockIdx.x), x, gamma, beta, offset, positions, channels, groups, splits, eps, partial,
                  affine, statistics);
}

// The partial sums with 16-byte loads (C % 8 == 0, C <= 2048, 16-bit types), a block per (slice, sample):
// each thread walks one 8-channel column down its block's positions; the threads' sums are then added
// per channel in a fixed order (not with atomics), and per group. The sample's last block to finish
// then finalizes the sample (`arrived` counts a sample's finished blocks and is left at zero).
template <class T>
__global__ void __launch_bounds__(kThreads)
    group_statistics_kernel(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                            const T* __restrict__ offset, int64_t positions, int channels, int groups,
                            int splits, float eps, float2* partial, float2* __restrict__ affine,
                            unsigned* arrived) {
  extern __shared__ float channel_sums[];  // [2][channels]: sums, then sums of squares
  __shared__ bool last;
  const int split = int(blockIdx.x), n = int(blockIdx.y);
  const int64_t begin = positions * split / splits, end = positions * (split + 1) / splits;
  const T* sample = x + int64_t(n) * positions * channels;
  block_group_sums_vector<T>(
      [&](int64_t p) { return sample + p * channels; }, begin, end, channels, groups,
      offset != nullptr ? offset + int64_t(n) * channels : nullptr, channel_sums,
      [&](int g, float2 sums) { partial[(int64_t(n) * groups + g) * splits + split] = sums; });
  // The classic last-block pattern: publish this block's sums, then count it; the block that brings the
  // count to `splits` sees every other block's sums.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(arrived + n, 1u) == unsigned(splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  finalize_sample(n, x, gamma, beta, offset, positions, channels, groups, splits, eps, partial, affine,
                  channel_sums);
  if (threadIdx.x == 0) arrived[n] = 0;  // ready for the next call (and the next replay of a graph)
}

__device__ inline float silu(float v) { return v / (1.f + __expf(-v)); }

// y = x * scale[c] + shift[c] (then SiLU), eight channels per thread with 16-byte accesses; a grid row
// per sample. The grid's stride is a whole number of pixels, so every thread stays on one 8-channel
// column and holds its scales and shifts in registers. (Read again for every vector, from the L1 cache,
// they were four times x's traffic there: the cache was 92% busy and DRAM 41%, Nsight Compute on an
// H200.) Four vectors are loaded before any is computed, so that enough reads are in flight.
// kStreaming: x and y bypass the caches' keeping (x is larger than the L2 cache).
template <class T, bool kStreaming>
__global__ void __launch_bounds__(kThreads)
    group_apply_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t vectors, int channels,
                       const float2* __restrict__ affine, bool fuse_silu) {
  constexpr int kAhead = 4;
  const int n = int(blockIdx.y);
  const uint4* in = reinterpret_cast<const uint4*>(x) + int64_t(n) * vectors;
  uint4* to = reinterpret_cast<uint4*>(out) + int64_t(n) * vectors;
  const int64_t first = int64_t(blockIdx.x) * kThreads + threadIdx.x, stride = int64_t(gridDim.x) * kThreads;
  const int c0 = int(first % (channels / 8)) * 8;
  float4 map[4];  // (scale, shift) of channels c0 .. c0 + 7
  for (int j = 0; j < 4; ++j)
    map[j] = reinterpret_cast<const float4*>(affine + int64_t(n) * channels + c0)[j];
  const auto apply = [&](const uint4& vector) HD_INLINE {
    const T* in_values = reinterpret_cast<const T*>(&vector);
    T res[8];
    for (int j = 0; j < 8; ++j) {
      const float scale = j % 2 == 0 ? map[j / 2].x : map[j / 2].z, shift = j % 2 == 0 ? map[j / 2].y : map[j / 2].w;
      const float y = fmaf(to_float(in_values[j]), scale, shift);
      res[j] = from_float<T>(fuse_silu ? fast_silu(y) : y);
    }
    return *reinterpret_cast<const uint4*>(res);
  };
  const auto load = [&](int64_t i) HD_INLINE { return kStreaming ? load_streaming(in + i) : in[i]; };
  const auto store = [&](int64_t i, const uint4& v) HD_INLINE {
    if (kStreaming) {
      store_streaming(to + i, v);
    } else {
      to[i] = v;
    }
  };
  int64_t i = first;
  for (; i + (kAhead - 1) * stride < vectors; i += kAhead * stride) {
    uint4 held[kAhead];
    for (int u = 0; u < kAhead; ++u) held[u] = load(i + u * stride);
    for (int u = 0; u < kAhead; ++u) store(i + u * stride, apply(held[u]));
  }
  for (; i < vectors; i += stride) store(i, apply(load(i)));
}

template <class T>
__global__ void __launch_bounds__(kThreads) group_apply_scalar_kernel(const T* __restrict__ x, T* __restrict__ out,
                                                                      int64_t positions, int channels,
                                                                      const float2* __restrict__ affine,
                                                                      bool fuse_silu, int64_t total) {
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / (positions * channels);
    const int c = int(i % channels);
    const float2 map = affine[n * channels + c];
    const float y = fmaf(to_float(x[i]), map.x, map.y);
    out[i] = from_float<T>(fuse_silu ? silu(y) : y);
  }
}

// Per device: one counter per sample for group_statistics_kernel, zeroed once; every launch leaves the
// counters it used at zero, so a captured graph can replay the kernel any number of times.
constexpr int kMaxCountedSamples = 1024;
constexpr int kMaxDevices = 64;
unsigned* arrival_counters(const Device& device) {
  // A plain array, not a map: Debian's hipcc (clang 15) crashes instantiating std::map<int, Buffer>.
  static std::mutex mutex;
  static Buffer counters[kMaxDevices];
  HD_CHECK_KIND(device.index >= 0 && device.index < kMaxDevices, ErrorKind::kUnsupported, "group_norm: device ",
                device.to_string(), " is past the ", kMaxDevices, " this build counts");
  const std::lock_guard lock(mutex);
  Buffer& b = counters[device.index];
  if (b.data() == nullptr) {
    b = Buffer(device, kMaxCountedSamples * sizeof(unsigned));
    HD_GPU_CHECK(cudaMemset(b.data(), 0, kMaxCountedSamples * sizeof(unsigned)));
  }
  return static_cast<unsigned*>(b.data());
}

// The second pass: y = x * scale + shift (then SiLU) from the affine map of each (sample, channel), which
// group_norm's statistics make or, for a tile of a larger image, the whole image's (group_norm_apply).
template <class T>
void group_norm_apply_typed(const Tensor& x, const float2* affine, bool fuse_silu, const Tensor& out) {
  const int64_t samples = x.dim(0), channels = x.dim(-1), total = x.numel();
  const int64_t per_sample = total / samples;
  const T* xp = static_cast<const T*>(x.data);
  auto* o = static_cast<T*>(out.data);
  // The vector kernel's grid is a multiple of `unit` blocks, the fewest whose threads span a whole number
  // of pixels, so that each thread's channels stay the same as it strides.
  const int64_t columns = channels / 8,
                unit = columns > 0 ? columns / std::gcd(columns, int64_t(kThreads)) : 0;
  if (channels % 8 == 0 && unit <= 65535 && is_aligned(x.data, 16) && is_aligned(out.data, 16) &&
      is_aligned(affine, 16) && sizeof(T) == 2 && samples <= 65535) {
    const int64_t vectors = per_sample / 8;
    const int64_t blocks =  // for about four vectors a thread
        std::min((vectors + 4 * kThreads - 1) / (4 * kThreads) + unit - 1, 65535 / unit * unit) / unit * unit;
    const auto kernel =
        x.nbytes() > kL2ResidentBytes ? group_apply_kernel<T, true> : group_apply_kernel<T, false>;
    kernel<<<dim3(unsigned(blocks), unsigned(samples)), kThreads, 0, current_stream()>>>(
        xp, o, vectors, int(channels), affine, fuse_silu);
  } else {
    group_apply_scalar_kernel<T><<<grid_stride_blocks(total, kThreads), kThreads, 0, current_stream()>>>(
        xp, o, per_sample / channels, int(channels), affine, fuse_silu, total);
  }
  HD_GPU_CHECK_LAUNCH();
}

template <class T>
void group_norm_typed(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                      bool fuse_silu, const Tensor& out, const Tensor* channel_offset) {
  const int64_t samples = x.dim(0), channels = x.dim(-1), total = x.numel();
  const int64_t positions = total / (samples * channels);
  const bool vector = channels % 8 == 0 && channels / 8 <= kThreads && is_aligned(x.data, 16) &&
                      is_aligned(out.data, 16) && sizeof(T) == 2;
  // Blocks of partial sums (the vector kernel has a block per (slice, sample), the scalar one per
  // (slice, group, sample)): one per multiprocessor in all while x fits in the L2 cache, where more
  // would only lengthen the finalizing block's sum over slices; four per multiprocessor beyond, so
  // that enough loads are in flight to keep memory busy. At least kMinSlice positions a slice: shorter
  // ones spend more on setting up than on reading.
  const int64_t blocks_per_slice = vector ? samples : samples * groups;
  const int64_t blocks_wanted =
      multiprocessor_count(x.device.index) * (x.nbytes() <= kL2ResidentBytes ? 1 : 4);
  const int64_t wanted = (blocks_wanted + blocks_per_slice - 1) / blocks_per_slice;
  constexpr int64_t kMinSlice = 8;
  const int slices = int(std::clamp<int64_t>(std::min(wanted, (positions + kMinSlice - 1) / kMinSlice), 1,
                                             std::max<int64_t>(positions, 1)));
  // The affine maps start 16-byte aligned (the apply kernel reads them four floats at a time).
  const int64_t partial_count = (samples * groups * slices + 1) / 2 * 2;
  auto* partial = static_cast<float2*>(
      scratch(x.device, (size_t(partial_count) + size_t(samples) * channels) * sizeof(float2)));
  float2* affine = partial + partial_count;
  const T* xp = static_cast<const T*>(x.data);
  const auto* g = static_cast<const T*>(gamma.data);
  const auto* b = static_cast<const T*>(beta.data);
  const T* offset = channel_offset != nullptr ? static_cast<const T*>(channel_offset->data) : nullptr;
  if (vector) {
    // The apply kernel has a grid row per sample.
    HD_CHECK_KIND(samples <= 65535, ErrorKind::kUnsupported, "group_norm: ", samples, " samples (at most 65535)");
    unsigned* arrived = arrival_counters(x.device);
    const size_t channel_sums = 2 * channels * sizeof(float);  // also holds the statistics of 2 * groups
    for (int64_t first = 0; first < samples; first += kMaxCountedSamples) {  // a counter per sample
      const int64_t count = std::min<int64_t>(samples - first, kMaxCountedSamples);
      const int64_t start = first * positions * channels;
      group_statistics_kernel<T>
          <<<dim3(unsigned(slices), unsigned(count)), kThreads, channel_sums, current_stream()>>>(
              xp + start, g, b, offset != nullptr ? offset + first * channels : nullptr, positions,
              int(channels), groups, slices, eps, partial, affine + first * channels, arrived);
      HD_GPU_CHECK_LAUNCH();
    }
  } else {
    group_partial_sums_kernel<T>
        <<<dim3(unsigned(slices), unsigned(groups), unsigned(samples)), kThreads, 0, current_stream()>>>(
            xp, offset, positions, int(channels), groups, slices, partial);
    HD_GPU_CHECK_LAUNCH();
    group_finalize_kernel<T><<<unsigned(samples), kThreads, 2 * groups * sizeof(float), current_stream()>>>(
        xp, g, b, offset, positions, int(channels), groups, slices, eps, partial, affine);
  }
  HD_GPU_CHECK_LAUNCH();
  group_norm_apply_typed<T>(x, affine, fuse_silu, out);
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

// The same with 16-byte accesses (16-bit types, C a multiple of 8, at most 32 * kVectors * 8 channels):
// a lane keeps its up to kVectors eight-channel pieces of the row in registers, so the row is read once.
constexpr int kLayerNormVectors = 8;  // up to 2048 channels
template <class T>
__global__ void __launch_bounds__(kThreads) layer_norm_vector_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                                                                     const T* __restrict__ beta, T* __restrict__ out,
                                                                     int64_t rows, int channels, float eps) {
  const int lane = int(threadIdx.x) % kFragmentLanes;
  const int64_t row = int64_t(blockIdx.x) * (kThreads / kFragmentLanes) + threadIdx.x / kFragmentLanes;
  if (row >= rows) return;  // whole 32-lane groups leave together
  const int vectors = channels / 8;
  const T* in = x + row * channels;
  T held[kLayerNormVectors][8];
  float sum = 0.f;
  for (int i = 0; i < kLayerNormVectors; ++i) {
    const int v = lane + i * kFragmentLanes;
    if (v >= vectors) break;
    *reinterpret_cast<uint4*>(held[i]) = *reinterpret_cast<const uint4*>(in + v * 8);
    for (int j = 0; j < 8; ++j) sum += to_float(held[i][j]);
  }
  const float mean = group_sum(sum) / float(channels);
  float squares = 0.f;
  for (int i = 0; i < kLayerNormVectors; ++i) {
    if (lane + i * kFragmentLanes >= vectors) break;
    for (int j = 0; j < 8; ++j) {
      const float d = to_float(held[i][j]) - mean;
      squares += d * d;
    }
  }
  const float rstd = rsqrtf(group_sum(squares) / float(channels) + eps);
  for (int i = 0; i < kLayerNormVectors; ++i) {
    const int v = lane + i * kFragmentLanes;
    if (v >= vectors) break;
    T g[8], b[8], res[8];
    *reinterpret_cast<uint4*>(g) = *reinterpret_cast<const uint4*>(gamma + v * 8);
    *reinterpret_cast<uint4*>(b) = *reinterpret_cast<const uint4*>(beta + v * 8);
    for (int j = 0; j < 8; ++j)
      res[j] = from_float<T>((to_float(held[i][j]) - mean) * rstd * to_float(g[j]) + to_float(b[j]));
    *reinterpret_cast<uint4*>(out + row * channels + v * 8) = *reinterpret_cast<const uint4*>(res);
  }
}

template <class T>
void layer_norm_typed(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out) {
  const int64_t channels = x.dim(-1), rows = x.numel() / std::max<int64_t>(channels, 1);
  if (rows == 0) return;
  constexpr int kRowsPerBlock = kThreads / kFragmentLanes;
  const bool vector = sizeof(T) == 2 && channels % 8 == 0 && channels <= 8 * kFragmentLanes * kLayerNormVectors &&
                      is_aligned(x.data, 16) && is_aligned(gamma.data, 16) && is_aligned(beta.data, 16) &&
                      is_aligned(out.data, 16);
  const auto kernel = vector ? layer_norm_vector_kernel<T> : layer_norm_kernel<T>;
  kernel<<<unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, current_stream()>>>(
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

void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                bool fuse_silu, const Tensor& out, const Tensor* channel_offset, GroupNormPath path) {
  check_same_dtype("group_norm", x, gamma, beta, out);
  HD_CHECK_KIND(channel_offset == nullptr || channel_offset->dtype == x.dtype, ErrorKind::kUnsupported,
                "group_norm: on the GPU, the channel offset shares the input's dtype; got ",
                dtype_name(channel_offset != nullptr ? channel_offset->dtype : x.dtype), " and ",
                dtype_name(x.dtype));
  if (x.numel() == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  if (path == GroupNormPath::kAuto) {
    path = group_norm_path_for(x, gamma, beta, groups, out);
    // The register-held kernels read a thread's 8 offsets as one 16-byte vector; the two passes read
    // them one by one.
    if (channel_offset != nullptr && !is_aligned(channel_offset->data, 16)) path = GroupNormPath::kTwoPass;
  }
  if (path == GroupNormPath::kResident)
    return group_norm_resident(x, gamma, beta, groups, eps, fuse_silu, out, channel_offset);
  if (path == GroupNormPath::kSlices)
    return group_norm_slices(x, gamma, beta, groups, eps, fuse_silu, out, channel_offset);
  with_element_type(x.dtype, [&](auto* type) {
    group_norm_typed<std::remove_pointer_t<decltype(type)>>(x, gamma, beta, groups, eps, fuse_silu, out,
                                                            channel_offset);
  });
}

void group_norm_apply(const Tensor& x, const Tensor& affine, bool fuse_silu, const Tensor& out) {
  HD_CHECK_KIND(out.dtype == x.dtype, ErrorKind::kUnsupported,
                "group_norm_apply: on the GPU, input and output share one dtype; got ", dtype_name(x.dtype), " and ",
                dtype_name(out.dtype));
  if (x.numel() == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_element_type(x.dtype, [&](auto* type) {
    group_norm_apply_typed<std::remove_pointer_t<decltype(type)>>(x, static_cast<const float2*>(affine.data),
                                                                  fuse_silu, out);
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
