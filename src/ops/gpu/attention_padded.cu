// Attention for heads the kernels do not take as they are: a head dimension that is not a multiple of 8
// (a small model's 4-wide heads), tensors that do not start on a 16-byte boundary, or rows whose strides
// the kernels cannot step (unaligned, or K's unlike V's). Q, K and V are
// copied with each head widened to the next multiple of 8 by zeros, attention runs on those, and each
// head's first columns are copied out. The zeros change nothing: they add 0 to every score, and the
// output's extra columns (weights times V's zeros) are dropped. The scale stays that of the true width.
#include <cmath>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/gpu_ops.h"

namespace hd::gpu {

namespace {

constexpr int kThreads = 256;

// dst [rows][heads · dst_width] from src's rows of heads · src_width values, src_row apart: each head's
// first head_dim values (head_dim = the narrower of the two widths), then zeros. Widens Q, K and V (whose
// rows may be wider than their heads: column ranges of a stacked projection), and narrows the output.
__global__ void copy_heads_kernel(const uint16_t* __restrict__ src, int64_t src_row, int src_width,
                                  uint16_t* __restrict__ dst, int dst_width, int64_t rows, int heads,
                                  int head_dim) {
  const int64_t width = int64_t(heads) * dst_width, total = rows * width;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t row = i / width;
    const int col = int(i % width), h = col / dst_width, d = col % dst_width;
    dst[i] = d < head_dim ? src[row * src_row + int64_t(h) * src_width + d] : uint16_t(0);
  }
}

void copy_heads(const void* src, int64_t src_row, int src_width, void* dst, int dst_width, int64_t rows,
                int heads, int head_dim) {
  if (rows == 0) return;
  copy_heads_kernel<<<grid_stride_blocks(rows * heads * dst_width, kThreads), kThreads, 0,
                      current_stream()>>>(static_cast<const uint16_t*>(src), src_row, src_width,
                                          static_cast<uint16_t*>(dst), dst_width, rows, heads, head_dim);
  HD_GPU_CHECK_LAUNCH();
}

}  // namespace

void attention_padded(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal, float scale,
                      const Tensor& out, KernelPath path, const Tensor* lse) {
  const int head_dim = int(q.dim(2) / heads), padded = (head_dim + 7) / 8 * 8;
  const auto widened = [&](const Tensor& t, Buffer& storage) {
    const int64_t rows = t.dim(0) * t.dim(1);
    storage = Buffer(t.device, size_t(rows * heads * padded) * sizeof(uint16_t));
    copy_heads(t.data, t.strides[1], head_dim, storage.data(), padded, rows, heads, head_dim);
    return Tensor::contiguous(storage.data(), t.dtype, Shape{t.dim(0), t.dim(1), int64_t(heads) * padded}, t.device);
  };
  HD_GPU_CHECK(cudaSetDevice(q.device.index));
  Buffer q_storage, k_storage, v_storage;
  const Tensor wide_q = widened(q, q_storage), wide_k = widened(k, k_storage), wide_v = widened(v, v_storage);
  const Buffer out_storage(out.device, size_t(wide_q.numel()) * sizeof(uint16_t));
  const Tensor wide_out = Tensor::contiguous(out_storage.data(), out.dtype, wide_q.shape, out.device);
  attention(wide_q, wide_k, wide_v, heads, causal, scale > 0.f ? scale : 1.f / std::sqrt(float(head_dim)),
            wide_out, path, lse);
  copy_heads(out_storage.data(), int64_t(heads) * padded, padded, out.data, head_dim, out.dim(0) * out.dim(1),
             heads, head_dim);
}

}  // namespace hd::gpu
