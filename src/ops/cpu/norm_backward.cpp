// GroupNorm(+SiLU) and LayerNorm gradients on the CPU. Statistics are recomputed from x as the forward
// computed them (ops/cpu/norm.cpp), in double. With x̂ = (x − mean) · rstd over a group of M values and
// dx̂ = dy · gamma:
//   dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)),  dgamma = Σ dy · x̂,  dbeta = Σ dy.
// Under the fused SiLU, dy = dz · silu'(y) with y = x̂ · gamma + beta recomputed.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

namespace {

double silu_derivative(double y) {
  const double s = 1.0 / (1.0 + std::exp(-y));
  return s * (1.0 + y * (1.0 - s));
}

struct Statistics {
  double mean = 0.0, rstd = 0.0;
};

// The mean and 1/std of `count` values visited by for_each (two passes, as the forward).
template <typename ForEach>
Statistics statistics(const ForEach& for_each, double count, float eps) {
  double sum = 0.0;
  for_each([&](double v) { sum += v; });
  const double mean = sum / count;
  double squares = 0.0;
  for_each([&](double v) { squares += (v - mean) * (v - mean); });
  return {mean, 1.0 / std::sqrt(squares / count + double(eps))};
}

}  // namespace

void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         int groups, float eps, bool fuse_silu, const Tensor& grad_x, const Tensor& grad_gamma,
                         const Tensor& grad_beta) {
  const int64_t n = x.dim(0), c = x.dim(-1), positions = x.numel() / std::max<int64_t>(n * c, 1);
  const int64_t group_size = c / groups;
  const float* xp = x.ptr<float>();
  const float* dz = grad_out.ptr<float>();
  const float* g = gamma.ptr<float>();
  const float* bt = beta.ptr<float>();
  float* dxp = grad_x.ptr<float>();
  std::vector<Statistics> stats(size_t(n * groups));
  // dy (the gradient before the SiLU) per element, kept so that the channel sums below need no recompute.
  std::vector<float> dy(size_t(x.numel()));
  ThreadPool::global().parallel_for(n * groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t sample = task / groups, c0 = task % groups * group_size;
      const int64_t base = sample * positions * c;
      const auto for_each = [&](const auto& visit) {
        for (int64_t pos = 0; pos < positions; ++pos)
          for (int64_t j = 0; j < group_size; ++j) visit(double(xp[base + pos * c + c0 + j]));
      };
      const double count = double(positions * group_size);
      const Statistics s = statistics(for_each, count, eps);
      stats[size_t(task)] = s;
      double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
      for (int64_t pos = 0; pos < positions; ++pos) {
        for (int64_t j = 0; j < group_size; ++j) {
          const int64_t i = base + pos * c + c0 + j, ch = c0 + j;
          const double xhat = (xp[i] - s.mean) * s.rstd;
          double d = dz[i];
          if (fuse_silu) d *= silu_derivative(xhat * g[ch] + bt[ch]);
          dy[size_t(i)] = float(d);
          sum_dxhat += d * g[ch];
          sum_dxhat_xhat += d * g[ch] * xhat;
        }
      }
      const double mean_dxhat = sum_dxhat / count, mean_dxhat_xhat = sum_dxhat_xhat / count;
      for (int64_t pos = 0; pos < positions; ++pos) {
        for (int64_t j = 0; j < group_size; ++j) {
          const int64_t i = base + pos * c + c0 + j;
          const double xhat = (xp[i] - s.mean) * s.rstd;
          dxp[i] = float(s.rstd * (double(dy[size_t(i)]) * g[c0 + j] - mean_dxhat - xhat * mean_dxhat_xhat));
        }
      }
    }
  });
  float* dg = grad_gamma.ptr<float>();
  float* db = grad_beta.ptr<float>();
  ThreadPool::global().parallel_for(c, 16, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      double sum_g = 0.0, sum_b = 0.0;
      for (int64_t sample = 0; sample < n; ++sample) {
        const Statistics s = stats[size_t(sample * groups + ch / group_size)];
        for (int64_t pos = 0; pos < positions; ++pos) {
          const int64_t i = (sample * positions + pos) * c + ch;
          sum_g += double(dy[size_t(i)]) * (xp[i] - s.mean) * s.rstd;
          sum_b += dy[size_t(i)];
        }
      }
      dg[ch] = float(sum_g);
      db[ch] = float(sum_b);
    }
  });
}

void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, float eps,
                         const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta) {
  const int64_t c = x.dim(-1), rows = c == 0 ? 0 : x.numel() / c;
  const float* xp = x.ptr<float>();
  const float* dy = grad_out.ptr<float>();
  const float* g = gamma.ptr<float>();
  float* dxp = grad_x.ptr<float>();
  std::vector<Statistics> stats(static_cast<size_t>(rows));
  ThreadPool::global().parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xp + r * c;
      const Statistics s = statistics(
          [&](const auto& visit) {
            for (int64_t j = 0; j < c; ++j) visit(double(xr[j]));
          },
          double(c), eps);
      stats[size_t(r)] = s;
      double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
      for (int64_t j = 0; j < c; ++j) {
        const double dxhat = double(dy[r * c + j]) * g[j];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * (xr[j] - s.mean) * s.rstd;
      }
      const double mean_dxhat = sum_dxhat / double(c), mean_dxhat_xhat = sum_dxhat_xhat / double(c);
      for (int64_t j = 0; j < c; ++j) {
        const double xhat = (xr[j] - s.mean) * s.rstd;
        dxp[r * c + j] = float(s.rstd * (double(dy[r * c + j]) * g[j] - mean_dxhat - xhat * mean_dxhat_xhat));
      }
    }
  });
  float* dg = grad_gamma.ptr<float>();
  float* db = grad_beta.ptr<float>();
  ThreadPool::global().parallel_for(c, 16, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      double sum_g = 0.0, sum_b = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        const Statistics s = stats[size_t(r)];
        sum_g += double(dy[r * c + j]) * (xp[r * c + j] - s.mean) * s.rstd;
        sum_b += dy[r * c + j];
      }
      dg[j] = float(sum_g);
      db[j] = float(sum_b);
    }
  });
}

}  // namespace hd::ops::cpu
