// A convolution problem through cuDNN's convolution API: NHWC f16/bf16 tensors, our [Cout, kh, kw, Cin]
// weights as cuDNN's KRSC filter, f32 accumulation. The algorithm is the first deterministic one cuDNN's
// heuristics rank (cudnnGetConvolutionForwardAlgorithm_v7), asked once per shape and remembered (in the
// tuning cache's notes too, for later processes). Residual and bias are applied
// as cuDNN composes them: y = conv(x) + 1·y (y first holding the residual), then y += bias.
#include <cudnn.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "core/startup_trace.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/nvidia/cudnn_common.h"
#include "ops/gpu/nvidia/vendor_gemm.h"
#include "ops/tuning/autotuner.h"

namespace hd::gpu {

namespace {

constexpr auto check = cudnn_check;

cudnnDataType_t data_type(DType t) { return t == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

// Descriptors of one problem, released on scope exit.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  explicit Descriptors(const GemmProblem& p) {
    const cudnnDataType_t t = data_type(p.dtype);
    check(cudnnCreateTensorDescriptor(&x), "create x");
    check(cudnnCreateTensorDescriptor(&y), "create y");
    check(cudnnCreateTensorDescriptor(&bias), "create bias");
    check(cudnnCreateFilterDescriptor(&w), "create w");
    check(cudnnCreateConvolutionDescriptor(&conv), "create conv");
    check(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, t, int(p.images), int(p.channels), int(p.height),
                                     int(p.width)), "describe x");
    check(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, t, int(p.images), int(p.n), int(p.out_height),
                                     int(p.out_width)), "describe y");
    check(cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NHWC, t, 1, int(p.n), 1, 1), "describe bias");
    check(cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NHWC, int(p.n), int(p.channels), p.kh, p.kw), "describe w");
    check(cudnnSetConvolution2dDescriptor(conv, p.padding, p.padding, p.stride, p.stride, 1, 1,
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), "describe conv");
    check(cudnnSetConvolutionMathType(conv, CUDNN_TENSOR_OP_MATH), "tensor-op math");
  }
  ~Descriptors() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(bias);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// cuDNN's heuristics' ranking for d's problem through `handle`; returns how many it ranked.
int rank_algorithms(cudnnHandle_t handle, const Descriptors& d,
                    cudnnConvolutionFwdAlgoPerf_t (&perf)[CUDNN_CONVOLUTION_FWD_ALGO_COUNT]) {
  const StartupSpan span(startup_trace_on() ? "cuDNN legacy heuristics" : "");
  int count = 0;
  check(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                               perf),
        "asking the heuristics for an algorithm");
  return count;
}

struct Algorithm {
  cudnnConvolutionFwdAlgo_t algo;
  size_t workspace;
};

using ShapeKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int>;

Algorithm algorithm_for(const GemmProblem& p, const Descriptors& d) {
  static std::mutex mutex;
  static std::map<ShapeKey, Algorithm> found;
  const ShapeKey key{p.device.index, int(p.dtype), p.images, p.height, p.width, p.channels, p.n, p.kh, p.kw, p.stride,
                     p.padding};
  {
    const std::lock_guard lock(mutex);
    if (const auto it = found.find(key); it != found.end()) return it->second;
  }
  // What the heuristics answered in an earlier process, from the tuning cache: "<algorithm> <workspace>".
  const std::string note_key =
      str_cat("cudnn ", cudnnGetVersion(), " convolution algorithm on ", device_name(p.device.index), ": ",
              dtype_name(p.dtype), " ", p.images, "x", p.height, "x", p.width, "x", p.channels, " kernel ", p.kh, "x",
              p.kw, " stride ", p.stride, " padding ", p.padding, " -> ", p.n);
  if (const std::string note = ops::library_note(note_key).value; !note.empty()) {
    int algo = -1;
    size_t workspace = 0;
    if (std::sscanf(note.c_str(), "%d %zu", &algo, &workspace) == 2 && algo >= 0 &&
        algo < CUDNN_CONVOLUTION_FWD_ALGO_COUNT) {
      const Algorithm a{cudnnConvolutionFwdAlgo_t(algo), workspace};
      const std::lock_guard lock(mutex);
      found.emplace(key, a);
      return a;
    }
  }
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  // cuDNN's heuristics, not cudnnFind: the autotuner times this candidate beside the others, and a
  // process whose tuning cache already chose it must not time every algorithm again on first use.
  const int count = rank_algorithms(cudnn_handle(p.device.index), d, perf);
  constexpr size_t kMaxWorkspace = size_t(256) << 20;
  for (int i = 0; i < count; ++i) {  // likely fastest first
    // Deterministic algorithms only: the same seed must give the same picture on every run.
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace ||
        perf[i].determinism != CUDNN_DETERMINISTIC)
      continue;
    const Algorithm a{perf[i].algo, perf[i].memory};
    ops::remember_library_note(note_key, str_cat(int(a.algo), " ", a.workspace));
    const std::lock_guard lock(mutex);
    found.emplace(key, a);
    return a;
  }
  throw Error(ErrorKind::kUnsupported, "cuDNN: no algorithm runs this convolution");
}

}  // namespace

void cudnn_legacy_warm_up(cudnnHandle_t handle, const GemmProblem& p) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  (void)rank_algorithms(handle, Descriptors(p), perf);
}

bool cudnn_can_run(const GemmProblem& p) { return is_plain_convolution(p); }

void cudnn_conv(const GemmProblem& p, void* c) {
  const Descriptors d(p);
  const Algorithm a = algorithm_for(p, d);
  void* const workspace = a.workspace > 0 ? scratch(p.device, a.workspace, ScratchSlot::kGemm) : nullptr;  // core/scratch.h
  cudnnHandle_t h = cudnn_handle(p.device.index);
  const auto stream = static_cast<cudaStream_t>(native_stream(p.device));
  check(cudnnSetStream(h, stream), "cudnnSetStream");
  const size_t c_bytes = size_t(p.m() * p.n) * 2;
  if (p.residual != nullptr && p.residual != c) {
    if (cudaMemcpyAsync(c, p.residual, c_bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
      throw Error(ErrorKind::kRuntime, "cuDNN convolution: copying the residual failed");
  }
  const float one = 1.0f, beta = p.residual != nullptr ? 1.0f : 0.0f;
  check(cudnnConvolutionForward(h, &one, d.x, p.a, d.w, p.b, d.conv, a.algo, workspace, a.workspace, &beta, d.y, c),
        "cudnnConvolutionForward");
  if (p.bias != nullptr) check(cudnnAddTensor(h, &one, d.bias, p.bias, &one, d.y, c), "adding the bias");
}

}  // namespace hd::gpu
