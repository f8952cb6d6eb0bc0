// Elementwise GPU kernels: activations, GEGLU, add/mul with numpy broadcasting, scale. f32, f16 or bf16
// (every operand of one dtype), computed in f32 with the CPU reference's formulas.
#include <type_traits>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/gelu.cuh"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

using ops::Activation;

namespace {

constexpr int kThreads = 256;

__device__ inline float apply(Activation kind, float v) {
  switch (kind) {
    case Activation::kGeluErf:
      return gelu(v, false);
    case Activation::kGeluTanh:
      return gelu(v, true);
    case Activation::kQuickGelu:
      return v / (1.f + expf(-1.702f * v));
    default:
      return v / (1.f + expf(-v));  // SiLU
  }
}

template <class T>
__global__ void activation_kernel(const T* __restrict__ x, T* out, int64_t n, Activation kind) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads)
    out[i] = from_float<T>(apply(kind, to_float(x[i])));
}

template <class T>
__global__ void geglu_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t rows, int64_t half, Activation gelu) {
  const int64_t n = rows * half;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / half, c = i % half;
    const T* row = x + r * 2 * half;
    out[i] = from_float<T>(to_float(row[c]) * apply(gelu, to_float(row[half + c])));
  }
}

template <class T>
__global__ void scale_kernel(const T* __restrict__ x, T* out, int64_t n, float factor) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads)
    out[i] = from_float<T>(to_float(x[i]) * factor);
}

constexpr int kMaxRank = 8;
struct Broadcast {
  int rank;
  int64_t shape[kMaxRank], a_stride[kMaxRank], b_stride[kMaxRank];  // broadcast dims have stride 0
};

template <class T>
__global__ void binary_kernel(const T* a, const T* b, T* out, int64_t n, Broadcast s, bool multiply) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    int64_t ia = 0, ib = 0, rest = i;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t idx = rest % s.shape[d];
      rest /= s.shape[d];
      ia += idx * s.a_stride[d];
      ib += idx * s.b_stride[d];
    }
    const float x = to_float(a[ia]), y = to_float(b[ib]);
    out[i] = from_float<T>(multiply ? x * y : x + y);
  }
}

// The common case, with 16-byte accesses: 16-bit types, and a last dimension C (a multiple of 8) that
// neither operand broadcasts (a residual add, a per-sample bias [N, 1, 1, C] added to [N, H, W, C]).
// Each thread takes eight elements of one row of C; the rows' offsets in a and b come from the
// broadcast strides, once per eight elements rather than once per element.
template <class T>
__global__ void binary_rows_kernel(const T* a, const T* b, T* out, int64_t vectors, int row_vectors, Broadcast s,
                                   bool multiply) {
  for (int64_t v = int64_t(blockIdx.x) * kThreads + threadIdx.x; v < vectors; v += int64_t(gridDim.x) * kThreads) {
    int64_t rest = v / row_vectors, ia = 0, ib = 0;
    const int column = int(v % row_vectors) * 8;
    for (int d = s.rank - 2; d >= 0; --d) {  // the row's position in the leading dimensions
      const int64_t idx = rest % s.shape[d];
      rest /= s.shape[d];
      ia += idx * s.a_stride[d];
      ib += idx * s.b_stride[d];
    }
    T x[8], y[8], r[8];
    *reinterpret_cast<uint4*>(x) = *reinterpret_cast<const uint4*>(a + ia + column);
    *reinterpret_cast<uint4*>(y) = *reinterpret_cast<const uint4*>(b + ib + column);
    for (int j = 0; j < 8; ++j) {
      const float p = to_float(x[j]), q = to_float(y[j]);
      r[j] = from_float<T>(multiply ? p * q : p + q);
    }
    *reinterpret_cast<uint4*>(out + v * 8) = *reinterpret_cast<const uint4*>(r);
  }
}

// GEGLU with 16-byte accesses (16-bit types, N a multiple of 8): eight outputs a thread.
template <class T>
__global__ void geglu_vector_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t vectors, int row_vectors,
                                    int64_t half, Activation gelu) {
  for (int64_t v = int64_t(blockIdx.x) * kThreads + threadIdx.x; v < vectors; v += int64_t(gridDim.x) * kThreads) {
    const int64_t r = v / row_vectors;
    const int64_t c = int64_t(v % row_vectors) * 8;
    const T* row = x + r * 2 * half;
    T value[8], gate[8], res[8];
    *reinterpret_cast<uint4*>(value) = *reinterpret_cast<const uint4*>(row + c);
    *reinterpret_cast<uint4*>(gate) = *reinterpret_cast<const uint4*>(row + half + c);
    for (int j = 0; j < 8; ++j) res[j] = from_float<T>(to_float(value[j]) * apply(gelu, to_float(gate[j])));
    *reinterpret_cast<uint4*>(out + v * 8) = *reinterpret_cast<const uint4*>(res);
  }
}

void check_dtypes(const char* op, std::initializer_list<const Tensor*> ts) {
  const DType t = (*ts.begin())->dtype;
  for (const Tensor* x : ts)
    HD_CHECK_KIND(x->dtype == t, ErrorKind::kUnsupported, op, ": on the GPU all operands share one dtype; got ",
                  dtype_name(t), " and ", dtype_name(x->dtype));
}

}  // namespace

void activation(const Tensor& x, Activation kind, const Tensor& out) {
  check_dtypes("activation", {&x, &out});
  const int64_t n = x.numel();
  if (n == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    activation_kernel<T><<<grid_stride_blocks(n, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x.data), static_cast<T*>(out.data), n, kind);
  });
  HD_GPU_CHECK_LAUNCH();
}

void geglu(const Tensor& x, ops::GeluApproximation approximation, const Tensor& out) {
  const Activation gelu = approximation == ops::GeluApproximation::kTanh ? Activation::kGeluTanh : Activation::kGeluErf;
  check_dtypes("geglu", {&x, &out});
  const int64_t half = out.dim(-1), rows = half == 0 ? 0 : out.numel() / half;
  if (rows * half == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  const bool vector = dtype_size(x.dtype) == 2 && half % 8 == 0 && is_aligned(x.data, 16) && is_aligned(out.data, 16);
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    if (vector) {
      geglu_vector_kernel<T><<<grid_stride_blocks(rows * half / 8, kThreads), kThreads, 0, current_stream()>>>(
          static_cast<const T*>(x.data), static_cast<T*>(out.data), rows * half / 8, int(half / 8), half, gelu);
    } else {
      geglu_kernel<T><<<grid_stride_blocks(rows * half, kThreads), kThreads, 0, current_stream()>>>(
          static_cast<const T*>(x.data), static_cast<T*>(out.data), rows, half, gelu);
    }
  });
  HD_GPU_CHECK_LAUNCH();
}

void binary(const Tensor& a, const Tensor& b, ops::BinaryOp op, const Tensor& out) {
  const bool multiply = op == ops::BinaryOp::kMul;
  check_dtypes(multiply ? "mul" : "add", {&a, &b, &out});
  const int64_t n = out.numel();
  if (n == 0) return;
  HD_CHECK_KIND(out.rank() <= kMaxRank, ErrorKind::kUnsupported, multiply ? "mul" : "add", ": rank ", out.rank(),
                " is past the GPU kernel's ", kMaxRank);
  Broadcast s{out.rank(), {}, {}, {}};
  for (int i = 0; i < out.rank(); ++i) {
    s.shape[i] = out.shape[i];
    const int ia = i - (out.rank() - a.rank()), ib = i - (out.rank() - b.rank());
    s.a_stride[i] = ia < 0 || a.shape[ia] == 1 ? 0 : a.strides[ia];
    s.b_stride[i] = ib < 0 || b.shape[ib] == 1 ? 0 : b.strides[ib];
  }
  HD_GPU_CHECK(cudaSetDevice(out.device.index));
  const int64_t c = out.dim(-1);
  const bool rows = out.rank() >= 1 && dtype_size(out.dtype) == 2 && c % 8 == 0 && a.rank() >= 1 && b.rank() >= 1 &&
                    a.dim(-1) == c && b.dim(-1) == c && is_aligned(a.data, 16) && is_aligned(b.data, 16) &&
                    is_aligned(out.data, 16);
  with_element_type(out.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    if (rows) {
      binary_rows_kernel<T><<<grid_stride_blocks(n / 8, kThreads), kThreads, 0, current_stream()>>>(
          static_cast<const T*>(a.data), static_cast<const T*>(b.data), static_cast<T*>(out.data), n / 8,
          int(c / 8), s, multiply);
    } else {
      binary_kernel<T><<<grid_stride_blocks(n, kThreads), kThreads, 0, current_stream()>>>(
          static_cast<const T*>(a.data), static_cast<const T*>(b.data), static_cast<T*>(out.data), n, s, multiply);
    }
  });
  HD_GPU_CHECK_LAUNCH();
}

void scale(const Tensor& x, float factor, const Tensor& out) {
  check_dtypes("scale", {&x, &out});
  const int64_t n = x.numel();
  if (n == 0) return;
  HD_GPU_CHECK(cudaSetDevice(x.device.index));
  with_element_type(x.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    scale_kernel<T><<<grid_stride_blocks(n, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x.data), static_cast<T*>(out.data), n, factor);
  });
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace hd::gpu
