#include "ops/gpu/nvidia/cudnn_common.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "core/error.h"
#include "core/startup_trace.h"
#include "ops/gpu/nvidia/vendor_gemm.h"

namespace hd::gpu {

void cudnn_check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(ErrorKind::kRuntime, str_cat("cuDNN: ", what, " failed: ", cudnnGetErrorString(status)));
}

cudnnHandle_t cudnn_handle(int device) {
  static std::mutex mutex;
  static std::map<int, cudnnHandle_t> handles;  // never destroyed: process lifetime, like the context
  const std::lock_guard lock(mutex);
  auto it = handles.find(device);
  if (it == handles.end()) {
    const StartupSpan span("cudnnCreate");
    cudnnHandle_t h = nullptr;
    cudnn_check(cudnnCreate(&h), "cudnnCreate");
    it = handles.emplace(device, h).first;
  }
  return it->second;
}

void cudnn_warm_up(int device) {
  if (cudaSetDevice(device) != cudaSuccess) return;  // the convolutions' own calls will say why
  cudnnHandle_t handle = nullptr;
  cudnn_check(cudnnCreate(&handle), "cudnnCreate");
  // A 3x3 convolution of an 8x8 image, 16 channels to 16, f16.
  GemmProblem p;
  p.dtype = DType::kF16;
  p.device = Device{DeviceType::kCuda, device};
  p.height = p.width = p.out_height = p.out_width = 8;
  p.channels = p.pixel_stride = p.n = p.ldc = 16;
  p.kh = p.kw = 3;
  p.padding = 1;
  p.ldb = int64_t(p.kh) * p.kw * p.channels;
  try {
    cudnn_graph_warm_up(handle, p);
    cudnn_legacy_warm_up(handle, p);
  } catch (...) {
    cudnnDestroy(handle);
    throw;
  }
  cudnnDestroy(handle);
}

}  // namespace hd::gpu
