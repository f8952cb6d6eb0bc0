// Layout kernels on channels-last tensors: nearest 2x upsampling, channel concatenation, an image split's
// padded strip and copies between views. They move bits without converting them, so one kernel per word
// size serves every dtype: elements of 16 or 32 bits, or (the last two) the widest word that every run,
// stride and address divides, up to 16 bytes.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
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

// The widest word (16, 8, 4 or 2 bytes) that divides every value.
int word_bytes(std::initializer_list<int64_t> values) {
  for (int w : {16, 8, 4, 2}) {
    bool divides = true;
    for (int64_t v : values) divides = divides && v % w == 0;
    if (divides) return w;
  }
  return 1;
}

template <class F>
void with_word(int bytes, F f) {
  switch (bytes) {
    case 16: return f(static_cast<uint4*>(nullptr));
    case 8: return f(static_cast<uint2*>(nullptr));
    case 4: return f(static_cast<uint32_t*>(nullptr));
    case 2: return f(static_cast<uint16_t*>(nullptr));
    default: return f(static_cast<uint8_t*>(nullptr));
  }
}

struct RunsInWords {
  int64_t run;  // words per run
  int size[3];  // outer sizes, innermost first (their product < 2^31)
  int64_t src_stride[3], dst_stride[3];
};

// A block row (blockIdx.y) per run, from run `first` on: its place from the outer index in 32-bit
// arithmetic, once; then the run's words, strided over blockIdx.x, with no division in the loop.
template <class Word>
__global__ void copy_runs_kernel(const Word* __restrict__ src, Word* __restrict__ dst, RunsInWords r, int first) {
  int outer = first + int(blockIdx.y);
  int64_t s = 0, d = 0;
  for (int level = 0; level < 3; ++level) {
    const int index = outer % r.size[level];
    outer /= r.size[level];
    s += index * r.src_stride[level];
    d += index * r.dst_stride[level];
  }
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < r.run; i += int64_t(gridDim.x) * kThreads)
    dst[d + i] = src[s + i];
}

// out [n, h + 2, w + 2, words per pixel]: the strip in the middle, the rows above and below (null: zeros),
// zero columns either side.
struct Surround {
  int64_t n, h, w, pixel;  // pixel: words per pixel
  int64_t above_sample, below_sample;  // words between samples of the rows
};

template <class Word>
__global__ void surround_kernel(const Word* __restrict__ x, const Word* __restrict__ above,
                                const Word* __restrict__ below, Word* __restrict__ out, Surround g, int64_t total) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t word = i % g.pixel, column = (i / g.pixel) % (g.w + 2), row = (i / g.pixel / (g.w + 2)) % (g.h + 2),
                  sample = i / g.pixel / (g.w + 2) / (g.h + 2);
    Word v{};
    if (column >= 1 && column <= g.w) {
      const int64_t at = (column - 1) * g.pixel + word;
      if (row == 0) {
        if (above != nullptr) v = above[sample * g.above_sample + at];
      } else if (row == g.h + 1) {
        if (below != nullptr) v = below[sample * g.below_sample + at];
      } else {
        v = x[(sample * g.h + row - 1) * g.w * g.pixel + at];
      }
    }
    out[i] = v;
  }
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

void copy_runs(const void* src, void* dst, const StridedRuns& runs, const Device& device) {
  HD_CHECK(runs.levels <= 3, "copy_runs: ", runs.levels, " levels of strides (at most 3)");
  int64_t outer = 1;
  for (int level = 0; level < runs.levels; ++level) outer *= runs.size[level];
  HD_CHECK_KIND(outer < (int64_t(1) << 31), ErrorKind::kUnsupported, "copy_runs: ", outer, " runs (fewer than 2^31)");
  const int word = word_bytes({runs.run, runs.src_stride[0], runs.src_stride[1], runs.src_stride[2],
                               runs.dst_stride[0], runs.dst_stride[1], runs.dst_stride[2],
                               int64_t(reinterpret_cast<uintptr_t>(src)), int64_t(reinterpret_cast<uintptr_t>(dst))});
  RunsInWords r{runs.run / word, {1, 1, 1}, {}, {}};
  for (int level = 0; level < runs.levels; ++level) {
    r.size[level] = int(runs.size[level]);
    r.src_stride[level] = runs.src_stride[level] / word;
    r.dst_stride[level] = runs.dst_stride[level] / word;
  }
  if (r.run == 0 || outer == 0) return;
  HD_GPU_CHECK(cudaSetDevice(device.index));
  const unsigned columns = std::min(grid_stride_blocks(r.run, kThreads), 65535u);
  // A grid's y extent is at most 65535 runs: more take several launches.
  for (int64_t first = 0; first < outer; first += 65535) {
    const dim3 grid(columns, unsigned(std::min<int64_t>(65535, outer - first)));
    with_word(word, [&](auto* type) {
      using Word = std::remove_pointer_t<decltype(type)>;
      copy_runs_kernel<Word><<<grid, kThreads, 0, current_stream()>>>(static_cast<const Word*>(src),
                                                                       static_cast<Word*>(dst), r, int(first));
    });
    HD_GPU_CHECK_LAUNCH();
  }
}

void surround_strip(const Tensor& x, const Tensor* above, const Tensor* below, const Tensor& out) {
  const auto element = int64_t(dtype_size(x.dtype));
  const int64_t pixel_bytes = x.dim(3) * element;
  const auto address = [](const void* p) { return int64_t(reinterpret_cast<uintptr_t>(p)); };
  const int word = word_bytes({pixel_bytes, address(x.data), address(out.data),
                               above ? address(above->data) : 0, above ? above->strides[0] * element : 0,
                               below ? address(below->data) : 0, below ? below->strides[0] * element : 0});
  const Surround g{x.dim(0), x.dim(1), x.dim(2), pixel_bytes / word,
                   above ? above->strides[0] * element / word : 0, below ? below->strides[0] * element / word : 0};
  const int64_t total = out.numel() * element / word;
  if (total == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_word(word, [&](auto* type) {
    using Word = std::remove_pointer_t<decltype(type)>;
    surround_kernel<Word><<<grid_stride_blocks(total, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const Word*>(x.data), above ? static_cast<const Word*>(above->data) : nullptr,
        below ? static_cast<const Word*>(below->data) : nullptr, static_cast<Word*>(out.data), g, total);
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
