// DeviceScope for GPU builds: the engine's kernels run on PyTorch's current stream and take their
// temporaries from PyTorch's caching allocator, so that they order with PyTorch's own work without a
// synchronisation and can be captured into PyTorch's CUDA/HIP graphs. EngineStreamScope: whole models
// on the engine's own stream, joined to PyTorch's at both ends. ROCm builds of PyTorch name
// their GPU "cuda" to Python and keep the c10 runtime under c10/hip.
#include <atomic>
#include <optional>
#include <vector>

#include "core/scratch.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/ops.h"
#include "ops/tuning/autotuner.h"
#include "torch_bridge.h"

#if defined(HD_TORCH_HIP)
#include <c10/hip/HIPCachingAllocator.h>
#include <c10/hip/HIPGuard.h>
#include <c10/hip/HIPStream.h>
namespace hd_c10_gpu {
inline void* current_stream(c10::DeviceIndex i) { return c10::hip::getCurrentHIPStream(i).stream(); }
inline bool capturing(void* stream) {
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  return hipStreamIsCapturing(static_cast<hipStream_t>(stream), &status) == hipSuccess &&
         status != hipStreamCaptureStatusNone;
}
inline c10::Allocator* caching_allocator() { return c10::hip::HIPCachingAllocator::get(); }
using DeviceGuard = c10::hip::HIPGuard;
}  // namespace hd_c10_gpu
#else
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
namespace hd_c10_gpu {
inline void* current_stream(c10::DeviceIndex i) { return c10::cuda::getCurrentCUDAStream(i).stream(); }
inline bool capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
}
inline c10::Allocator* caching_allocator() { return c10::cuda::CUDACachingAllocator::get(); }
using DeviceGuard = c10::cuda::CUDAGuard;
}  // namespace hd_c10_gpu
#endif

namespace hd::torch_ext {

namespace {

// Scratch memory from PyTorch's caching allocator, held until the scope ends: the kernels that use it
// are queued on PyTorch's current stream by then, and the allocator hands memory freed on a stream only
// to that stream's later work.
class TorchScratch final : public ScratchProvider {
 public:
  void* allocate(const Device&, size_t bytes) override {
    held_.push_back(hd_c10_gpu::caching_allocator()->allocate(bytes));
    return held_.back().get();
  }

 private:
  std::vector<c10::DataPtr> held_;
};

}  // namespace

struct DeviceScope::State {
  State(const at::Tensor& t, void* torch_stream)
      : guard(t.device()), stream(engine_device(t), torch_stream) {
    // Inside a capture (torch.cuda.graph), a shape the autotuner has not seen is an error that says to
    // run the work once before capturing, as PyTorch's own warm-up rule does: timing candidates there
    // would synchronise and break the capture.
    if (hd_c10_gpu::capturing(torch_stream)) no_tuning.emplace(kInCapture);
  }
  static constexpr const char* kInCapture =
      "inside a CUDA/HIP graph capture: run the captured work once before capturing it";
  hd_c10_gpu::DeviceGuard guard;
  gpu::ExternalStream stream;
  TorchScratch scratch;
  std::optional<ops::NoTuningScope> no_tuning;
};

namespace {

// ops::prepare_device once per device: it asks the driver for the device count each time (microseconds
// that every op call would pay).
void prepare_once(const at::Tensor& t) {
  constexpr int kDevices = 64;
  static std::atomic<bool> prepared[kDevices] = {};
  const int index = t.device().index();
  if (index < 0 || index >= kDevices || !prepared[index].load(std::memory_order_acquire)) {
    ops::prepare_device(engine_device(t));
    if (index >= 0 && index < kDevices) prepared[index].store(true, std::memory_order_release);
  }
}

}  // namespace

DeviceScope::DeviceScope(const at::Tensor& t) {
  if (t.device().is_cpu()) return;
  prepare_once(t);
  state_ = std::make_unique<State>(t, hd_c10_gpu::current_stream(t.device().index()));
}

DeviceScope::~DeviceScope() = default;

struct EngineStreamScope::State {
  State(const at::Tensor& t, void* torch_stream)
      : guard(t.device()), torch(torch_stream), engine(gpu::native_stream(engine_device(t))) {
    gpu::stream_wait(engine, torch);
  }
  ~State() {
    try {
      gpu::stream_wait(torch, engine);
    } catch (const std::exception&) {
      // Only a broken device fails here; PyTorch's next call on it reports that.
    }
  }
  hd_c10_gpu::DeviceGuard guard;
  void* torch;
  void* engine;
};

EngineStreamScope::EngineStreamScope(const at::Tensor& t) {
  if (t.device().is_cpu()) return;
  prepare_once(t);
  void* torch_stream = hd_c10_gpu::current_stream(t.device().index());
  TORCH_CHECK_NOT_IMPLEMENTED(
      !hd_c10_gpu::capturing(torch_stream),
      "hipdiffusion: the engine's models capture and replay graphs of their own; call them "
      "outside a CUDA/HIP graph capture");
  state_ = std::make_unique<State>(t, torch_stream);
}

EngineStreamScope::~EngineStreamScope() = default;

Device engine_device(const at::Tensor& t) {
  if (t.device().is_cpu()) return Device::cpu();
  TORCH_CHECK_NOT_IMPLEMENTED(t.device().is_cuda(), "hipdiffusion: no kernels for ", t.device(), " tensors");
  return Device{gpu::build_device_type(), int(t.device().index())};
}

}  // namespace hd::torch_ext
