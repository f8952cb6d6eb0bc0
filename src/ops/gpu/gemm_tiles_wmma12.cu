// The GEMM tiles (gemm_tiles.cuh) on RDNA4's WMMA (gfx12); its emulation in CUDA builds.
#include "ops/gpu/gemm_tiles.cuh"

namespace hd::gpu::gemm_tiles {

HD_GEMM_TILES_INSTANCES(, kWmma12Here)

}  // namespace hd::gpu::gemm_tiles
