// Embedding lookups on the GPU: token embedding rows, and diffusers' sinusoidal timestep embedding
// computed in f32 and stored in the output's dtype.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

namespace {

constexpr int kThreads = 256;

// One row per block. An id outside the table is reported through `bad` (its position + 1) and its row
// left unwritten; the launcher turns that into an error.
template <class T>
__global__ void embedding_kernel(const int32_t* __restrict__ ids, const T* __restrict__ table, T* __restrict__ out,
                                 int64_t vocab, int64_t width, int64_t* bad) {
  const int64_t row = blockIdx.x;
  const int32_t id = ids[row];
  if (id < 0 || id >= vocab) {
    if (threadIdx.x == 0) *bad = row + 1;
    return;
  }
  for (int64_t j = threadIdx.x; j < width; j += kThreads) out[row * width + j] = table[int64_t(id) * width + j];
}

template <class T>
__global__ void timestep_kernel(const float* __restrict__ timesteps, T* __restrict__ out, int64_t dim,
                                float log_max_period, float shift, float scale, bool flip) {
  const int64_t i = blockIdx.x, half = dim / 2;
  for (int64_t j = threadIdx.x; j < half; j += kThreads) {
    // diffusers' f32 order of operations, as the CPU reference: exp(-ln(max_period) · j / (half - shift)).
    const float exponent = -log_max_period * float(j) / (float(half) - shift);
    const float arg = scale * (timesteps[i] * expf(exponent));
    const float s = sinf(arg), c = cosf(arg);
    out[i * dim + j] = from_float<T>(flip ? c : s);
    out[i * dim + half + j] = from_float<T>(flip ? s : c);
  }
  if (dim % 2 == 1 && threadIdx.x == 0) out[i * dim + dim - 1] = from_float<T>(0.f);
}

}  // namespace

void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  HD_CHECK(table.dtype == out.dtype, "embedding: table ", table.describe(), " and output ", out.describe(),
           " differ in dtype");
  const int64_t rows = ids.numel();
  if (rows == 0) return;
  HD_CHECK_KIND(rows <= 0x7fffffff, ErrorKind::kUnsupported, "embedding: ", rows, " ids exceed one launch");
  HD_GPU_CHECK(cudaSetDevice(ids.device.index));
  const Buffer status(ids.device, sizeof(int64_t));
  HD_GPU_CHECK(cudaMemsetAsync(status.data(), 0, sizeof(int64_t), current_stream()));
  with_element_type(table.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    embedding_kernel<T><<<unsigned(rows), kThreads, 0, current_stream()>>>(
        static_cast<const int32_t*>(ids.data), static_cast<const T*>(table.data), static_cast<T*>(out.data),
        table.dim(0), table.dim(1), static_cast<int64_t*>(status.data()));
  });
  HD_GPU_CHECK_LAUNCH();
  // The check waits for the kernel: the text encoder runs once per prompt, never inside a captured graph.
  int64_t bad = 0;
  HD_GPU_CHECK(cudaMemcpyAsync(&bad, status.data(), sizeof(bad), cudaMemcpyDeviceToHost, current_stream()));
  HD_GPU_CHECK(cudaStreamSynchronize(current_stream()));
  if (bad != 0) {
    int32_t id = 0;
    HD_GPU_CHECK(cudaMemcpyAsync(&id, static_cast<const int32_t*>(ids.data) + (bad - 1), sizeof(id),
                                 cudaMemcpyDeviceToHost, current_stream()));
    HD_GPU_CHECK(cudaStreamSynchronize(current_stream()));
    throw Error(ErrorKind::kInvalidInput, str_cat("embedding: token id ", id, " at position ", bad - 1,
                                                  " is outside the vocabulary of ", table.dim(0)));
  }
}

void timestep_embedding(const Tensor& timesteps, ops::TimestepEmbeddingParams p, const Tensor& out) {
  HD_CHECK_KIND(timesteps.dtype == DType::kF32, ErrorKind::kUnsupported, "timestep_embedding: timesteps are ",
                timesteps.describe(), ", expected f32");
  if (out.numel() == 0) return;
  HD_GPU_CHECK(cudaSetDevice(timesteps.device.index));
  with_element_type(out.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    timestep_kernel<T><<<unsigned(out.dim(0)), kThreads, 0, current_stream()>>>(
        static_cast<const float*>(timesteps.data), static_cast<T*>(out.data), out.dim(1),
        float(std::log(double(p.max_period))), p.downscale_freq_shift, p.scale, p.flip_sin_to_cos);
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
