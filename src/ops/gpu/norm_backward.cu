// GroupNorm(+SiLU) and LayerNorm gradients on the GPU, f32 arithmetic, the formulas of the CPU reference
// (ops/cpu/norm_backward.cpp): with x̂ = (x − mean) · rstd over a group (or row) of M values, dy the
// gradient before the fused SiLU (dz · silu'(y), y = x̂ · gamma + beta, recomputed) and dx̂ = dy · gamma,
//   dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)),  dgamma = Σ dy · x̂,  dbeta = Σ dy.
// A block per group (or row) recomputes its statistics in two passes, sums dx̂ and dx̂ · x̂, then writes
// dx. dgamma and dbeta are channel sums over every row: blocks of 32 channels x 8 row lanes add a slice
// of the rows each into scratch, and one thread per channel adds the slices in order (the same bits on
// every run). Correct first, not fast: a GroupNorm has only N x groups blocks for its dx.
#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/group_sums.cuh"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = kGroupSumThreads;
constexpr int kChannelsPerBlock = 32, kRowLanes = kThreads / kChannelsPerBlock;

__device__ inline float silu_derivative(float y) {
  const float s = 1.f / (1.f + expf(-y));
  return s * (1.f + y * (1.f - s));
}

// One block's group (or row): `count` elements, element e at address offset(e), channel channel(e).
// Writes dx, and the (mean, rstd) of the group to stats.
template <class T, class Offset, class Channel>
__device__ void normalised_gradient(const T* __restrict__ dz, const T* __restrict__ x, const T* __restrict__ gamma,
                                    const T* __restrict__ beta, int64_t count, float eps, bool fuse, Offset offset,
                                    Channel channel, T* __restrict__ dx, float2* stats) {
  __shared__ float shared[kThreads / kFragmentLanes];
  float sum = 0.f;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) sum += to_float(x[offset(e)]);
  const float mean = block_sum(sum, shared) / float(count);
  float squares = 0.f;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const float d = to_float(x[offset(e)]) - mean;
    squares += d * d;
  }
  const float rstd = rsqrtf(block_sum(squares, shared) / float(count) + eps);
  const auto upstream = [&](int64_t e, float xhat) {  // dy at element e
    const int c = channel(e);
    const float d = to_float(dz[offset(e)]);
    return fuse ? d * silu_derivative(xhat * to_float(gamma[c]) + to_float(beta[c])) : d;
  };
  float sum_dxhat = 0.f, sum_dxhat_xhat = 0.f;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const float xhat = (to_float(x[offset(e)]) - mean) * rstd;
    const float dxhat = upstream(e, xhat) * to_float(gamma[channel(e)]);
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * xhat;
  }
  const float mean_dxhat = block_sum(sum_dxhat, shared) / float(count);
  const float mean_dxhat_xhat = block_sum(sum_dxhat_xhat, shared) / float(count);
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const float xhat = (to_float(x[offset(e)]) - mean) * rstd;
    const float dxhat = upstream(e, xhat) * to_float(gamma[channel(e)]);
    dx[offset(e)] = from_float<T>(rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
  }
  if (threadIdx.x == 0) *stats = make_float2(mean, rstd);
}

// GroupNorm: a block per (group, sample) of x [N, positions, C].
template <class T>
__global__ void __launch_bounds__(kThreads)
    group_norm_backward_kernel(const T* dz, const T* x, const T* gamma, const T* beta, int64_t positions,
                               int channels, int groups, float eps, bool fuse, T* dx, float2* stats) {
  const int g = int(blockIdx.x), n = int(blockIdx.y), per_group = channels / groups;
  const int64_t base = int64_t(n) * positions * channels + int64_t(g) * per_group;
  normalised_gradient(
      dz, x, gamma, beta, positions * per_group, eps, fuse,
      [&](int64_t e) { return base + (e / per_group) * channels + e % per_group; },
      [&](int64_t e) { return g * per_group + int(e % per_group); }, dx, stats + int64_t(n) * groups + g);
}

// LayerNorm: a block per row of x [rows, C].
template <class T>
__global__ void __launch_bounds__(kThreads)
    layer_norm_backward_kernel(const T* dz, const T* x, const T* gamma, int channels, float eps, T* dx,
                               float2* stats) {
  const int64_t base = int64_t(blockIdx.x) * channels;
  normalised_gradient(
      dz, x, gamma, gamma, channels, eps, false, [&](int64_t e) { return base + e; },
      [&](int64_t e) { return int(e); }, dx, stats + blockIdx.x);
}

// dgamma and dbeta, first half: the sums of dy · x̂ and dy over rows [slice's) for 32 channels. Row r's
// statistics are stats[stat_of(r, c)]; partial [slices, C].
template <class T, class StatOf>
__global__ void __launch_bounds__(kThreads)
    channel_partials_kernel(const T* dz, const T* x, const T* gamma, const T* beta, int64_t rows, int channels,
                            bool fuse, const float2* stats, StatOf stat_of, float2* partial) {
  __shared__ float2 lanes[kRowLanes][kChannelsPerBlock];
  const int column = int(threadIdx.x) % kChannelsPerBlock, lane = int(threadIdx.x) / kChannelsPerBlock;
  const int c = int(blockIdx.x) * kChannelsPerBlock + column, slices = int(gridDim.y);
  const int64_t begin = rows * blockIdx.y / slices, end = rows * (blockIdx.y + 1) / slices;
  float sum_g = 0.f, sum_b = 0.f;
  if (c < channels) {
    const float g = to_float(gamma[c]), b = to_float(beta[c]);
    for (int64_t r = begin + lane; r < end; r += kRowLanes) {
      const float2 s = stats[stat_of(r, c)];
      const float xhat = (to_float(x[r * channels + c]) - s.x) * s.y;
      float d = to_float(dz[r * channels + c]);
      if (fuse) d *= silu_derivative(xhat * g + b);
      sum_g += d * xhat;
      sum_b += d;
    }
  }
  lanes[lane][column] = make_float2(sum_g, sum_b);
  __syncthreads();
  if (lane == 0 && c < channels) {
    for (int l = 1; l < kRowLanes; ++l) sum_g += lanes[l][column].x, sum_b += lanes[l][column].y;
    partial[int64_t(blockIdx.y) * channels + c] = make_float2(sum_g, sum_b);
  }
}

// ...second half: one thread per channel adds the slices in order.
template <class T>
__global__ void channel_sums_kernel(const float2* partial, int slices, int channels, T* grad_gamma, T* grad_beta) {
  const int c = int(blockIdx.x) * kThreads + int(threadIdx.x);
  if (c >= channels) return;
  float sum_g = 0.f, sum_b = 0.f;
  for (int s = 0; s < slices; ++s) {
    const float2 p = partial[int64_t(s) * channels + c];
    sum_g += p.x;
    sum_b += p.y;
  }
  grad_gamma[c] = from_float<T>(sum_g);
  grad_beta[c] = from_float<T>(sum_b);
}

// Slices of 64 rows, at most 1024 of them.
int slices_for(int64_t rows) { return int(std::max<int64_t>(1, std::min<int64_t>((rows + 63) / 64, 1024))); }

template <class T, class StatOf>
void channel_gradients(const T* dz, const T* x, const T* gamma, const T* beta, int64_t rows, int channels, bool fuse,
                       const float2* stats, StatOf stat_of, float2* partial, T* grad_gamma, T* grad_beta) {
  const int slices = slices_for(rows);
  const dim3 grid((channels + kChannelsPerBlock - 1) / kChannelsPerBlock, slices);
  channel_partials_kernel<T><<<grid, kThreads, 0, current_stream()>>>(dz, x, gamma, beta, rows, channels, fuse, stats,
                                                                      stat_of, partial);
  HD_GPU_CHECK_LAUNCH();
  channel_sums_kernel<T><<<(channels + kThreads - 1) / kThreads, kThreads, 0, current_stream()>>>(
      partial, slices, channels, grad_gamma, grad_beta);
  HD_GPU_CHECK_LAUNCH();
}

struct GroupStat {
  int64_t positions;
  int groups, per_group;
  __device__ int64_t operator()(int64_t r, int c) const { return (r / positions) * groups + c / per_group; }
};

struct RowStat {
  __device__ int64_t operator()(int64_t r, int) const { return r; }
};

}  // namespace

void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                         float eps, bool fuse_silu, const Tensor& grad_x, const Tensor& grad_gamma,
                         const Tensor& grad_beta) {
  const int64_t n = x.dim(0), c = x.dim(-1), positions = x.numel() / std::max<int64_t>(n * c, 1);
  if (x.numel() == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  const int64_t rows = n * positions;
  auto* stats = static_cast<float2*>(
      scratch(x.device, (size_t(n * groups) + size_t(slices_for(rows)) * size_t(c)) * sizeof(float2)));
  float2* partial = stats + n * groups;
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    const auto* dz = static_cast<const T*>(grad_out.data);
    const auto* xp = static_cast<const T*>(x.data);
    const auto* g = static_cast<const T*>(gamma.data);
    const auto* b = static_cast<const T*>(beta.data);
    group_norm_backward_kernel<T><<<dim3(groups, unsigned(n)), kThreads, 0, current_stream()>>>(
        dz, xp, g, b, positions, int(c), groups, eps, fuse_silu, static_cast<T*>(grad_x.data), stats);
    HD_GPU_CHECK_LAUNCH();
    channel_gradients(dz, xp, g, b, rows, int(c), fuse_silu, stats, GroupStat{positions, groups, int(c) / groups},
                      partial, static_cast<T*>(grad_gamma.data), static_cast<T*>(grad_beta.data));
  });
}

void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, float eps,
                         const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta) {
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  if (rows == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  auto* stats = static_cast<float2*>(
      scratch(x.device, (size_t(rows) + size_t(slices_for(rows)) * size_t(c)) * sizeof(float2)));
  float2* partial = stats + rows;
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    const auto* dz = static_cast<const T*>(grad_out.data);
    const auto* xp = static_cast<const T*>(x.data);
    const auto* g = static_cast<const T*>(gamma.data);
    layer_norm_backward_kernel<T><<<unsigned(rows), kThreads, 0, current_stream()>>>(
        dz, xp, g, int(c), eps, static_cast<T*>(grad_x.data), stats);
    HD_GPU_CHECK_LAUNCH();
    // beta is not read without the fused SiLU: gamma stands in for it.
    channel_gradients(dz, xp, g, g, rows, int(c), false, stats, RowStat{}, partial,
                      static_cast<T*>(grad_gamma.data), static_cast<T*>(grad_beta.data));
  });
}

}  // namespace hd::gpu
