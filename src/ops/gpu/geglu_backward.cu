// GEGLU's gradient on the GPU: out = a · gelu(g) for x = [a, g] along the last dimension, so
// da = dout · gelu(g) and dg = dout · a · gelu'(g); computed in f32 with the CPU reference's formulas
// (ops/cpu/activation_backward.cpp). One thread per output element, both halves written.
#include <type_traits>

#include "core/error.h"
#include "ops/gpu/gelu.cuh"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = 256;

__device__ inline float gelu_derivative(float v, bool tanh_form) {
  if (tanh_form) {
    const float t = tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v));
    return 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * 0.7978845608028654f * (1.f + 3.f * 0.044715f * v * v);
  }
  return 0.5f * (1.f + erff(v * 0.70710678118654752f)) + v * 0.3989422804014327f * expf(-0.5f * v * v);
}

template <class T>
__global__ void geglu_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                                      T* __restrict__ grad_x, int64_t rows, int64_t half, bool tanh_form) {
  const int64_t n = rows * half;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / half, c = i % half;
    const T* row = x + r * 2 * half;
    const float up = to_float(grad_out[i]), value = to_float(row[c]), gate = to_float(row[half + c]);
    grad_x[r * 2 * half + c] = from_float<T>(up * gelu(gate, tanh_form));
    grad_x[r * 2 * half + half + c] = from_float<T>(up * value * gelu_derivative(gate, tanh_form));
  }
}

}  // namespace

void geglu_backward(const Tensor& grad_out, const Tensor& x, ops::GeluApproximation approximation,
                    const Tensor& grad_x) {
  const int64_t half = grad_out.dim(-1), rows = half == 0 ? 0 : grad_out.numel() / half;
  if (rows * half == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    geglu_backward_kernel<T><<<grid_stride_blocks(rows * half, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(grad_out.data), static_cast<const T*>(x.data), static_cast<T*>(grad_x.data), rows,
        half, approximation == ops::GeluApproximation::kTanh);
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
