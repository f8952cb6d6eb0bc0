// A dense product through hipBLASLt, mirroring the cuBLASLt adapter (nvidia/cublaslt_gemm.cpp) one for
// one: our C[m, n] = A[m, k] · B[n, k]ᵀ in row-major storage is, read column-major, Cᵀ[n, m] = B · Aᵀ:
// hipBLASLt's D = op(W) · X with W = B (transposed) and X = A, bias along D's rows (our columns) in the
// epilogue, and the residual as C with beta = 1. f32 accumulation and scale; the algorithm is
// hipBLASLt's first heuristic choice for the shape, remembered per configuration. Compiled and linked in
// CI; never run (there is no AMD GPU here).
#include <hipblaslt/hipblaslt.h>

#include <map>
#include <mutex>
#include <tuple>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/amd/vendor_gemm.h"
#include "ops/gpu/gpu_runtime.h"

namespace hd::gpu {

namespace {

void check(hipblasStatus_t status, const char* what) {
  if (status != HIPBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::kRuntime, str_cat("hipBLASLt: ", what, " failed: status ", int(status)));
}

constexpr uint64_t kWorkspace = uint64_t(32) << 20;  // as for cuBLASLt: room for its split-K kernels

struct DeviceState {
  hipblasLtHandle_t handle = nullptr;
  Buffer workspace;
};

DeviceState& state_for(const Device& device) {
  static std::mutex mutex;
  static auto* states = new std::map<int, DeviceState>;  // never destroyed: process lifetime
  const std::lock_guard lock(mutex);
  DeviceState& s = (*states)[device.index];
  if (s.handle == nullptr) {
    check(hipblasLtCreate(&s.handle), "hipblasLtCreate");
    s.workspace = Buffer(device, kWorkspace);
  }
  return s;
}

}  // namespace

bool hipblaslt_can_run(const GemmProblem& p) { return is_dense_product(p); }

void hipblaslt_gemm(const GemmProblem& p, void* c) {
  DeviceState& s = state_for(p.device);
  const hipDataType t = p.dtype == DType::kBF16 ? HIP_R_16BF : HIP_R_16F;
  const uint64_t m = uint64_t(p.n), n = uint64_t(p.m()), k = uint64_t(p.k());
  hipblasLtMatmulDesc_t op = nullptr;
  hipblasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, c_layout = nullptr;
  hipblasLtMatmulPreference_t preference = nullptr;
  // Released however this returns.
  struct Release {
    hipblasLtMatmulDesc_t& op;
    hipblasLtMatrixLayout_t &w, &x, &c;
    hipblasLtMatmulPreference_t& preference;
    ~Release() {
      if (preference) hipblasLtMatmulPreferenceDestroy(preference);
      if (c) hipblasLtMatrixLayoutDestroy(c);
      if (x) hipblasLtMatrixLayoutDestroy(x);
      if (w) hipblasLtMatrixLayoutDestroy(w);
      if (op) hipblasLtMatmulDescDestroy(op);
    }
  } release{op, w_layout, x_layout, c_layout, preference};

  check(hipblasLtMatmulDescCreate(&op, HIPBLAS_COMPUTE_32F, HIP_R_32F), "creating the operation");
  const hipblasOperation_t transpose = HIPBLAS_OP_T, none = HIPBLAS_OP_N;
  check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose), "transa");
  check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none), "transb");
  if (p.bias != nullptr) {
    const hipblasLtEpilogue_t epilogue = HIPBLASLT_EPILOGUE_BIAS;
    check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "epilogue");
    check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof p.bias), "bias");
    check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t), "bias type");
  }
  check(hipblasLtMatrixLayoutCreate(&w_layout, t, k, m, int64_t(p.ldb)), "weight layout");  // [k x m], op T
  check(hipblasLtMatrixLayoutCreate(&x_layout, t, k, n, int64_t(p.pixel_stride)), "input layout");
  check(hipblasLtMatrixLayoutCreate(&c_layout, t, m, n, int64_t(p.ldc)), "output layout");
  check(hipblasLtMatmulPreferenceCreate(&preference), "preference");
  check(hipblasLtMatmulPreferenceSetAttribute(preference, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                              sizeof kWorkspace), "workspace size");
  using Key = std::tuple<int, int, uint64_t, uint64_t, uint64_t, int64_t, int64_t, int64_t, bool, bool>;
  static std::mutex mutex;
  static auto* algorithms = new std::map<Key, hipblasLtMatmulAlgo_t>;
  const Key key{p.device.index, int(p.dtype), m, n, k, p.ldb, p.pixel_stride, p.ldc, p.bias != nullptr,
                p.residual != nullptr};
  hipblasLtMatmulAlgo_t algo{};
  bool known = false;
  {
    const std::lock_guard lock(mutex);
    if (const auto it = algorithms->find(key); it != algorithms->end()) algo = it->second, known = true;
  }
  if (!known) {
    hipblasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    check(hipblasLtMatmulAlgoGetHeuristic(s.handle, op, w_layout, x_layout, c_layout, c_layout, preference, 1,
                                          &heuristic, &found), "choosing an algorithm");
    // No kernel for this architecture (Debian's hipBLASLt ships none for gfx942) is "no algorithm".
    HD_CHECK_KIND(found > 0, ErrorKind::kUnsupported, "hipBLASLt: no algorithm for a ", p.m(), " x ", p.n, " x ", k,
                  " product");
    algo = heuristic.algo;
    const std::lock_guard lock(mutex);
    algorithms->emplace(key, algo);
  }
  const float alpha = p.alpha, beta = p.residual != nullptr ? 1.0f : 0.0f;
  const void* c_in = p.residual != nullptr ? p.residual : c;
  check(hipblasLtMatmul(s.handle, op, &alpha, p.b, w_layout, p.a, x_layout, &beta, c_in, c_layout, c, c_layout, &algo,
                        s.workspace.data(), kWorkspace, static_cast<hipStream_t>(native_stream(p.device))),
        "hipblasLtMatmul");
}

}  // namespace hd::gpu
