// The GPU's matrix products as plain C++ sees them: one implicit-GEMM kernel family serves convolution
// (A is the im2col view of an NHWC image, never materialised), linear layers and batched products (a
// dense matrix is a 1x1 convolution over an image one pixel high).
//
//   C[m, n] = alpha · Σ_k A[m, k] · B[n, k] + bias[n] + residual[m, n]
//
// f16 or bf16 operands, f32 accumulation, C of the operands' dtype. The kernel (a tile shape of ours, or
// cuDNN / cuBLASLt on NVIDIA) is chosen per problem by the autotuner (ops/tuning/autotuner.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/gpu/matrix_unit.h"
#include "ops/ops.h"

namespace hd::gpu {

// A batch of outer × inner problems: operand X of problem (o, i) starts o·outer + i·inner elements in.
struct BatchStrides {
  int64_t outer = 0, inner = 0;
};

// What the product goes through before C: nothing, or GEGLU (diffusers' feed-forward): the problem is then
// the projection P = alpha · A · Bᵀ + bias, n = 2F columns wide, and C [m, F] receives
// P[:, :F] · gelu(P[:, F:]) (erf or tanh form), so that P never reaches memory. One problem (no batch),
// no residual, C dense (ldc = F).
enum class GemmGate { kNone, kGeluErf, kGeluTanh };

struct GemmProblem {
  DType dtype = DType::kF16;
  Device device;
  int64_t outer = 1, inner = 1;  // the batch
  int64_t n = 0;                 // columns of C: output channels
  // A: images [images, height, width, channels] with `pixel_stride` elements between pixels, convolved
  // with a kh x kw kernel at `stride`, `padding` zeros before the first row/column (the output size says
  // where the last ones end); the rows of A are the output pixels, images × out_height × out_width.
  const void* a = nullptr;
  BatchStrides a_batch;
  int64_t images = 1, height = 1, width = 0, channels = 0, pixel_stride = 0;
  int64_t out_height = 1, out_width = 0;
  int kh = 1, kw = 1, stride = 1, padding = 0;
  // B [n, kh·kw·channels], rows ldb apart (a weight [Cout, kh, kw, Cin] is dense: ldb = kh·kw·Cin).
  const void* b = nullptr;
  int64_t ldb = 0;
  BatchStrides b_batch;
  // C [m, n], rows ldc apart; residual (may alias C) has C's layout; bias [n].
  void* c = nullptr;
  int64_t ldc = 0;
  BatchStrides c_batch;
  const void* bias = nullptr;
  const void* residual = nullptr;
  float alpha = 1.0f;
  GemmGate gate = GemmGate::kNone;
  // Problems that differ in padding, and C's rows in groups: what a 3x3 convolution of a nearest-2x
  // upsampled image computed as its four output phases needs (upsample_conv_gemm). Problem (o, i) of the
  // batch is padded o · padding_batch_step fewer rows at the top and i · padding_batch_step fewer columns
  // at the left; C's rows come in groups of c_group_rows (0: one group), groups c_group_stride elements
  // apart, the rows of a group ldc apart. Such a problem may name the 3x3 weights its phases were made
  // from [n, 3, 3, channels] (upsampled_conv_weights): the `unfused` candidate then upsamples A into
  // scratch and runs that convolution as it is, the vendor libraries among its candidates.
  int padding_batch_step = 0;
  int64_t c_group_rows = 0, c_group_stride = 0;
  const void* upsampled_conv_weights = nullptr;

  int64_t m() const { return images * out_height * out_width; }
  int64_t c_columns() const { return gate == GemmGate::kNone ? n : n / 2; }  // of C
  int64_t k() const { return int64_t(kh) * kw * channels; }
  // Where C's row `row` starts, in elements from the problem's C.
  int64_t c_row_offset(int64_t row) const {
    return c_group_rows == 0 ? row * ldc : row / c_group_rows * c_group_stride + row % c_group_rows * ldc;
  }
};

// conv2d's problem: x [N, H, W, Cin] convolved with w [Cout, kh, kw, Cin] into out [N, Ho, Wo, Cout]
// (shapes as ops::conv2d checked them), bias and residual optional.
GemmProblem conv_gemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      ops::Conv2dParams p, const Tensor& out);

// conv2d (3x3, padding 1) of the nearest-2x upsample of x [N, H, W, Cin] into out [N, 2H, 2W, Cout] as
// its four output phases: phases [2, 2, Cout, 2, 2, Cin] (ops::upsample_conv2d_phases) are 2x2 kernels
// over x itself, problem (dy, dx) of a 2 x 2 batch computes the output pixels (2y + dy, 2x + dx). 16 of
// the 36 multiply-adds the convolution of the upsampled image takes per input pixel, and the upsampled
// image never exists. w [Cout, 3, 3, Cin], the weights the phases came from, for the unfused candidate.
GemmProblem upsample_conv_gemm(const Tensor& x, const Tensor& phases, const Tensor& w, const Tensor* bias,
                               const Tensor& out);

// The dense product C = alpha · A · Bᵀ with A [m, k] (rows lda apart) as the 1x1 convolution it equals.
GemmProblem dense_gemm(DType dtype, const Device& device, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                       const void* b, int64_t ldb, void* c, int64_t ldc);

// Whether p is one dense product of f16/bf16 rows a multiple of 16 bytes long and apart (a 1x1, stride-1,
// unpadded "convolution" of a one-pixel-high image, no batch): what the BLAS-style libraries take.
inline bool is_dense_product(const GemmProblem& p) {
  return (p.dtype == DType::kF16 || p.dtype == DType::kBF16) && p.outer * p.inner == 1 &&
         p.c_group_rows == 0 && p.kh == 1 && p.kw == 1 && p.stride == 1 && p.padding == 0 && p.images == 1 &&
         p.height == 1 && p.out_height == 1 && p.out_width == p.width && p.channels % 8 == 0 &&
         p.pixel_stride % 8 == 0 && p.ldb % 8 == 0 && p.ldc % 8 == 0 && p.n % 8 == 0;
}

// Whether p is one plain NHWC convolution of f16/bf16: no batch of problems, dense pixels and weights,
// a square kernel, symmetric padding (the output size says whether there is extra padding at the end),
// C apart from nothing but its own rows, channels a multiple of 8 and 32-bit sizes: what the DNN
// libraries' convolution APIs take.
inline bool is_plain_convolution(const GemmProblem& p) {
  const auto out = [&](int64_t in) { return (in + 2 * p.padding - p.kh) / p.stride + 1; };
  return (p.dtype == DType::kF16 || p.dtype == DType::kBF16) && p.outer * p.inner == 1 &&
         p.c_group_rows == 0 && p.pixel_stride == p.channels && p.ldb == int64_t(p.kh) * p.kw * p.channels &&
         p.ldc == p.n && p.kh == p.kw && out(p.height) == p.out_height && out(p.width) == p.out_width &&
         p.alpha == 1.0f && p.channels % 8 == 0 && p.n % 8 == 0 &&
         p.images * p.height * p.width * p.channels < (int64_t(1) << 31) && p.m() * p.n < (int64_t(1) << 31);
}

// Runs p with the candidate the autotuner finds fastest for its shape.
void gemm(const GemmProblem& p, KernelPath path = KernelPath::kTuned);
// The candidates that can run p on its device on `path` (matrix_unit.h): our tile shapes, and with
// KernelPath::kTuned the vendor libraries that were built in and take the problem ("cudnn",
// "cudnn-graph-<rank>" and "cudnn-graph-rtc-<rank>", offered by rank before cuDNN is asked, so a rank it
// does not fill throws kUnsupported when run; "cublaslt"; "miopen-<solution id>", "hipblaslt",
// "rocblas"), and one of them by name: for tests and benchmarks.
std::vector<std::string> gemm_candidates(const GemmProblem& p, KernelPath path = KernelPath::kTuned);
void gemm_with(const GemmProblem& p, const std::string& candidate, KernelPath path = KernelPath::kTuned);

// out [outer·inner problems][cols][rows] = in [..][rows][cols] transposed: rows `ld_in` apart in the input,
// inputs of problem (o, i) at o·in_batch.outer + i·in_batch.inner; the output dense. 16-bit elements.
void transpose_16bit(const void* in, int64_t ld_in, BatchStrides in_batch, int64_t outer, int64_t inner, int64_t rows,
                     int64_t cols, void* out, const Device& device);

}  // namespace hd::gpu
