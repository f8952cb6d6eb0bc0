// The GEMM tiles (gemm_tiles.cuh) on RDNA3's WMMA (gfx11); its emulation in CUDA builds.
#include "ops/gpu/gemm_tiles.cuh"

namespace hd::gpu::gemm_tiles {

HD_GEMM_TILES_INSTANCES(, kWmma11Here)

}  // namespace hd::gpu::gemm_tiles
