#include "ops/captured_work.h"

#include "core/error.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_runtime.h"
#endif

namespace hd::ops {

CapturedWork CapturedWork::capture(const Device& device, const std::function<void()>& work) {
  HD_CHECK_KIND(device.is_gpu(), ErrorKind::kUnsupported, "capturing work for replay needs a GPU, not ",
                device.to_string());
#if defined(HD_WITH_GPU)
  CapturedWork w;
  w.graph_ = std::make_shared<gpu::CapturedGraph>(gpu::CapturedGraph::capture(device, work));
  return w;
#else
  (void)work;
  throw Error(ErrorKind::kUnsupported, "capturing work for replay: this build has no GPU kernels");
#endif
}

void CapturedWork::replay() const {
  HD_CHECK(graph_ != nullptr, "replay of work that was never captured");
#if defined(HD_WITH_GPU)
  static_cast<const gpu::CapturedGraph*>(graph_.get())->replay();
#endif
}

}  // namespace hd::ops
