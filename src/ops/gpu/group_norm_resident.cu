// GroupNorm (+SiLU) with each block's slice of the input held in registers. The two-pass kernels of
// norm.cu take 9-31 µs on SD1.5's 8x8-64x64 tensors, where a copy of them takes 1-7 µs: their chain of
// dependent steps (slice sums, the publish-and-count that finds a sample's last block, its sum over slices,
// the apply kernel's launch) is latency, not bytes. Here a block reads its slice once into registers and
// reduces it in the block (the mean, then the squared deviations from it: exact two-pass statistics, no
// shift needed). Two ways:
// - one kernel (kWhole), a block per (sample, channel chunk): statistics, then the output from the same
//   registers. One launch, one read, no scratch, no atomics. It is what small levels want (SD's 8x8 and
//   16x16); a block's arithmetic grows with the slice, and one block per chunk leaves most of the GPU idle
//   where there are few chunks.
// - slices (kStatistics, then kApply): each chunk's pixels split into slices, a block each, so the grid
//   fills the GPU. The first kernel writes each slice's mean and squared deviations per group; the
//   second combines a chunk's slices (Chan's formula, in slice order: the same bits on every run) while its
//   loads of x are in flight, and writes the output.
//
// A chunk is the fewest whole groups whose channels are a multiple of 8 (one 16-byte vector holds 8
// channels of a 16-bit type): 40 channels for every SD1.x level (10, 20 or 40 channels a group).
//
// A channel offset (x + offset[n, c] normalised: a ResNet block's timestep embedding) is added to the
// held values as they arrive, rounded to x's type as a separate addition would store them. (Adding it to
// the sums and taking it off the means instead took more registers, and spilled 4-20 bytes in 8 of the
// 72 kernels on sm_90.)
#include <algorithm>
#include <numeric>
#include <type_traits>

#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/group_norm_resident.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxParts = kMaxThreads / kFragmentLanes;  // 32-lane groups a block
constexpr int kMaxChunkGroups = 4;                       // groups of an odd channel count need 8: refused
static_assert(kMaxThreads % kFragmentLanes == 0 && kMaxParts <= kFragmentLanes,
              "block_sums adds the 32-lane groups' sums in one group of lanes");
// A thread holds up to 8 vectors (32 registers of data); blocks that hold 8 a thread have at most 768
// threads, so that the register file leaves each 80 registers (at 1024 threads, 64 spilled).
constexpr int kMaxVectorsPerThread = 8;
constexpr int max_threads(int vectors_per_thread) {
  return vectors_per_thread <= 4 ? kMaxThreads : 768;
}

struct Chunk {
  int channels, groups;
};
Chunk chunk_of(int64_t channels, int groups) {
  const int per_group = int(channels / groups), chunk = std::lcm(per_group, 8);
  return {chunk, chunk / per_group};
}

// The pixels of each sample: x is [N, ..., C], dense.
int64_t positions_of(const Tensor& x) {
  return x.numel() / (x.dim(0) * x.dim(-1));
}

// The sums over the block of each of v[0..kGroups), added in a fixed order, left in totals (shared) for
// every thread: read there by a run-time group index (AMD's compiler would place a register array indexed
// so in LDS or scratch).
template <int kGroups>
__device__ void block_sums(float (&v)[kGroups], float (*parts)[kGroups], float* totals) {
  const int lane = int(threadIdx.x) % kFragmentLanes, part = int(threadIdx.x) / kFragmentLanes;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) v[g] = group_sum(v[g]);
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) parts[part][g] = v[g];
  }
  __syncthreads();
  if (part == 0) {
    const int count = int(blockDim.x) / kFragmentLanes;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const float total = group_sum(lane < count ? parts[lane][g] : 0.f);
      if (lane == 0) totals[g] = total;
    }
  }
  __syncthreads();
}

// On AMD, v as a value the compiler may not take for an earlier one: what it derives from v (each
// channel's group, and the lane masks comparing them) is computed again where used rather than held
// across the block's barriers, where a 4-group chunk's masks spilled scalar registers on CDNA (gfx90a,
// gfx942). NVIDIA's compiler needs no such hint.
__device__ inline int opaque(int v) {
#if defined(HD_GPU_HIP)
  asm volatile("" : "+v"(v));
#endif
  return v;
}

// Each group's sum of a thread's 8 channel values (group: each channel's chunk-local group).
template <int kGroups>
__device__ inline void per_group_sums(const float (&channel)[8], const int (&group)[8],
                                      float (&out)[kGroups]) {
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    out[k] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) out[k] += group[j] == k ? channel[j] : 0.f;
  }
}

// kWhole: the one-kernel path; kStatistics, then kApply: the sliced path's two kernels.
enum class Pass { kWhole, kStatistics, kApply };

// Where a block's slice sits and what the slices pass between the two kernels.
struct Slices {
  int pixels;       // a slice's pixels (the last may have fewer); all of them for kWhole
  float2* partial;  // [sample][chunk][slice][group]: (mean, squared deviations) of the slice's group
};

// The number of values in slice s of a chunk's group.
__device__ inline float slice_values(int s, int positions, int slice_pixels, int per_group) {
  return float(min(slice_pixels, positions - s * slice_pixels)) * float(per_group);
}

// A block per (chunk, sample, slice). The block's thread count is a multiple of the vectors a pixel's
// chunk holds, so each thread reads the same 8 channels of every pixel it holds (pixel
// threadIdx.x / per_pixel + i * blockDim.x / per_pixel of the slice): its channels' groups, means, scales
// and shifts are worked out once, and the loops over its data index registers by compile-time constants.
template <class T, int kVectors, int kGroups, Pass kPass>
__global__ void __launch_bounds__(max_threads(kVectors))
    group_norm_resident_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                               const T* __restrict__ beta, const T* __restrict__ offset, T* __restrict__ out,
                               int positions, int channels, int per_group, float eps, bool fuse_silu,
                               Slices slices) {
  __shared__ float parts[kMaxParts][kGroups];
  __shared__ float sums[kGroups], totals[kGroups];  // the block's sums, then its squared deviations
  __shared__ float combined[2][kGroups];            // kApply: each group's mean and 1/std over the chunk
  const int per_pixel = kGroups * per_group / 8, chunk0 = int(blockIdx.x) * kGroups * per_group;
  const int first = int(threadIdx.x) % per_pixel * 8;  // the thread's first channel within the chunk
  const int begin = int(blockIdx.z) * slices.pixels, end = min(begin + slices.pixels, positions);
  const int pixel0 = begin + int(threadIdx.x) / per_pixel, pixel_step = int(blockDim.x) / per_pixel;
  const int64_t base = int64_t(blockIdx.y) * positions * channels + chunk0 + first;
  // The chunk-local group of each of the thread's channels (groups of at least 2 channels), worked out
  // where it is used rather than held through the data's loops (holding it spilled registers).
  const auto groups_of_channels = [&](int(&group)[8]) {
    const int from = opaque(first);
    int g = from / per_group, next = (g + 1) * per_group - from;  // where the next group starts
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (j == next) ++g, next += per_group;
      group[j] = g;
    }
  };
  // Every load issued before any is used: the slice's latency is paid once. Each loop below tests each
  // vector on its own rather than leaving at the first past the slice: on AMD, each early exit from an
  // unrolled loop kept a lane mask live in scalar registers, which spilled.
  const auto holds = [&](int i) { return pixel0 + i * pixel_step < end; };
  T held[kVectors][8];
#pragma unroll
  for (int i = 0; i < kVectors; ++i)
    if (holds(i))
      *reinterpret_cast<uint4*>(held[i]) =
          *reinterpret_cast<const uint4*>(x + base + int64_t(pixel0 + i * pixel_step) * channels);
  if (offset != nullptr) {
    const uint4 moved =
        *reinterpret_cast<const uint4*>(offset + int64_t(blockIdx.y) * channels + chunk0 + first);
#pragma unroll
    for (int i = 0; i < kVectors; ++i)
      if (holds(i))
        *reinterpret_cast<uint4*>(held[i]) = add_vectors<T>(*reinterpret_cast<const uint4*>(held[i]), moved);
  }
  int group[8];
  float mean[8], scale[8];  // per channel: the mean, then the shift; 1/std, then times gamma
  const float inv_count = 1.f / (float(end - begin) * float(per_group));
  if constexpr (kPass == Pass::kApply) {
    // The chunk's statistics from its slices' (Chan's pairwise merge in slice order), while the loads
    // above fly. In f32: in double, the merge's registers spilled the held data's.
    const int slice_total = int(gridDim.z);
    if (int(threadIdx.x) < kGroups) {
      const float2* part = slices.partial +
                           ((int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * slice_total) * kGroups +
                           threadIdx.x;
      float total = 0.f, m = 0.f, squares = 0.f;
      for (int s = 0; s < slice_total; ++s) {
        const float2 p = part[int64_t(s) * kGroups];
        const float n = slice_values(s, positions, slices.pixels, per_group), merged = total + n;
        const float delta = p.x - m, share = n / merged;
        m += delta * share;
        squares += p.y + delta * delta * total * share;
        total = merged;
      }
      combined[0][threadIdx.x] = m;
      combined[1][threadIdx.x] = rsqrtf(squares / total + eps);
    }
    __syncthreads();
    groups_of_channels(group);
#pragma unroll
    for (int j = 0; j < 8; ++j) mean[j] = combined[0][group[j]], scale[j] = combined[1][group[j]];
  } else {
    float channel_sums[8] = {}, group_sums[kGroups];
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      if (!holds(i)) continue;
#pragma unroll
      for (int j = 0; j < 8; ++j) channel_sums[j] += to_float(held[i][j]);
    }
    groups_of_channels(group);
    per_group_sums(channel_sums, group, group_sums);
    block_sums(group_sums, parts, sums);
    groups_of_channels(group);
#pragma unroll
    for (int j = 0; j < 8; ++j) mean[j] = sums[group[j]] * inv_count, channel_sums[j] = 0.f;
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      if (!holds(i)) continue;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float d = to_float(held[i][j]) - mean[j];
        channel_sums[j] += d * d;
      }
    }
    groups_of_channels(group);
    per_group_sums(channel_sums, group, group_sums);
    block_sums(group_sums, parts, totals);
    if constexpr (kPass == Pass::kStatistics) {
      // The slice's mean (of x + offset) and squared deviations of each group, for the apply kernel to
      // combine.
      if (int(threadIdx.x) < kGroups) {
        float2* part = slices.partial +
                       ((int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * gridDim.z + blockIdx.z) * kGroups +
                       threadIdx.x;
        *part = make_float2(sums[threadIdx.x] * inv_count, totals[threadIdx.x]);
      }
      return;
    }
    groups_of_channels(group);
#pragma unroll
    for (int j = 0; j < 8; ++j) scale[j] = rsqrtf(totals[group[j]] * inv_count + eps);
  }
  {
    T g8[8], b8[8];
    *reinterpret_cast<uint4*>(g8) = *reinterpret_cast<const uint4*>(gamma + chunk0 + first);
    *reinterpret_cast<uint4*>(b8) = *reinterpret_cast<const uint4*>(beta + chunk0 + first);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      scale[j] *= to_float(g8[j]);
      mean[j] = to_float(b8[j]) - mean[j] * scale[j];  // now the shift
    }
  }
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    if (!holds(i)) continue;
    T res[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float y = fmaf(to_float(held[i][j]), scale[j], mean[j]);
      res[j] = from_float<T>(fuse_silu ? fast_silu(y) : y);
    }
    *reinterpret_cast<uint4*>(out + base + int64_t(pixel0 + i * pixel_step) * channels) =
        *reinterpret_cast<const uint4*>(res);
  }
}

// The launch: a thread count that is a multiple of both the 32-lane group and a pixel's vectors, with
// the fewest vectors a thread that let the block hold the slice (so the block has as many threads as
// it can); per_thread 0 where none does.
struct Launch {
  int per_thread = 0, threads = 0;
};
Launch launch_of(int64_t positions, Chunk chunk) {
  const int per_pixel = chunk.channels / 8, unit = std::lcm(kFragmentLanes, per_pixel);
  for (int per_thread = 1; per_thread <= kMaxVectorsPerThread; per_thread *= 2) {
    const int64_t pixels_per_pass = (positions + per_thread - 1) / per_thread;
    const int64_t threads = (pixels_per_pass * per_pixel + unit - 1) / unit * unit;
    if (threads <= max_threads(per_thread)) return {per_thread, int(threads)};
  }
  return {};
}

template <class T, int kVectors, Pass kPass>
void launch_with_vectors(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor* offset,
                         int groups, float eps, bool fuse_silu, const Tensor& out, Chunk chunk, int threads,
                         Slices slices, int slice_count) {
  const int64_t samples = x.dim(0), channels = x.dim(-1), positions = positions_of(x);
  const dim3 grid(unsigned(channels / chunk.channels), unsigned(samples), unsigned(slice_count));
  const auto launch = [&](auto kernel) {
    kernel<<<grid, unsigned(threads), 0, current_stream()>>>(
        static_cast<const T*>(x.data), static_cast<const T*>(gamma.data), static_cast<const T*>(beta.data),
        offset != nullptr ? static_cast<const T*>(offset->data) : nullptr, static_cast<T*>(out.data),
        int(positions), int(channels), int(channels / groups), eps, fuse_silu, slices);
  };
  switch (chunk.groups) {
    case 1:
      launch(group_norm_resident_kernel<T, kVectors, 1, kPass>);
      break;
    case 2:
      launch(group_norm_resident_kernel<T, kVectors, 2, kPass>);
      break;
    default:
      static_assert(kMaxChunkGroups == 4, "a chunk of 1, 2 or 4 groups: one instance each");
      launch(group_norm_resident_kernel<T, kVectors, 4, kPass>);
      break;
  }
  HD_GPU_CHECK_LAUNCH();
}

template <Pass kPass>
void launch_pass(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor* offset, int groups,
                 float eps, bool fuse_silu, const Tensor& out, Chunk chunk, Launch l, Slices slices,
                 int slice_count) {
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    if constexpr (sizeof(T) == 2) {
      const auto run = [&](auto vectors) {
        launch_with_vectors<T, decltype(vectors)::value, kPass>(
            x, gamma, beta, offset, groups, eps, fuse_silu, out, chunk, l.threads, slices, slice_count);
      };
      switch (l.per_thread) {
        case 1:
          run(std::integral_constant<int, 1>{});
          break;
        case 2:
          run(std::integral_constant<int, 2>{});
          break;
        case 4:
          run(std::integral_constant<int, 4>{});
          break;
        default:
          run(std::integral_constant<int, 8>{});
          break;
      }
    }
  });
}

// Where the 16-byte, register-held kernels take x at all: 16-bit types, 16-byte aligned tensors, C a
// multiple of 8 with groups of at least 2 channels and at most 4 groups to a chunk.
bool fits_chunks(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, const Tensor& out) {
  if (x.dtype != DType::kF16 && x.dtype != DType::kBF16) return false;
  const int64_t channels = x.dim(-1), samples = x.dim(0);
  if (samples == 0 || samples > 65535 || groups < 1 || channels % 8 != 0 || channels % groups != 0 ||
      channels / groups < 2)
    return false;
  for (const Tensor* t : {&x, &gamma, &beta, &out})
    if (!is_aligned(t->data, 16)) return false;
  return chunk_of(channels, groups).groups <= kMaxChunkGroups;
}

// A channel offset, where there is one, is read 8 channels at a time: 16-byte aligned.
bool offset_fits(const Tensor* channel_offset) {
  return channel_offset == nullptr || is_aligned(channel_offset->data, 16);
}

// The most pixels of a chunk one block holds (launch_of's largest case).
int64_t max_block_pixels(Chunk chunk) {
  const int per_pixel = chunk.channels / 8, unit = std::lcm(kFragmentLanes, per_pixel);
  int64_t most = 0;
  for (int per_thread = 1; per_thread <= kMaxVectorsPerThread; per_thread *= 2)
    most = std::max<int64_t>(most, int64_t(max_threads(per_thread) / unit * unit / per_pixel) * per_thread);
  return most;
}

// The slices of the sliced path: enough to give every multiprocessor a block, and each small enough for
// one block to hold. Returns the pixels a slice; 0 where the grid's limit of 65535 slices is too few.
int slice_pixels_of(const Tensor& x, int groups) {
  const int64_t samples = x.dim(0), channels = x.dim(-1), positions = positions_of(x);
  const Chunk chunk = chunk_of(channels, groups);
  const int64_t most = max_block_pixels(chunk);
  if (most == 0) return 0;
  const int64_t filling = multiprocessor_count(x.device.index) / (samples * (channels / chunk.channels));
  const int64_t slices = std::max({int64_t(1), filling, (positions + most - 1) / most});
  const int64_t pixels = (positions + slices - 1) / slices;
  return slices <= 65535 && launch_of(pixels, chunk).per_thread > 0 ? int(pixels) : 0;
}

// The one-kernel path's arithmetic grows with a block's slice; past this many values a block (SD's 16x16
// level at 2560 channels, 80-channel chunks), the sliced path spreads it over more multiprocessors.
constexpr int64_t kMaxWholeValues = 20480;
// The sliced path reads x twice; towards what an L2 cache holds the second read comes from memory, and
// the two-pass kernels were faster (H200, since their apply pass holds its map in registers: 15 MiB,
// [2, 64, 64, 960], 0.021 against 0.029 ms; [1, 128, 128, 512] 0.022 against 0.027; at 10 MiB,
// [2, 64, 64, 640], slices still won, 0.014 against 0.015).
constexpr size_t kMaxSlicedBytes = size_t(12) << 20;

}  // namespace

bool group_norm_fits_resident(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                              const Tensor& out) {
  if (!fits_chunks(x, gamma, beta, groups, out)) return false;
  const int64_t channels = x.dim(-1);
  return launch_of(positions_of(x), chunk_of(channels, groups)).per_thread > 0;
}

bool group_norm_fits_slices(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                            const Tensor& out) {
  return fits_chunks(x, gamma, beta, groups, out) && slice_pixels_of(x, groups) > 0;
}

GroupNormPath group_norm_path_for(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                                  const Tensor& out) {
  if (!fits_chunks(x, gamma, beta, groups, out)) return GroupNormPath::kTwoPass;
  const int64_t channels = x.dim(-1), positions = positions_of(x);
  const Chunk chunk = chunk_of(channels, groups);
  if (launch_of(positions, chunk).per_thread > 0 && positions * chunk.channels <= kMaxWholeValues)
    return GroupNormPath::kResident;
  return x.nbytes() <= kMaxSlicedBytes && slice_pixels_of(x, groups) > 0 ? GroupNormPath::kSlices
                                                                         : GroupNormPath::kTwoPass;
}

void group_norm_resident(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                         bool fuse_silu, const Tensor& out, const Tensor* channel_offset) {
  HD_CHECK_KIND(group_norm_fits_resident(x, gamma, beta, groups, out), ErrorKind::kUnsupported,
                "group_norm: ", x.describe(), " in ", groups, " groups does not fit the one-kernel path");
  HD_CHECK_KIND(offset_fits(channel_offset), ErrorKind::kUnsupported,
                "group_norm: the one-kernel path reads the channel offset 16 bytes at a time; it is not "
                "16-byte aligned");
  const int64_t channels = x.dim(-1), positions = positions_of(x);
  const Chunk chunk = chunk_of(channels, groups);
  launch_pass<Pass::kWhole>(x, gamma, beta, channel_offset, groups, eps, fuse_silu, out, chunk,
                            launch_of(positions, chunk), Slices{int(positions), nullptr}, 1);
}

void group_norm_slices(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                       bool fuse_silu, const Tensor& out, const Tensor* channel_offset) {
  HD_CHECK_KIND(offset_fits(channel_offset), ErrorKind::kUnsupported,
                "group_norm: the sliced path reads the channel offset 16 bytes at a time; it is not 16-byte "
                "aligned");
  // group_norm_fits_slices, with the slice size it works out kept.
  const int pixels = fits_chunks(x, gamma, beta, groups, out) ? slice_pixels_of(x, groups) : 0;
  HD_CHECK_KIND(pixels > 0, ErrorKind::kUnsupported, "group_norm: ", x.describe(), " in ", groups,
                " groups does not fit the sliced path");
  const int64_t samples = x.dim(0), channels = x.dim(-1), positions = positions_of(x);
  const Chunk chunk = chunk_of(channels, groups);
  const int count = int((positions + pixels - 1) / pixels);  // no slice is empty
  const size_t partials = size_t(samples) * (channels / chunk.channels) * count * chunk.groups;
  const Slices slices{pixels, static_cast<float2*>(scratch(x.device, partials * sizeof(float2)))};
  const Launch l = launch_of(pixels, chunk);
  launch_pass<Pass::kStatistics>(x, gamma, beta, channel_offset, groups, eps, fuse_silu, out, chunk, l,
                                 slices, count);
  launch_pass<Pass::kApply>(x, gamma, beta, channel_offset, groups, eps, fuse_silu, out, chunk, l, slices,
                            count);
}

}  // namespace hd::gpu
