// A dense product through rocBLAS, for the targets where hipBLASLt has no kernel (Debian's hipBLASLt ships
// none for gfx942, where rocBLAS has tuned ones). The product is mapped as in the hipBLASLt and cuBLASLt
// adapters: our C[m, n] = A[m, k] · B[n, k]ᵀ in row-major storage is, read column-major,
// Cᵀ[n, m] = B · Aᵀ: rocblas_gemm_ex with op(B) = transposed and A as it is, the residual as its C with
// beta = 1 (D = c), f32 compute and scale.
//
// rocBLAS has no bias epilogue: the bias is a second, rank-1 product, Cᵀ += bias[n × 1] · ones[1 × m],
// with a row of ones kept per device (so C is rounded twice, as cuDNN's adapter rounds conv and bias
// apart). Compiled and linked in CI; never run (there is no AMD GPU here).
#include <hip/hip_runtime_api.h>
#include <rocblas/rocblas.h>

#include <map>
#include <mutex>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/amd/vendor_gemm.h"
#include "ops/gpu/gpu_runtime.h"

namespace hd::gpu {

namespace {

void check(rocblas_status status, const char* what) {
  if (status != rocblas_status_success)
    throw Error(ErrorKind::kRuntime, str_cat("rocBLAS: ", what, " failed: ", rocblas_status_to_string(status)));
}

// A row of ones for the bias's rank-1 product, grown as m grows.
struct Ones {
  Buffer buffer;
  int64_t count = 0;
};

struct DeviceState {
  rocblas_handle handle = nullptr;
  Ones f16, bf16;
};

DeviceState& state_for(const Device& device) {
  static std::mutex mutex;
  static auto* states = new std::map<int, DeviceState>;  // never destroyed: process lifetime
  const std::lock_guard lock(mutex);
  DeviceState& s = (*states)[device.index];
  if (s.handle == nullptr) check(rocblas_create_handle(&s.handle), "rocblas_create_handle");
  return s;
}

// At least `count` ones of `dtype` on the device, written on `stream` (ordered before their use there).
const void* ones(DeviceState& s, const Device& device, DType dtype, int64_t count, hipStream_t stream) {
  Ones& o = dtype == DType::kBF16 ? s.bf16 : s.f16;
  if (o.count >= count) return o.buffer.data();
  o.buffer = Buffer(device, size_t(count) * 2);
  const unsigned short one = dtype == DType::kBF16 ? 0x3F80 : 0x3C00;  // 1.0 in bf16 / f16
  if (hipMemsetD16Async(o.buffer.data(), one, size_t(count), stream) != hipSuccess)
    throw Error(ErrorKind::kRuntime, "rocBLAS: writing the bias's row of ones failed");
  o.count = count;
  return o.buffer.data();
}

}  // namespace

void rocblas_warm_up(int device) {
  if (hipSetDevice(device) != hipSuccess) return;  // the products' own calls will say why
  (void)state_for(Device{DeviceType::kHip, device});
}

bool rocblas_can_run(const GemmProblem& p) {
  return is_dense_product(p) && p.n < (int64_t(1) << 31) && p.m() < (int64_t(1) << 31) &&
         p.k() < (int64_t(1) << 31);
}

void rocblas_gemm(const GemmProblem& p, void* c) {
  DeviceState& s = state_for(p.device);
  const auto stream = static_cast<hipStream_t>(native_stream(p.device));
  check(rocblas_set_stream(s.handle, stream), "rocblas_set_stream");
  const rocblas_datatype t = p.dtype == DType::kBF16 ? rocblas_datatype_bf16_r : rocblas_datatype_f16_r;
  const auto m = rocblas_int(p.n), n = rocblas_int(p.m()), k = rocblas_int(p.k());
  const float alpha = p.alpha, beta = p.residual != nullptr ? 1.0f : 0.0f, one = 1.0f;
  const void* c_in = p.residual != nullptr ? p.residual : c;
  check(rocblas_gemm_ex(s.handle, rocblas_operation_transpose, rocblas_operation_none, m, n, k, &alpha, p.b, t,
                        rocblas_int(p.ldb), p.a, t, rocblas_int(p.pixel_stride), &beta, c_in, t, rocblas_int(p.ldc),
                        c, t, rocblas_int(p.ldc), rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0),
        "rocblas_gemm_ex");
  if (p.bias == nullptr) return;
  // Cᵀ[n × m] += bias[n × 1] · ones[1 × m], in place (C and D the same matrix, as rocBLAS allows).
  check(rocblas_gemm_ex(s.handle, rocblas_operation_none, rocblas_operation_none, m, n, 1, &one, p.bias, t, m,
                        ones(s, p.device, p.dtype, n, stream), t, 1, &one, c, t, rocblas_int(p.ldc), c, t,
                        rocblas_int(p.ldc), rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0),
        "adding the bias");
}

}  // namespace hd::gpu
