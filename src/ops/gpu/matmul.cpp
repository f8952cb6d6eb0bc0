// conv2d, linear, batched_matmul and the materialised attention as problems for the one GEMM kernel
// family (gemm.h). Host code only: shapes and pointers, no kernels.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/scratch.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gpu_ops.h"

namespace hd::gpu {

namespace {

void check_dtype(const char* op, const Tensor& reference, std::initializer_list<const Tensor*> others) {
  HD_CHECK_KIND(reference.dtype == DType::kF16 || reference.dtype == DType::kBF16, ErrorKind::kUnsupported, op,
                ": the GPU kernels take f16 or bf16, got ", reference.describe());
  for (const Tensor* t : others)
    HD_CHECK(t == nullptr || t->dtype == reference.dtype, op, ": ", t->describe(), " differs in dtype from ",
             reference.describe());
}

}  // namespace

GemmProblem conv_gemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      ops::Conv2dParams p, const Tensor& out) {
  GemmProblem g;
  g.dtype = x.dtype;
  g.device = x.device;
  g.n = w.dim(0);
  g.a = x.data;
  g.images = x.dim(0), g.height = x.dim(1), g.width = x.dim(2), g.channels = x.dim(3), g.pixel_stride = x.dim(3);
  g.out_height = out.dim(1), g.out_width = out.dim(2);
  g.kh = int(w.dim(1)), g.kw = int(w.dim(2)), g.stride = p.stride, g.padding = p.padding;
  g.b = w.data;
  g.ldb = w.dim(1) * w.dim(2) * w.dim(3);
  g.c = out.data;
  g.ldc = out.dim(3);
  g.bias = bias ? bias->data : nullptr;
  g.residual = residual ? residual->data : nullptr;
  return g;
}

void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, ops::Conv2dParams p,
            const Tensor& out) {
  check_dtype("conv2d", x, {&w, bias, residual, &out});
  gemm(conv_gemm(x, w, bias, residual, p, out));
}

GemmProblem upsample_conv_gemm(const Tensor& x, const Tensor& phases, const Tensor& w, const Tensor* bias,
                               const Tensor& out) {
  const int64_t n = w.dim(0), height = x.dim(1), width = x.dim(2), channels = x.dim(3);
  GemmProblem g;
  g.dtype = x.dtype;
  g.device = x.device;
  g.outer = g.inner = 2;  // (dy, dx)
  g.n = n;
  g.a = x.data;
  g.images = x.dim(0), g.height = g.out_height = height, g.width = g.out_width = width;
  g.channels = g.pixel_stride = channels;
  g.kh = g.kw = 2;
  g.padding = 1;  // phase (dy, dx): 1 - dy rows above, 1 - dx columns to the left
  g.padding_batch_step = 1;
  g.b = phases.data;
  g.ldb = 4 * channels;
  g.b_batch = {2 * n * g.ldb, n * g.ldb};
  // Output pixel (2y + dy, 2x + dx): phase (dy, dx) starts dy rows and dx pixels into the output; its
  // pixels (y, x) are 2 apart along a row, and each of its rows (an input row) starts 2 output rows on.
  g.c = out.data;
  g.c_batch = {2 * width * n, n};
  g.ldc = 2 * n;
  g.c_group_rows = width;
  g.c_group_stride = 4 * width * n;
  g.bias = bias ? bias->data : nullptr;
  g.upsampled_conv_weights = w.data;
  return g;
}

void upsample_conv2d(const Tensor& x, const Tensor& w, const Tensor* phases, const Tensor* bias,
                     const Tensor& out) {
  check_dtype("upsample_conv2d", x, {&w, phases, bias, &out});
  if (phases != nullptr) return gemm(upsample_conv_gemm(x, *phases, w, bias, out));
  const Tensor upsampled =
      Tensor::contiguous(scratch(x.device, size_t(4 * x.numel()) * dtype_size(x.dtype)), x.dtype,
                         Shape{x.dim(0), 2 * x.dim(1), 2 * x.dim(2), x.dim(3)}, x.device);
  upsample_nearest_2x(x, upsampled);
  gemm(conv_gemm(upsampled, w, bias, nullptr, {1, 1, 0}, out));
}

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, const Tensor& out) {
  check_dtype("linear", x, {&w, bias, residual, &out});
  const int64_t k = w.dim(1), n = w.dim(0), m = k == 0 ? 0 : x.numel() / k;
  GemmProblem g = dense_gemm(x.dtype, x.device, m, n, k, x.data, k, w.data, k, out.data, n);
  g.bias = bias ? bias->data : nullptr;
  g.residual = residual ? residual->data : nullptr;
  gemm(g);
}

void linear_geglu(const Tensor& x, const Tensor& w, const Tensor* bias, ops::GeluApproximation approximation,
                  const Tensor& out) {
  check_dtype("linear_geglu", x, {&w, bias, &out});
  const int64_t k = w.dim(1), n = w.dim(0), m = k == 0 ? 0 : x.numel() / k;
  GemmProblem g = dense_gemm(x.dtype, x.device, m, n, k, x.data, k, w.data, k, out.data, n / 2);
  g.bias = bias ? bias->data : nullptr;
  g.gate = approximation == ops::GeluApproximation::kTanh ? GemmGate::kGeluTanh : GemmGate::kGeluErf;
  gemm(g);
}

void batched_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, float alpha,
                    const Tensor& out) {
  check_dtype("batched_matmul", a, {&b, &out});
  const int64_t batch = a.dim(0), m = out.dim(1), n = out.dim(2), k = transpose_a ? a.dim(1) : a.dim(2);
  // The kernel reads A as [m, k] and B as [n, k]; other orientations are transposed into scratch first.
  const size_t a_bytes = transpose_a ? size_t(a.nbytes() + 255) / 256 * 256 : 0;
  const size_t b_bytes = transpose_b ? 0 : b.nbytes();
  char* temp = a_bytes + b_bytes > 0 ? static_cast<char*>(scratch(a.device, a_bytes + b_bytes)) : nullptr;
  const void* a_rows = a.data;
  const void* b_rows = b.data;
  if (transpose_a) {
    transpose_16bit(a.data, m, {a.dim(1) * m, 0}, batch, 1, k, m, temp, a.device);
    a_rows = temp;
  }
  if (!transpose_b) {
    transpose_16bit(b.data, n, {k * n, 0}, batch, 1, k, n, temp + a_bytes, a.device);
    b_rows = temp + a_bytes;
  }
  GemmProblem g = dense_gemm(a.dtype, a.device, m, n, k, a_rows, k, b_rows, k, out.data, n);
  g.outer = batch;
  g.a_batch = {m * k, 0};
  g.b_batch = {n * k, 0};
  g.c_batch = {m * n, 0};
  g.alpha = alpha;
  gemm(g);
}

void attention_materialised(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal,
                            float scale, const Tensor& out, MaterialisedChunks chunks) {
  const int64_t b = q.dim(0), lq = q.dim(1), lk = k.dim(1), d = q.dim(2) / heads, problems = b * heads;
  const size_t element = dtype_size(q.dtype);
  // The queries go through in chunks (gpu_ops.h, MaterialisedChunks): the scores of a 2048x2048
  // picture's VAE attention (65536 tokens) would be 8 GiB at once, and the decode's latent-resolution head
  // runs whole even when the rest is tiled. Causal masking counts rows from query 0 (softmax's
  // causal_queries), so a causal problem keeps all its rows in one chunk.
  const int64_t row_bytes = problems * lk * int64_t(element);
  int64_t rows = lq;
  if (!causal && row_bytes > 0 && size_t(lq * row_bytes) > chunks.max_scores_bytes) {
    const int64_t fit = int64_t(chunks.max_scores_bytes) / row_bytes / 16 * 16;
    rows = std::min(lq, std::max<int64_t>({16, chunks.min_rows, fit}));
  }
  const size_t scores_bytes = (size_t(rows * row_bytes) + 255) / 256 * 256;
  char* temp = static_cast<char*>(scratch(q.device, scores_bytes + size_t(problems * d * lk) * element));
  void* scores = temp;              // [B, H, rows, Lk]
  void* v_t = temp + scores_bytes;  // [B, H, D, Lk]: V of each head transposed, the layout B is read in

  // Tokens are rows, strides[1] apart (q, k and v may be column ranges of a stacked projection's output).
  const int64_t q_row = q.strides[1], k_row = k.strides[1], v_row = v.strides[1], out_row = out.dim(2);
  transpose_16bit(v.data, v_row, {lk * v_row, d}, b, heads, lk, d, v_t, q.device);
  for (int64_t q0 = 0; q0 < lq; q0 += rows) {
    const int64_t n = std::min(rows, lq - q0);
    const char* q_rows = static_cast<const char*>(q.data) + size_t(q0 * q_row) * element;
    char* out_rows = static_cast<char*>(out.data) + size_t(q0 * out_row) * element;
    GemmProblem s = dense_gemm(q.dtype, q.device, n, lk, d, q_rows, q_row, k.data, k_row, scores, lk);
    s.outer = b, s.inner = heads;
    s.a_batch = {lq * q_row, d};
    s.b_batch = {lk * k_row, d};
    s.c_batch = {heads * n * lk, n * lk};
    s.alpha = scale > 0.f ? scale : 1.0f / std::sqrt(float(d));
    gemm(s);
    const Tensor scores_view = Tensor::contiguous(scores, q.dtype, Shape{problems * n, lk}, q.device);
    softmax(scores_view, scores_view, causal ? lq : 0);
    GemmProblem o = dense_gemm(q.dtype, q.device, n, d, lk, scores, lk, v_t, lk, out_rows, out_row);
    o.outer = b, o.inner = heads;
    o.a_batch = {heads * n * lk, n * lk};
    o.b_batch = {heads * d * lk, d * lk};
    o.c_batch = {lq * out_row, d};
    gemm(o);
  }
}

}  // namespace hd::gpu
