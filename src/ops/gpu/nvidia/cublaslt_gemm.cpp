// A dense product through cuBLASLt. Our C[m, n] = A[m, k] · B[n, k]ᵀ in row-major storage is, read
// column-major, Cᵀ[n, m] = B · Aᵀ: cuBLASLt's D = op(W) · X with W = B (transposed) and X = A, bias along
// D's rows (our columns) in the epilogue, and the residual as C with beta = 1. f32 accumulation and
// scale; the algorithm is cuBLASLt's first heuristic choice for the shape.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/nvidia/vendor_gemm.h"

namespace hd::gpu {

namespace {

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::kRuntime, str_cat("cuBLASLt: ", what, " failed: ", cublasLtGetStatusString(status)));
}

constexpr size_t kWorkspace = size_t(32) << 20;  // what cuBLAS recommends on Hopper

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  Buffer workspace;
};

DeviceState& state_for(const Device& device) {
  static std::mutex mutex;
  static auto* states = new std::map<int, DeviceState>;  // never destroyed: process lifetime
  const std::lock_guard lock(mutex);
  DeviceState& s = (*states)[device.index];
  if (s.handle == nullptr) {
    check(cublasLtCreate(&s.handle), "cublasLtCreate");
    s.workspace = Buffer(device, kWorkspace);
  }
  return s;
}

}  // namespace

bool cublaslt_can_run(const GemmProblem& p) { return is_dense_product(p); }

void cublaslt_gemm(const GemmProblem& p, void* c) {
  DeviceState& s = state_for(p.device);
  const cudaDataType_t t = p.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const uint64_t m = uint64_t(p.n), n = uint64_t(p.m()), k = uint64_t(p.k());
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, c_layout = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  // Released however this returns.
  struct Release {
    cublasLtMatmulDesc_t& op;
    cublasLtMatrixLayout_t &w, &x, &c;
    cublasLtMatmulPreference_t& preference;
    ~Release() {
      if (preference) cublasLtMatmulPreferenceDestroy(preference);
      if (c) cublasLtMatrixLayoutDestroy(c);
      if (x) cublasLtMatrixLayoutDestroy(x);
      if (w) cublasLtMatrixLayoutDestroy(w);
      if (op) cublasLtMatmulDescDestroy(op);
    }
  } release{op, w_layout, x_layout, c_layout, preference};

  check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "creating the operation");
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose), "transa");
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none), "transb");
  if (p.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "epilogue");
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof p.bias), "bias");
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t), "bias type");
  }
  check(cublasLtMatrixLayoutCreate(&w_layout, t, k, m, int64_t(p.ldb)), "weight layout");     // [k x m], op T
  check(cublasLtMatrixLayoutCreate(&x_layout, t, k, n, int64_t(p.pixel_stride)), "input layout");
  check(cublasLtMatrixLayoutCreate(&c_layout, t, m, n, int64_t(p.ldc)), "output layout");
  check(cublasLtMatmulPreferenceCreate(&preference), "preference");
  check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                             sizeof kWorkspace), "workspace size");
  // The heuristic costs tens of microseconds: asked once per configuration, remembered.
  using Key = std::tuple<int, int, uint64_t, uint64_t, uint64_t, int64_t, int64_t, int64_t, bool, bool>;
  static std::mutex mutex;
  static auto* algorithms = new std::map<Key, cublasLtMatmulAlgo_t>;
  const Key key{p.device.index, int(p.dtype), m, n, k, p.ldb, p.pixel_stride, p.ldc, p.bias != nullptr,
                p.residual != nullptr};
  cublasLtMatmulAlgo_t algo{};
  bool known = false;
  {
    const std::lock_guard lock(mutex);
    if (const auto it = algorithms->find(key); it != algorithms->end()) algo = it->second, known = true;
  }
  if (!known) {
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(s.handle, op, w_layout, x_layout, c_layout, c_layout, preference, 1,
                                         &heuristic, &found), "choosing an algorithm");
    HD_CHECK_KIND(found > 0, ErrorKind::kUnsupported, "cuBLASLt: no algorithm for a ", p.m(), " x ", p.n, " x ", k,
                  " product");
    algo = heuristic.algo;
    const std::lock_guard lock(mutex);
    algorithms->emplace(key, algo);
  }
  const float alpha = p.alpha, beta = p.residual != nullptr ? 1.0f : 0.0f;
  const void* c_in = p.residual != nullptr ? p.residual : c;
  check(cublasLtMatmul(s.handle, op, &alpha, p.b, w_layout, p.a, x_layout, &beta, c_in, c_layout, c, c_layout,
                       &algo, s.workspace.data(), kWorkspace, static_cast<cudaStream_t>(native_stream(p.device))),
        "cublasLtMatmul");
}

}  // namespace hd::gpu
