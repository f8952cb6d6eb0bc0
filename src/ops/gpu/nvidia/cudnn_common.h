// What both cuDNN candidates share (cudnn_conv.cpp, the legacy API; cudnn_graph_conv.cpp, the graph
// API): status checks that name the call, and one cuDNN handle per device.
#pragma once

#include <cudnn.h>

#include "ops/gpu/gemm.h"

namespace hd::gpu {

// Throws hd::Error "cuDNN: <what> failed: <cuDNN's message>" unless status is success.
void cudnn_check(cudnnStatus_t status, const char* what);
// The device's handle, created on first use and kept for the process (like the device's context).
cudnnHandle_t cudnn_handle(int device);

// What each API loads on its first use, asked through `handle` for the small convolution `p`
// (cudnn_warm_up, vendor_gemm.h, calls both with a handle of its own).
void cudnn_graph_warm_up(cudnnHandle_t handle, const GemmProblem& p);
void cudnn_legacy_warm_up(cudnnHandle_t handle, const GemmProblem& p);

}  // namespace hd::gpu
