// What both cuDNN candidates share (cudnn_conv.cpp, the legacy API; cudnn_graph_conv.cpp, the graph
// API): status checks that name the call, and one cuDNN handle per device.
#pragma once

#include <cudnn.h>

namespace hd::gpu {

// Throws hd::Error "cuDNN: <what> failed: <cuDNN's message>" unless status is success.
void cudnn_check(cudnnStatus_t status, const char* what);
// The device's handle, created on first use and kept for the process (like the device's context).
cudnnHandle_t cudnn_handle(int device);

}  // namespace hd::gpu
