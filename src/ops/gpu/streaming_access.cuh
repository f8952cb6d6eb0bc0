// 16-byte loads and stores that tell the caches the line will not be used again (NVIDIA's evict-first
// .cs accesses, AMD's nontemporal ones): for a pass over a tensor larger than the L2 cache, whose lines
// would otherwise push out the ones other kernels come back for.
#pragma once

#include "ops/gpu/common.cuh"

namespace hd::gpu {

#if defined(HD_GPU_HIP)
using StreamingVector =
    unsigned __attribute__((ext_vector_type(4)));  // what the builtins take; uint4 is a struct

__device__ inline uint4 load_streaming(const uint4* p) {
  const StreamingVector v = __builtin_nontemporal_load(reinterpret_cast<const StreamingVector*>(p));
  return make_uint4(v.x, v.y, v.z, v.w);
}

__device__ inline void store_streaming(uint4* p, const uint4& v) {
  const StreamingVector w = {v.x, v.y, v.z, v.w};
  __builtin_nontemporal_store(w, reinterpret_cast<StreamingVector*>(p));
}
#else
__device__ inline uint4 load_streaming(const uint4* p) {
  return __ldcs(p);
}

__device__ inline void store_streaming(uint4* p, const uint4& v) {
  __stcs(p, v);
}
#endif

}  // namespace hd::gpu
