// Hopper's instructions for blocks whose warpgroups do different work (sm_90a): named barriers between
// some of a block's threads, moving registers from one warpgroup to the others (setmaxnreg), and the
// bulk-copy unit's reductions from shared into global memory, which a single warp can issue for a whole
// tile. Compiled only for sm_90a (HD_NVIDIA_WGMMA); elsewhere these are never called.
#pragma once

#include <cstdint>

#include "ops/gpu/common.cuh"

namespace hd::gpu::warp_specialization {

#if defined(HD_NVIDIA_WGMMA)
// Barrier `id` (1-15; 0 is __syncthreads') of `threads` threads, a multiple of the warp size: waits until
// that many have arrived, this one's own warp among them ...
__device__ __forceinline__ void sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// ... or counts this warp as arrived and goes on.
__device__ __forceinline__ void arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Every warp of a warpgroup: its threads' registers up to kRegisters (a multiple of 8, 24-256), taken
// from those other warpgroups gave back with registers_down. ptxas allocates the code after it to that
// count where the kernel's own count is pinned by __launch_bounds__(threads, 1).
template <int kRegisters>
__device__ __forceinline__ void registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// global[0, bytes) += shared[0, bytes) in f32, by the bulk-copy unit (both 16-byte aligned, bytes a multiple
// of 16), in this thread's current bulk group.
__device__ __forceinline__ void reduce_add_async(float* global, const float* shared, int bytes) {
  const auto source = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(global),
               "r"(source), "r"(bytes)
               : "memory");
}
// Closes this thread's bulk group.
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until this thread's bulk groups have read their shared memory (which may then be written again) ...
__device__ __forceinline__ void wait_reads() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// ... or have finished altogether.
__device__ __forceinline__ void wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
#endif

}  // namespace hd::gpu::warp_specialization
