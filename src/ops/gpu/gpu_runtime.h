// The GPU runtime as seen from plain C++ (no vendor headers): device discovery, memory and copies.
// Implemented once in gpu_runtime.cu for CUDA and HIP; linked only into GPU builds.
#pragma once

#include <string>

#include "core/tensor.h"

namespace hd::gpu {

// The device type this build's GPU code runs on: kCuda or kHip.
DeviceType build_device_type();
// Registers the device allocator for this build's vendor with core (idempotent). Every entry point
// that may touch a GPU calls it first.
void initialize();
int device_count();  // 0 when there is no usable GPU (or no driver)
std::string device_name(int index);

// Copies between tensors of equal shape and dtype, host to device, device to host or device to device.
void copy(const Tensor& src, const Tensor& dst);
void synchronize(const Device& device);

int multiprocessor_count(int index);
// Whether the kernels' matrix-fragment layer has a hardware path on this device (NVIDIA sm_80+).
bool device_has_matrix_unit(int index);

}  // namespace hd::gpu
