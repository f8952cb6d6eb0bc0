// The vendor libraries' one-time start-up for a device, called on a thread of its own by
// ops::LibraryWarmUp (ops/library_warm_up.h) while the caller loads weights.
#include <exception>

#include "core/startup_trace.h"
#include "ops/gpu/gpu_runtime.h"
#if defined(HD_WITH_CUDNN) || defined(HD_WITH_CUBLASLT)
#include "ops/gpu/nvidia/vendor_gemm.h"
#endif
#if defined(HD_WITH_HIPBLASLT) || defined(HD_WITH_ROCBLAS) || defined(HD_WITH_MIOPEN)
#include "ops/gpu/amd/vendor_gemm.h"
#endif

namespace hd::gpu {

namespace {

// Best effort: a library that fails to start here fails again, with its message, when an op first uses
// it; nothing is lost by ignoring the failure now.
template <class F>
void attempt(F f) {
  try {
    f();
  } catch (const std::exception&) {
  }
}

}  // namespace

void warm_up_libraries(int device) {
  const StartupSpan span("vendor libraries started (on a side thread)");
#if defined(HD_WITH_CUBLASLT)
  attempt([&] { cublaslt_warm_up(device); });
#endif
#if defined(HD_WITH_CUDNN)
  attempt([&] { cudnn_warm_up(device); });
#endif
#if defined(HD_WITH_HIPBLASLT)
  attempt([&] { hipblaslt_warm_up(device); });
#endif
#if defined(HD_WITH_ROCBLAS)
  attempt([&] { rocblas_warm_up(device); });
#endif
#if defined(HD_WITH_MIOPEN)
  attempt([&] { miopen_warm_up(device); });
#endif
  (void)device;
}

}  // namespace hd::gpu
