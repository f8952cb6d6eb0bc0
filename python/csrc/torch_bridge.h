// The bridge between PyTorch's tensors and the engine's: views (no copies) of at::Tensor as hd::Tensor,
// errors translated into the exceptions Python expects, and, for a GPU tensor, the scope that makes the
// engine's kernels run on PyTorch's current stream with PyTorch's caching allocator for temporaries.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>

#include "core/tensor.h"

namespace hd::torch_ext {

// A view of a contiguous tensor; throws (as ValueError) for a dtype the engine has no kernels for.
Tensor view_of(const at::Tensor& t);
// The same for an optional tensor: nullptr when it is absent; the view is kept in `storage`.
const Tensor* optional_view(const c10::optional<at::Tensor>& t, Tensor& storage);

// Runs `op` with the engine's errors turned into c10 errors: a bad argument becomes ValueError, an
// unsupported input NotImplementedError, running out of device memory torch.OutOfMemoryError, anything
// else RuntimeError; each keeps the engine's message.
void run_translating_errors(const char* op, const std::function<void()>& body);

// For the life of the scope, the engine's ops on `device` (a tensor's device) run on PyTorch's current
// stream for that device and take their temporaries from PyTorch's caching allocator. Nothing for a CPU
// tensor. Implemented in torch_gpu.cpp for GPU builds, torch_cpu_only.cpp otherwise.
class DeviceScope {
 public:
  explicit DeviceScope(const at::Tensor& t);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// For the life of the scope, the engine's own stream on a tensor's GPU is joined to PyTorch's current
// stream: at the start the engine's stream waits for what PyTorch queued so far (the inputs), at the end
// PyTorch's waits for what the engine queued (the outputs), both on the device, without a host
// synchronisation. For whole models (the engine's captured UNet graphs), which cannot be captured on
// PyTorch's legacy default stream: the engine captures and replays them on its own stream. Throws
// (NotImplementedError) inside a PyTorch graph capture. Nothing for a CPU tensor.
class EngineStreamScope {
 public:
  explicit EngineStreamScope(const at::Tensor& t);
  ~EngineStreamScope();
  EngineStreamScope(const EngineStreamScope&) = delete;
  EngineStreamScope& operator=(const EngineStreamScope&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The engine's device for a tensor's: the CPU, or this build's GPU vendor with the tensor's index.
Device engine_device(const at::Tensor& t);

}  // namespace hd::torch_ext
