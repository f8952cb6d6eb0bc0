// Matrix products on the CPU through OpenBLAS's sgemm.
#include <cblas.h>

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

void sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // OpenBLAS takes 32-bit ints; every SD matrix is far below that, but a huge image could reach it.
  constexpr int64_t kMax = int64_t(1) << 31;
  HD_CHECK_KIND(m < kMax && n < kMax && k < kMax && lda < kMax && ldb < kMax && ldc < kMax,
                ErrorKind::kUnsupported, "matrix product of ", m, "x", k, " by ", k, "x", n,
                " exceeds BLAS's 32-bit sizes");
  if (k == 0) {  // BLAS leaves C untouched for k == 0 only when beta == 1; make it exact for any beta
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
              int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, const Tensor& out) {
  const int64_t n = w.dim(0), k = w.dim(1);
  const int64_t m = n == 0 ? 0 : out.numel() / n;
  float* y = out.ptr<float>();
  float beta = 0.0f;
  if (bias != nullptr || residual != nullptr) {
    // Start from residual + bias and let the GEMM accumulate onto it (the residual may be y itself:
    // each element is read before it is written).
    const float* b = bias != nullptr ? bias->ptr<float>() : nullptr;
    const float* r = residual != nullptr ? residual->ptr<float>() : nullptr;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = (r != nullptr ? r[i * n + j] : 0.0f) + (b != nullptr ? b[j] : 0.0f);
    beta = 1.0f;
  }
  sgemm(false, true, m, n, k, 1.0f, x.ptr<float>(), k, w.ptr<float>(), k, beta, y, n);
}

void batched_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, float alpha,
                    const Tensor& out) {
  const int64_t batch = out.dim(0), m = out.dim(1), n = out.dim(2);
  const int64_t k = transpose_a ? a.dim(1) : a.dim(2);
  const int64_t lda = a.dim(2), ldb = b.dim(2);
  for (int64_t i = 0; i < batch; ++i) {
    sgemm(transpose_a, transpose_b, m, n, k, alpha, a.ptr<float>() + i * a.dim(1) * a.dim(2), lda,
          b.ptr<float>() + i * b.dim(1) * b.dim(2), ldb, 0.0f, out.ptr<float>() + i * m * n, n);
  }
}

}  // namespace hd::ops::cpu
