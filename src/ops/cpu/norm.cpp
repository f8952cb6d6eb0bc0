// GroupNorm and LayerNorm on the CPU. Statistics accumulate in double: a 64x64x320 group sums 40960
// values, where f32 sums would lose the digits the GPU kernels are later compared against.
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                bool fuse_silu, const Tensor& out, const Tensor* channel_offset) {
  const int64_t n = x.dim(0), c = x.dim(-1), positions = x.numel() / std::max<int64_t>(n * c, 1);
  const int64_t group_size = c / groups;
  const float* xp = x.ptr<float>();
  const float* offsets = channel_offset != nullptr ? channel_offset->ptr<float>() : nullptr;
  const float* g = gamma.ptr<float>();
  const float* bt = beta.ptr<float>();
  float* yp = out.ptr<float>();
  ThreadPool::global().parallel_for(n * groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t sample = task / groups, c0 = task % groups * group_size;
      const float* xs = xp + sample * positions * c;
      float* ys = yp + sample * positions * c;
      // x + offset in f32, as a separate addition would store it.
      const auto value = [&](int64_t pos, int64_t ch) {
        return offsets != nullptr ? xs[pos * c + ch] + offsets[sample * c + ch] : xs[pos * c + ch];
      };
      double sum = 0.0, sum_sq = 0.0;
      for (int64_t pos = 0; pos < positions; ++pos) {
        for (int64_t j = 0; j < group_size; ++j) {
          const double v = value(pos, c0 + j);
          sum += v;
          sum_sq += v * v;
        }
      }
      const double count = double(positions * group_size);
      const double mean = sum / count;
      const double var = std::max(0.0, sum_sq / count - mean * mean);
      const float inv_std = float(1.0 / std::sqrt(var + double(eps)));
      for (int64_t pos = 0; pos < positions; ++pos) {
        for (int64_t j = 0; j < group_size; ++j) {
          const int64_t ch = c0 + j;
          float v = float(value(pos, ch) - mean) * inv_std * g[ch] + bt[ch];
          ys[pos * c + ch] = fuse_silu ? silu(v) : v;
        }
      }
    }
  });
}

void group_statistics(const Tensor& x, int groups, const Tensor& stats) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3), per_group = c / groups;
  const float* xp = x.ptr<float>();
  float* out = stats.ptr<float>();
  ThreadPool::global().parallel_for(n * groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t sample = task / groups, c0 = task % groups * per_group;
      // Two passes, the mean and then the squared deviations from it: no cancellation.
      const auto for_each = [&](const auto& visit) {
        for (int64_t y = 0; y < h; ++y)
          for (int64_t xi = 0; xi < w; ++xi) {
            const float* px = xp + sample * x.strides[0] + y * x.strides[1] + xi * x.strides[2] + c0;
            for (int64_t j = 0; j < per_group; ++j) visit(double(px[j]));
          }
      };
      double sum = 0.0;
      for_each([&](double v) { sum += v; });
      const double mean = sum / double(h * w * per_group);
      double squares = 0.0;
      for_each([&](double v) { squares += (v - mean) * (v - mean); });
      out[task * 2] = float(mean);
      out[task * 2 + 1] = float(squares);
    }
  });
}

void group_norm_combine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                        const Tensor& beta, float eps, const Tensor& affine) {
  const int64_t count = parts.dim(0), n = parts.dim(1), groups = parts.dim(2), c = gamma.numel();
  const int64_t per_group = c / groups;
  const float* stats = parts.ptr<float>();
  const float* g = gamma.ptr<float>();
  const float* b = beta.ptr<float>();
  float* map = affine.ptr<float>();
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t group = 0; group < groups; ++group) {
      // Chan, Golub and LeVeque's pairwise update: the parts' means and squared deviations merge exactly.
      double total = 0, mean = 0, squares = 0;
      for (int64_t p = 0; p < count; ++p) {
        const float* part = stats + ((p * n + s) * groups + group) * 2;
        const double m = double(positions[size_t(p)] * per_group), delta = double(part[0]) - mean;
        const double merged = total + m;
        mean += delta * m / merged;
        squares += double(part[1]) + delta * delta * total * m / merged;
        total = merged;
      }
      const double rstd = 1.0 / std::sqrt(std::max(0.0, squares / total) + double(eps));
      for (int64_t ch = group * per_group; ch < (group + 1) * per_group; ++ch) {
        const double scale = double(g[ch]) * rstd;
        map[(s * c + ch) * 2] = float(scale);
        map[(s * c + ch) * 2 + 1] = float(double(b[ch]) - mean * scale);
      }
    }
  }
}

void group_norm_apply(const Tensor& x, const Tensor& affine, bool fuse_silu, const Tensor& out) {
  const int64_t n = x.dim(0), c = x.dim(-1), per_sample = x.numel() / std::max<int64_t>(n, 1);
  const float* xp = x.ptr<float>();
  const float* map = affine.ptr<float>();
  float* yp = out.ptr<float>();
  ThreadPool::global().parallel_for(n * per_sample, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* m = map + (i / per_sample * c + i % c) * 2;
      const float v = xp[i] * m[0] + m[1];
      yp[i] = fuse_silu ? silu(v) : v;
    }
  });
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out) {
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  const float* xp = x.ptr<float>();
  const float* g = gamma.ptr<float>();
  const float* bt = beta.ptr<float>();
  float* yp = out.ptr<float>();
  ThreadPool::global().parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xp + r * c;
      double sum = 0.0;
      for (int64_t j = 0; j < c; ++j) sum += xr[j];
      const double mean = sum / double(c);
      double sq = 0.0;  // two passes: the row is short and in cache, and this avoids cancellation
      for (int64_t j = 0; j < c; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
      const double inv_std = 1.0 / std::sqrt(sq / double(c) + double(eps));
      for (int64_t j = 0; j < c; ++j) yp[r * c + j] = float((xr[j] - mean) * inv_std) * g[j] + bt[j];
    }
  });
}

}  // namespace hd::ops::cpu
