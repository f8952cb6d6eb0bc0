// DeviceScope, EngineStreamScope and engine_device for a build without GPU kernels: only CPU tensors reach
// the engine (the Python side's support checks send GPU tensors to PyTorch's own ops).
#include <c10/util/Exception.h>

#include "torch_bridge.h"

namespace hd::torch_ext {

struct DeviceScope::State {};

DeviceScope::DeviceScope(const at::Tensor&) {}
DeviceScope::~DeviceScope() = default;

struct EngineStreamScope::State {};

EngineStreamScope::EngineStreamScope(const at::Tensor&) {}
EngineStreamScope::~EngineStreamScope() = default;

Device engine_device(const at::Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(t.device().is_cpu(), "hipdiffusion: this build has no GPU kernels (tensor on ",
                              t.device(), "); reinstall with -C cmake.define.HD_CUDA=ON or HD_HIP=ON");
  return Device::cpu();
}

}  // namespace hd::torch_ext
