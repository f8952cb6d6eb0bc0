// GELU in f32 on the GPU, in the CPU reference's two forms (ops/cpu/activation.cpp): the elementwise
// kernels, GEGLU's gradient and the GEMM tiles' GEGLU epilogue compute the same function.
#pragma once

#include "ops/gpu/common.cuh"

namespace hd::gpu {

__device__ __forceinline__ float gelu(float v, bool tanh_form) {
  return tanh_form ? 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                   : 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
}

}  // namespace hd::gpu
