// HD_HOST_DEVICE marks a function written once for both sides: compiled for the CPU always, and for the
// GPU too where a GPU compiler (nvcc, or clang for HIP) reads the header; plain C++ compilers see nothing.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HD_HOST_DEVICE __host__ __device__
#else
#define HD_HOST_DEVICE
#endif
