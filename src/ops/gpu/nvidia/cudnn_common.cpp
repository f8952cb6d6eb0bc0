#include "ops/gpu/nvidia/cudnn_common.h"

#include <map>
#include <mutex>

#include "core/error.h"

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
    cudnnHandle_t h = nullptr;
    cudnn_check(cudnnCreate(&h), "cudnnCreate");
    it = handles.emplace(device, h).first;
  }
  return it->second;
}

}  // namespace hd::gpu
