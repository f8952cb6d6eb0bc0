// A dense product through cuBLASLt. Our C[m, n] = A[m, k] · B[n, k]ᵀ in row-major storage is, read
// column-major, Cᵀ[n, m] = B · Aᵀ: cuBLASLt's D = op(W) · X with W = B (transposed) and X = A, bias along
// D's rows (our columns) in the epilogue, and the residual as C with beta = 1. f32 accumulation and
// scale; the algorithm is cuBLASLt's first heuristic choice for the shape (remembered in the tuning cache's
// notes for later processes).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/buffer.h"
#include "core/error.h"
#include "core/startup_trace.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/nvidia/vendor_gemm.h"
#include "ops/tuning/autotuner.h"

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
    const StartupSpan span("cublasLtCreate");
    check(cublasLtCreate(&s.handle), "cublasLtCreate");
    s.workspace = Buffer(device, kWorkspace);
  }
  return s;
}

static_assert(sizeof(cublasLtMatmulAlgo_t) == 8 * sizeof(uint64_t), "cublasLtMatmulAlgo_t is 8 words");

std::string note_of(const cublasLtMatmulAlgo_t& algo) {
  std::string note;
  for (int i = 0; i < 8; ++i) {
    char word[24];
    std::snprintf(word, sizeof word, "%s%016llx", i ? " " : "", static_cast<unsigned long long>(algo.data[i]));
    note += word;
  }
  return note;
}

// False when `note` is empty or not note_of's form.
bool algorithm_from_note(const std::string& note, cublasLtMatmulAlgo_t* algo) {
  unsigned long long w[8];
  int used = 0;
  if (std::sscanf(note.c_str(), "%llx %llx %llx %llx %llx %llx %llx %llx%n", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5],
                  &w[6], &w[7], &used) != 8 ||
      size_t(used) != note.size())
    return false;
  for (int i = 0; i < 8; ++i) algo->data[i] = w[i];
  return true;
}

// The descriptors of p's product, released on scope exit.
struct Matmul {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  const GemmProblem& p;

  explicit Matmul(const GemmProblem& problem) : p(problem) {
    const cudaDataType_t t = p.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    const uint64_t m = uint64_t(p.n), n = uint64_t(p.m()), k = uint64_t(p.k());
    try {
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
      check(cublasLtMatrixLayoutCreate(&w, t, k, m, int64_t(p.ldb)), "weight layout");  // [k x m], op T
      check(cublasLtMatrixLayoutCreate(&x, t, k, n, int64_t(p.pixel_stride)), "input layout");
      check(cublasLtMatrixLayoutCreate(&c, t, m, n, int64_t(p.ldc)), "output layout");
      check(cublasLtMatmulPreferenceCreate(&preference), "preference");
      check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                 sizeof kWorkspace), "workspace size");
    } catch (...) {
      release();
      throw;
    }
  }
  ~Matmul() { release(); }
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // The heuristics' first choice.
  cublasLtMatmulAlgo_t first_algorithm(cublasLtHandle_t handle) const {
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(handle, op, w, x, c, c, preference, 1, &heuristic, &found),
          "choosing an algorithm");
    HD_CHECK_KIND(found > 0, ErrorKind::kUnsupported, "cuBLASLt: no algorithm for a ", p.m(), " x ", p.n, " x ", p.k(),
                  " product");
    return heuristic.algo;
  }

 private:
  void release() noexcept {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

void cublaslt_warm_up(int device) {
  // A handle of its own (the device's may be in use by then) and one small product's heuristic: cuBLASLt
  // loads what its first heuristic needs once per process.
  if (cudaSetDevice(device) != cudaSuccess) return;  // the product's own calls will say why
  cublasLtHandle_t handle = nullptr;
  check(cublasLtCreate(&handle), "cublasLtCreate");
  try {
    const GemmProblem p = dense_gemm(DType::kF16, Device{DeviceType::kCuda, device}, 64, 64, 64, nullptr, 64, nullptr,
                                     64, nullptr, 64);
    (void)Matmul(p).first_algorithm(handle);
  } catch (...) {
    cublasLtDestroy(handle);
    throw;
  }
  cublasLtDestroy(handle);
}

bool cublaslt_can_run(const GemmProblem& p) { return is_dense_product(p); }

void cublaslt_gemm(const GemmProblem& p, void* c) {
  DeviceState& s = state_for(p.device);
  const Matmul d(p);
  const uint64_t m = uint64_t(p.n), n = uint64_t(p.m()), k = uint64_t(p.k());
  // The heuristic costs 0.2-2 ms (its first call 0.1 s, cuBLASLt starting up): asked once per
  // configuration, remembered.
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
    // cuBLASLt's algorithm structure may be kept and used again with the same cuBLASLt version: an
    // earlier process's answer comes from the tuning cache's notes, as its 8 words in hexadecimal.
    const std::string note_key = str_cat("cublaslt ", cublasLtGetVersion(), " algorithm on ", device_name(p.device.index),
                                         ": ", dtype_name(p.dtype), " ", m, "x", n, "x", k, " ld ", p.ldb, " ",
                                         p.pixel_stride, " ", p.ldc, p.bias ? " bias" : "", p.residual ? " residual" : "");
    if (!algorithm_from_note(ops::library_note(note_key).value, &algo)) {
      const StartupSpan span(startup_trace_on() ? "cuBLASLt heuristic" : "");
      algo = d.first_algorithm(s.handle);
      ops::remember_library_note(note_key, note_of(algo));
    }
    const std::lock_guard lock(mutex);
    algorithms->emplace(key, algo);
  }
  const float alpha = p.alpha, beta = p.residual != nullptr ? 1.0f : 0.0f;
  const void* c_in = p.residual != nullptr ? p.residual : c;
  check(cublasLtMatmul(s.handle, d.op, &alpha, p.b, d.w, p.a, d.x, &beta, c_in, d.c, c, d.c,
                       &algo, s.workspace.data(), kWorkspace, static_cast<cudaStream_t>(native_stream(p.device))),
        "cublasLtMatmul");
}

}  // namespace hd::gpu
