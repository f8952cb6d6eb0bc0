// The GEMM tiles (gemm_tiles.cuh) on the portable fragment path (lane shuffles: AMD targets without matrix cores, and the tests).
#include "ops/gpu/gemm_tiles.cuh"

namespace hd::gpu::gemm_tiles {

HD_GEMM_TILES_INSTANCES(, Fragments::kPortable)

}  // namespace hd::gpu::gemm_tiles
