// GEGLU's gradient on the CPU: out = a · gelu(g) for x = [a, g] along the last dimension, so
// da = dout · gelu(g) and dg = dout · a · gelu'(g).
#include <cmath>

#include "core/thread_pool.h"
#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

namespace {

// d/dx of x · Φ(x): Φ(x) + x · φ(x).
double gelu_erf_derivative(double x) {
  constexpr double kInvSqrt2Pi = 0.3989422804014327;
  return 0.5 * (1.0 + std::erf(x * M_SQRT1_2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}

// d/dx of 0.5 x (1 + tanh(u)), u = √(2/π) (x + 0.044715 x³).
double gelu_tanh_derivative(double x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  const double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
}

}  // namespace

void geglu_backward(const Tensor& grad_out, const Tensor& x, GeluApproximation approximation,
                    const Tensor& grad_x) {
  const int64_t half = grad_out.dim(-1), rows = half == 0 ? 0 : grad_out.numel() / half;
  const float* xp = x.ptr<float>();
  const float* dy = grad_out.ptr<float>();
  float* dxp = grad_x.ptr<float>();
  const bool tanh_form = approximation == GeluApproximation::kTanh;
  ThreadPool::global().parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* value = xp + r * 2 * half;
      const float* gate = value + half;
      float* d_value = dxp + r * 2 * half;
      float* d_gate = d_value + half;
      for (int64_t j = 0; j < half; ++j) {
        const double up = dy[r * half + j];
        d_value[j] = float(up * (tanh_form ? gelu_tanh(gate[j]) : gelu_erf(gate[j])));
        d_gate[j] = float(up * value[j] * (tanh_form ? gelu_tanh_derivative(gate[j]) : gelu_erf_derivative(gate[j])));
      }
    }
  });
}

}  // namespace hd::ops::cpu
