// A dense product through hipBLASLt, mirroring the cuBLASLt adapter (nvidia/cublaslt_gemm.cpp) one for
// one: our C[m, n] = A[m, k] · B[n, k]ᵀ in row-major storage is, read column-major, Cᵀ[n, m] = B · Aᵀ:
// hipBLASLt's D = op(W) · X with W = B (transposed) and X = A, bias along D's rows (our columns) in the
// epilogue, and the residual as C with beta = 1. f32 accumulation and scale; the algorithm is
// hipBLASLt's first heuristic choice for the shape, remembered per configuration. A shape it has no
// algorithm for is not its candidate (rocBLAS is offered instead: rocblas_gemm.cpp). Compiled and linked in
// CI; never run (there is no AMD GPU here).
#include <hip/hip_runtime_api.h>
#include <hipblaslt/hipblaslt.h>

#include <map>
#include <mutex>
#include <optional>
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

// The operation, layouts and preference of one problem, released on scope exit.
struct Descriptors {
  hipblasLtMatmulDesc_t op = nullptr;
  hipblasLtMatrixLayout_t w = nullptr, x = nullptr, c = nullptr;
  hipblasLtMatmulPreference_t preference = nullptr;

  explicit Descriptors(const GemmProblem& p) {
    const hipDataType t = p.dtype == DType::kBF16 ? HIP_R_16BF : HIP_R_16F;
    const uint64_t m = uint64_t(p.n), n = uint64_t(p.m()), k = uint64_t(p.k());
    check(hipblasLtMatmulDescCreate(&op, HIPBLAS_COMPUTE_32F, HIP_R_32F), "creating the operation");
    const hipblasOperation_t transpose = HIPBLAS_OP_T, none = HIPBLAS_OP_N;
    check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose), "transa");
    check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none), "transb");
    if (p.bias != nullptr) {
      const hipblasLtEpilogue_t epilogue = HIPBLASLT_EPILOGUE_BIAS;
      check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            "epilogue");
      check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof p.bias), "bias");
      check(hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t), "bias type");
    }
    check(hipblasLtMatrixLayoutCreate(&w, t, k, m, int64_t(p.ldb)), "weight layout");  // [k x m], op T
    check(hipblasLtMatrixLayoutCreate(&x, t, k, n, int64_t(p.pixel_stride)), "input layout");
    check(hipblasLtMatrixLayoutCreate(&c, t, m, n, int64_t(p.ldc)), "output layout");
    check(hipblasLtMatmulPreferenceCreate(&preference), "preference");
    check(hipblasLtMatmulPreferenceSetAttribute(preference, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                sizeof kWorkspace), "workspace size");
  }
  ~Descriptors() {
    if (preference) hipblasLtMatmulPreferenceDestroy(preference);
    if (c) hipblasLtMatrixLayoutDestroy(c);
    if (x) hipblasLtMatrixLayoutDestroy(x);
    if (w) hipblasLtMatrixLayoutDestroy(w);
    if (op) hipblasLtMatmulDescDestroy(op);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// hipBLASLt's first heuristic choice for the configuration, asked once and remembered; none when the
// library has no kernel for this architecture (Debian's ships none for gfx942).
std::optional<hipblasLtMatmulAlgo_t> algorithm_for(const GemmProblem& p) {
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;
  static std::mutex mutex;
  static auto* known = new std::map<Key, std::optional<hipblasLtMatmulAlgo_t>>;
  const Key key{p.device.index, int(p.dtype), p.n, p.m(), p.k(), p.ldb, p.pixel_stride, p.ldc, p.bias != nullptr,
                p.residual != nullptr};
  {
    const std::lock_guard lock(mutex);
    if (const auto it = known->find(key); it != known->end()) return it->second;
  }
  // A failing query is "no algorithm" too: hipBLASLt answers an architecture it has no kernels for with
  // an error status rather than zero results, and that, or a descriptor it refuses, must leave the
  // product to the other candidates rather than stop a generation.
  std::optional<hipblasLtMatmulAlgo_t> algo;
  try {
    const Descriptors d(p);
    hipblasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    const hipblasStatus_t status = hipblasLtMatmulAlgoGetHeuristic(state_for(p.device).handle, d.op, d.w, d.x, d.c,
                                                                   d.c, d.preference, 1, &heuristic, &found);
    if (status == HIPBLAS_STATUS_SUCCESS && found > 0) algo = heuristic.algo;
  } catch (const Error&) {
    algo.reset();
  }
  const std::lock_guard lock(mutex);
  return known->emplace(key, algo).first->second;
}

}  // namespace

void hipblaslt_warm_up(int device) {
  if (hipSetDevice(device) != hipSuccess) return;  // the products' own calls will say why
  (void)state_for(Device{DeviceType::kHip, device});
}

bool hipblaslt_can_run(const GemmProblem& p) { return is_dense_product(p) && algorithm_for(p).has_value(); }

void hipblaslt_gemm(const GemmProblem& p, void* c) {
  const std::optional<hipblasLtMatmulAlgo_t> algo = algorithm_for(p);
  HD_CHECK_KIND(algo.has_value(), ErrorKind::kUnsupported, "hipBLASLt: no algorithm for a ", p.m(), " x ", p.n,
                " x ", p.k(), " product on this GPU");
  DeviceState& s = state_for(p.device);
  const Descriptors d(p);
  const float alpha = p.alpha, beta = p.residual != nullptr ? 1.0f : 0.0f;
  const void* c_in = p.residual != nullptr ? p.residual : c;
  check(hipblasLtMatmul(s.handle, d.op, &alpha, p.b, d.w, p.a, d.x, &beta, c_in, d.c, c, d.c, &*algo,
                        s.workspace.data(), kWorkspace, static_cast<hipStream_t>(native_stream(p.device))),
        "hipblasLtMatmul");
}

}  // namespace hd::gpu
