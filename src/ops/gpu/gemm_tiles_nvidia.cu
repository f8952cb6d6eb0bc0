// The GEMM tiles (gemm_tiles.cuh) on NVIDIA's tensor cores (mma.sync, sm_80+), with cp.async pipelines and cuDNN / cuBLASLt candidates.
#include "ops/gpu/gemm_tiles.cuh"

#if !defined(HD_GPU_HIP)
namespace hd::gpu::gemm_tiles {

HD_GEMM_TILES_INSTANCES(, Fragments::kNvidia)

}  // namespace hd::gpu::gemm_tiles
#endif
