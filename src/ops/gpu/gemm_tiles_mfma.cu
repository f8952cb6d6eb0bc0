// The GEMM tiles (gemm_tiles.cuh) on CDNA's MFMA (gfx90a, gfx942); its emulation in CUDA builds.
#include "ops/gpu/gemm_tiles.cuh"

namespace hd::gpu::gemm_tiles {

HD_GEMM_TILES_INSTANCES(, kMfmaHere)

}  // namespace hd::gpu::gemm_tiles
