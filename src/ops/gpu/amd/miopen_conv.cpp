// A convolution problem through MIOpen's immediate mode, mirroring the cuDNN adapter (nvidia/
// cudnn_conv.cpp): NHWC f16/bf16 tensors described as MIOpen's NCHW-ordered sizes with NHWC strides (as
// PyTorch describes channels-last tensors to MIOpen), our [Cout, kh, kw, Cin] weights the same way, f32
// accumulation.
//
// Why immediate mode: MIOpen's Find API benchmarks (and compiles) every applicable solver on a shape's
// first use, the minutes-long stall AMD users know; immediate mode only asks MIOpen's heuristics (or its
// find-db, if one holds the shape) for a ranked list. Our autotuner then times the first few solutions
// itself and keeps the winner's solution id in our tuning cache, so later runs and later ROCm versions
// run it straight away. The descriptors also ask for Fast find mode, so that any Find MIOpen does on its
// own behalf uses its database or heuristics instead of benchmarking; the MIOPEN_FIND_MODE environment
// variable, which overrides it, is left to the user (it would change other MIOpen users in the process,
// PyTorch among them).
//
// Immediate mode has no alpha/beta: y = conv(x). With a bias or a residual the convolution goes to a
// scratch buffer and one miopenOpTensor adds them, rounding once: c = (conv + bias) + 1·c, c first holding
// the residual (as cuDNN's adapter composes conv + 1·y and the bias). Compiled and linked in CI; never run
// (there is no AMD GPU here).
#include <hip/hip_runtime_api.h>
#include <miopen/miopen.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "core/buffer.h"
#include "core/error.h"
#include "ops/gpu/amd/vendor_gemm.h"
#include "ops/gpu/gpu_runtime.h"

namespace hd::gpu {

namespace {

void check(miopenStatus_t status, const char* what) {
  if (status != miopenStatusSuccess)
    throw Error(ErrorKind::kRuntime, str_cat("MIOpen: ", what, " failed: ", miopenGetErrorString(status)));
}

miopenHandle_t handle_for(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, miopenHandle_t>;  // never destroyed: process lifetime
  const std::lock_guard lock(mutex);
  auto it = handles->find(device);
  if (it == handles->end()) {
    miopenHandle_t h = nullptr;
    check(miopenCreate(&h), "miopenCreate");
    it = handles->emplace(device, h).first;
  }
  return it->second;
}

// An NHWC tensor [n, h, w, c] as MIOpen takes it: sizes in NCHW order, strides saying the layout.
void describe_nhwc(miopenTensorDescriptor_t d, miopenDataType_t t, int64_t n, int64_t c, int64_t h, int64_t w,
                   const char* what) {
  const int sizes[4] = {int(n), int(c), int(h), int(w)};
  const int strides[4] = {int(h * w * c), 1, int(w * c), int(c)};
  check(miopenSetTensorDescriptor(d, t, 4, sizes, strides), what);
}

// Descriptors of one problem, released on scope exit.
struct Descriptors {
  miopenTensorDescriptor_t x = nullptr, w = nullptr, y = nullptr, bias = nullptr;
  miopenConvolutionDescriptor_t conv = nullptr;

  explicit Descriptors(const GemmProblem& p) {
    const miopenDataType_t t = p.dtype == DType::kBF16 ? miopenBFloat16 : miopenHalf;
    check(miopenCreateTensorDescriptor(&x), "create x");
    check(miopenCreateTensorDescriptor(&w), "create w");
    check(miopenCreateTensorDescriptor(&y), "create y");
    check(miopenCreateTensorDescriptor(&bias), "create bias");
    check(miopenCreateConvolutionDescriptor(&conv), "create conv");
    describe_nhwc(x, t, p.images, p.channels, p.height, p.width, "describe x");
    describe_nhwc(w, t, p.n, p.channels, p.kh, p.kw, "describe w");
    describe_nhwc(y, t, p.images, p.n, p.out_height, p.out_width, "describe y");
    describe_nhwc(bias, t, 1, p.n, 1, 1, "describe bias");
    check(miopenInitConvolutionDescriptor(conv, miopenConvolution, p.padding, p.padding, p.stride, p.stride, 1, 1),
          "describe conv");
    check(miopenSetConvolutionFindMode(conv, miopenConvolutionFindModeFast), "fast find mode");
  }
  ~Descriptors() {
    miopenDestroyTensorDescriptor(x);
    miopenDestroyTensorDescriptor(w);
    miopenDestroyTensorDescriptor(y);
    miopenDestroyTensorDescriptor(bias);
    miopenDestroyConvolutionDescriptor(conv);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

constexpr size_t kMaxWorkspace = size_t(256) << 20;  // as for cuDNN
constexpr size_t kMaxSolutions = 4;                  // timed by our autotuner on a shape's first use

struct Solution {
  uint64_t id;
  size_t workspace;
};

using ShapeKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int>;

ShapeKey shape_of(const GemmProblem& p) {
  return {p.device.index, int(p.dtype), p.images, p.height, p.width, p.channels, p.n, p.out_height, p.out_width,
          p.kh, p.stride, p.padding};
}

// MIOpen's ranked solutions for the shape, asked once per shape and process (the candidate list is
// rebuilt on every uncaptured call). A query MIOpen refuses leaves the shape to our kernels, as a shape
// hipBLASLt has no kernel for does: a library that cannot list candidates must not stop a generation.
const std::vector<Solution>& solutions_for(const GemmProblem& p) {
  static std::mutex mutex;
  static auto* known = new std::map<ShapeKey, std::vector<Solution>>;
  const ShapeKey key = shape_of(p);
  {
    const std::lock_guard lock(mutex);
    if (const auto it = known->find(key); it != known->end()) return it->second;
  }
  std::vector<Solution> offered;
  try {
    if (is_plain_convolution(p)) {
      const Descriptors d(p);
      miopenHandle_t h = handle_for(p.device.index);
      size_t count = 0;
      check(miopenConvolutionForwardGetSolutionCount(h, d.w, d.x, d.conv, d.y, &count), "counting solutions");
      std::vector<miopenConvSolution_t> ranked(std::max<size_t>(count, 1));
      size_t returned = 0;
      check(miopenConvolutionForwardGetSolution(h, d.w, d.x, d.conv, d.y, ranked.size(), &returned, ranked.data()),
            "ranking solutions");
      for (size_t i = 0; i < returned && offered.size() < kMaxSolutions; ++i) {  // fastest expected first
        if (ranked[i].workspace_size <= kMaxWorkspace)
          offered.push_back({ranked[i].solution_id, ranked[i].workspace_size});
      }
    }
  } catch (const Error&) {
    offered.clear();
  }
  const std::lock_guard lock(mutex);
  return known->emplace(key, std::move(offered)).first->second;
}

}  // namespace

void miopen_warm_up(int device) {
  if (hipSetDevice(device) != hipSuccess) return;  // the convolutions' own calls will say why
  (void)handle_for(device);
}

std::vector<uint64_t> miopen_solutions(const GemmProblem& p) {
  std::vector<uint64_t> ids;
  for (const Solution& s : solutions_for(p)) ids.push_back(s.id);
  return ids;
}

void miopen_conv(const GemmProblem& p, uint64_t solution, void* c) {
  const std::vector<Solution>& offered = solutions_for(p);
  const auto it = std::find_if(offered.begin(), offered.end(), [&](const Solution& s) { return s.id == solution; });
  HD_CHECK_KIND(it != offered.end(), ErrorKind::kUnsupported, "MIOpen: solution ", solution,
                " is not offered for this convolution");
  const Descriptors d(p);
  miopenHandle_t h = handle_for(p.device.index);
  const auto stream = static_cast<hipStream_t>(native_stream(p.device));
  check(miopenSetStream(h, stream), "miopenSetStream");
  const Buffer workspace = it->workspace > 0 ? Buffer(p.device, it->workspace) : Buffer();
  const size_t c_bytes = size_t(p.m() * p.n) * 2;
  const bool epilogue = p.bias != nullptr || p.residual != nullptr;
  const Buffer product = epilogue ? Buffer(p.device, c_bytes) : Buffer();
  void* y = epilogue ? product.data() : c;
  check(miopenConvolutionForwardImmediate(h, d.w, p.b, d.x, p.a, d.conv, d.y, y, workspace.data(), it->workspace,
                                          solution),
        "miopenConvolutionForwardImmediate");
  if (!epilogue) return;
  if (p.residual != nullptr && p.residual != c) {
    if (hipMemcpyAsync(c, p.residual, c_bytes, hipMemcpyDeviceToDevice, stream) != hipSuccess)
      throw Error(ErrorKind::kRuntime, "MIOpen convolution: copying the residual failed");
  }
  // c = (product + bias) + beta·c; without a bias, B is the product again with weight 0.
  const float one = 1.0f, zero = 0.0f, beta = p.residual != nullptr ? 1.0f : 0.0f;
  const bool biased = p.bias != nullptr;
  check(miopenOpTensor(h, miopenTensorOpAdd, &one, d.y, y, biased ? &one : &zero, biased ? d.bias : d.y,
                       biased ? p.bias : y, &beta, d.y, c),
        "adding the bias and residual");
}

}  // namespace hd::gpu
