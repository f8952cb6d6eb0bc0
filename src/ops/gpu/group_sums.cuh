// One block's share of GroupNorm's statistics: the sums of (x - shift) and of its squares per group over
// a range of pixels, added in a fixed order (no float atomics, the same bits on every run). Shared by
// group_norm (norm.cu: a whole tensor) and group_statistics (group_statistics.cu: a strided tile core);
// `pixel(p)` maps a pixel index to the address of its first channel, so each caller brings its layout.
#pragma once

#include "ops/gpu/numeric.cuh"
#include "ops/gpu/target.cuh"

namespace hd::gpu {

constexpr int kGroupSumThreads = 256;  // the block size of every kernel that calls these

// The sum of v over the block, returned to every thread. shared: kGroupSumThreads / kFragmentLanes floats.
__device__ inline float block_sum(float v, float* shared) {
  v = group_sum(v);
  const int lane = int(threadIdx.x) % kFragmentLanes, part = int(threadIdx.x) / kFragmentLanes;
  __syncthreads();
  if (lane == 0) shared[part] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < kGroupSumThreads / kFragmentLanes; ++i) total += shared[i];
  return total;
}

// Any dtype and channel count: one group's (sum, squares) of `count` values, value(e) the e-th as a float
// minus the shift. Every thread gets the result.
template <class Value>
__device__ float2 block_group_sums(Value value, int64_t count, float* shared) {
  float sum = 0.f, squares = 0.f;
  for (int64_t e = threadIdx.x; e < count; e += kGroupSumThreads) {
    const float d = value(e);
    sum += d;
    squares += d * d;
  }
  return make_float2(block_sum(sum, shared), block_sum(squares, shared));
}

// 16-byte loads (16-bit T, C % 8 == 0, C <= 8 * kGroupSumThreads, 16-byte aligned pixels): every group's
// (sum, squares) over pixels [begin, end), each thread walking one 8-channel column; the shift of each
// group is its value at pixel 0. The threads' sums are added per channel, then per group, and
// store(g, sums) is called once per group. channel_sums: 2 * channels floats of shared memory.
// offset: nullptr, or the sample's C channel offsets, each added (in f32) to its channel's values. It
// costs nothing a value: (x + offset[c]) - shift is x - (shift - offset[c]), one subtraction as before.
template <class T, class Pixel, class Store>
__device__ void block_group_sums_vector(Pixel pixel, int64_t begin, int64_t end, int channels, int groups,
                                        const T* offset, float* channel_sums, Store store) {
  // 17, not 16, floats a thread: with 16, a warp's stores of one sum fell in 2 of the 32 banks (16-way
  // conflicts, 16 times a thread); an odd stride spreads them over all 32.
  __shared__ float per_thread[kGroupSumThreads][17];
  const int per_group = channels / groups, columns = channels / 8;
  const int column = int(threadIdx.x) % columns, rows_per_pass = kGroupSumThreads / columns;
  const int row0 = int(threadIdx.x) / columns;
  if (row0 < rows_per_pass) {  // threads past the last whole row of columns idle
    const T* first = pixel(0);
    float shift[8], sum[8] = {}, squares[8] = {};
    for (int j = 0; j < 8; ++j) {
      const int c = column * 8 + j, group_first = c / per_group * per_group;
      shift[j] = to_float(first[group_first]);
      if (offset != nullptr) shift[j] += to_float(offset[group_first]) - to_float(offset[c]);
    }
    const auto add = [&](const uint4& vector) HD_INLINE {
      const T* in = reinterpret_cast<const T*>(&vector);
      for (int j = 0; j < 8; ++j) {
        const float d = to_float(in[j]) - shift[j];
        sum[j] += d;
        squares[j] += d * d;
      }
    };
    // kAhead pixels loaded before any is added: more reads in flight, which took the statistics of a
    // [1, 1024, 1024, 128] tensor from 60% to 67% of DRAM bandwidth (H200). The same order of additions.
    constexpr int kAhead = 4;
    int64_t p = begin + row0;
    for (; p + (kAhead - 1) * rows_per_pass < end; p += kAhead * rows_per_pass) {
      uint4 held[kAhead];
      for (int u = 0; u < kAhead; ++u)
        held[u] = *reinterpret_cast<const uint4*>(pixel(p + u * rows_per_pass) + column * 8);
      for (int u = 0; u < kAhead; ++u) add(held[u]);
    }
    for (; p < end; p += rows_per_pass) add(*reinterpret_cast<const uint4*>(pixel(p) + column * 8));
    for (int j = 0; j < 8; ++j) {
      per_thread[threadIdx.x][j] = sum[j];
      per_thread[threadIdx.x][8 + j] = squares[j];
    }
  }
  __syncthreads();
  for (int c = int(threadIdx.x); c < channels; c += kGroupSumThreads) {
    float s = 0.f, q = 0.f;
    for (int r = 0; r < rows_per_pass; ++r) {  // thread r * columns + c / 8 walked channel c in row r
      s += per_thread[r * columns + c / 8][c % 8];
      q += per_thread[r * columns + c / 8][8 + c % 8];
    }
    channel_sums[c] = s;
    channel_sums[channels + c] = q;
  }
  __syncthreads();
  for (int g = int(threadIdx.x); g < groups; g += kGroupSumThreads) {
    float s = 0.f, q = 0.f;
    for (int c = g * per_group; c < (g + 1) * per_group; ++c) s += channel_sums[c], q += channel_sums[channels + c];
    store(g, make_float2(s, q));
  }
}

}  // namespace hd::gpu
