// CUDA spellings are canonical in hipDiffusion's GPU code; on NVIDIA they need no mapping.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define HD_GPU_VENDOR "cuda"
#define HD_GPU_DEVICE_TYPE ::hd::DeviceType::kCuda
