// The denoising loop's arithmetic on the GPU, so that the latents stay on the device between steps:
// the model's input (scale, convert, repeat for guidance) and one sampler step with classifier-free
// guidance, each one pass over the latents. The per-value formula is ops::updated_sample, shared with
// the CPU (src/ops/sampler_update.h); the sample and the x0 history stay in f32.
#include <type_traits>

#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void sampler_input_kernel(const float* __restrict__ sample, float divisor, T* __restrict__ out,
                                     int64_t count, int copies) {
  for (int64_t j = int64_t(blockIdx.x) * kThreads + threadIdx.x; j < count; j += int64_t(gridDim.x) * kThreads) {
    const T v = from_float<T>(sample[j] / divisor);
    for (int c = 0; c < copies; ++c) out[c * count + j] = v;
  }
}

template <class T>
__global__ void sampler_step_kernel(ops::SamplerUpdate u, const T* __restrict__ prediction, float* __restrict__ sample,
                                    const float* __restrict__ noise, const float* __restrict__ previous_x0,
                                    float* __restrict__ x0, int64_t count) {
  for (int64_t j = int64_t(blockIdx.x) * kThreads + threadIdx.x; j < count; j += int64_t(gridDim.x) * kThreads) {
    const float output =
        ops::guided_output(u, to_float(prediction[j]), u.guided() ? to_float(prediction[count + j]) : 0.0f);
    sample[j] = ops::updated_sample(u, sample[j], output, noise != nullptr ? noise[j] : 0.0f,
                                    previous_x0 != nullptr ? previous_x0[j] : 0.0f, x0 != nullptr ? x0 + j : nullptr);
  }
}

}  // namespace

void sampler_input(const Tensor& sample, float divisor, const Tensor& out) {
  const int64_t count = sample.numel();
  if (count == 0) return;
  HD_GPU_CHECK(cudaSetDevice(sample.device.index));
  with_element_type(out.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    sampler_input_kernel<T><<<grid_stride_blocks(count, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const float*>(sample.data), divisor, static_cast<T*>(out.data), count,
        int(out.dim(0) / sample.dim(0)));
  });
  HD_GPU_CHECK_LAUNCH();
}

void sampler_step(const ops::SamplerUpdate& u, const Tensor& prediction, const Tensor& sample, const Tensor* noise,
                  const Tensor* previous_x0, const Tensor* x0) {
  const int64_t count = sample.numel();
  if (count == 0) return;
  HD_GPU_CHECK(cudaSetDevice(sample.device.index));
  const auto f32 = [](const Tensor* t) { return t != nullptr ? static_cast<float*>(t->data) : nullptr; };
  with_element_type(prediction.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    sampler_step_kernel<T><<<grid_stride_blocks(count, kThreads), kThreads, 0, current_stream()>>>(
        u, static_cast<const T*>(prediction.data), static_cast<float*>(sample.data), f32(noise), f32(previous_x0),
        f32(x0), count);
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
