// Pointwise activations, GEGLU and row softmax on the CPU.
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * float(M_SQRT1_2))); }

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

namespace {

constexpr int64_t kGrain = 1 << 14;

template <typename F>
void map(const Tensor& x, const Tensor& out, F f) {
  const float* xp = x.ptr<float>();
  float* yp = out.ptr<float>();
  ThreadPool::global().parallel_for(x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) yp[i] = f(xp[i]);
  });
}

}  // namespace

void activation(const Tensor& x, Activation kind, const Tensor& out) {
  switch (kind) {
    case Activation::kGeluErf: return map(x, out, gelu_erf);
    case Activation::kGeluTanh: return map(x, out, gelu_tanh);
    case Activation::kQuickGelu: return map(x, out, [](float v) { return v / (1.0f + std::exp(-1.702f * v)); });
    case Activation::kSilu: return map(x, out, silu);
  }
}

void geglu(const Tensor& x, GeluApproximation approximation, const Tensor& out) {
  const int64_t half = out.dim(-1), rows = half == 0 ? 0 : out.numel() / half;
  const float* xp = x.ptr<float>();
  float* yp = out.ptr<float>();
  const auto gelu = approximation == GeluApproximation::kTanh ? gelu_tanh : gelu_erf;
  ThreadPool::global().parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* value = xp + r * 2 * half;
      const float* gate = value + half;
      for (int64_t j = 0; j < half; ++j) yp[r * half + j] = value[j] * gelu(gate[j]);
    }
  });
}

void softmax_rows(const float* x, float* out, int64_t rows, int64_t cols) {
  ThreadPool::global().parallel_for(rows, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * cols;
      float* yr = out + r * cols;
      float max = -INFINITY;
      for (int64_t j = 0; j < cols; ++j) max = std::max(max, xr[j]);
      if (max == -INFINITY) {  // every entry masked: define the row as zeros rather than NaN
        std::fill(yr, yr + cols, 0.0f);
        continue;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        yr[j] = std::exp(xr[j] - max);
        sum += yr[j];
      }
      const float inv = float(1.0 / sum);
      for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
    }
  });
}

}  // namespace hd::ops::cpu
