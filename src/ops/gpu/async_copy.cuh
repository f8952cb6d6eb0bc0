// 16-byte copies from global to shared memory that complete in the background (cp.async on NVIDIA
// sm_80+), so that a kernel can keep several k-steps of tiles in flight. Elsewhere (AMD today) the same
// calls copy synchronously, so kernels written against them are correct everywhere and pipelined where
// the hardware allows.
#pragma once

#include "ops/gpu/common.cuh"

namespace hd::gpu {

// *dst = *src (16 bytes), or zeros when !valid (src is then not read).
__device__ inline void copy_16_async(void* dst, const void* src, bool valid) {
#if defined(HD_NVIDIA_MMA)
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src), "r"(valid ? 16 : 0));
#else
  *static_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}

// Closes the group of copies issued since the last commit.
__device__ inline void async_commit() {
#if defined(HD_NVIDIA_MMA)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most `kPending` committed groups are still in flight (this thread's copies only: a
// barrier after it makes every thread's copies visible).
template <int kPending>
__device__ inline void async_wait() {
#if defined(HD_NVIDIA_MMA)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

}  // namespace hd::gpu
