#include "ops/library_warm_up.h"

#include <mutex>
#include <set>
#include <thread>

#include "ops/tuning/autotuner.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_runtime.h"
#endif

namespace hd::ops {

struct LibraryWarmUp::Running {
  std::thread thread;
};

LibraryWarmUp::LibraryWarmUp(const Device& device) {
#if defined(HD_WITH_GPU)
  if (!device.is_gpu() || kernel_choice() != KernelChoice::kAll) return;
  static std::mutex mutex;
  static std::set<int> started;  // devices whose libraries this process started (or is starting)
  {
    const std::lock_guard lock(mutex);
    if (!started.insert(device.index).second) return;
  }
  running_ = std::make_unique<Running>();
  running_->thread = std::thread([index = device.index] { gpu::warm_up_libraries(index); });
#else
  (void)device;
#endif
}

LibraryWarmUp::~LibraryWarmUp() {
  if (running_ && running_->thread.joinable()) running_->thread.join();
}

}  // namespace hd::ops
