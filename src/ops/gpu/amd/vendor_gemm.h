// AMD's libraries as further candidates of the autotuner (gemm_tiles.cuh), as NVIDIA's are
// (nvidia/vendor_gemm.h): hipBLASLt for dense products. Accelerators, not foundations: every problem they
// take, our kernels take too. Plain C++; compiled only into HIP builds that found the library
// (HD_WITH_HIPBLASLT). Built and linked in CI; never run (there is no AMD GPU here).
#pragma once

#include "ops/gpu/gemm.h"

namespace hd::gpu {

// Whether hipBLASLt can run `p` exactly as our kernels would (one dense product, 16-byte rows).
bool hipblaslt_can_run(const GemmProblem& p);

// Run `p`, writing C to `c` (p.c, or a tuning buffer of C's layout); p.residual is read, never written
// (unless it is `c` itself). Throws hd::Error naming the library's status on failure.
void hipblaslt_gemm(const GemmProblem& p, void* c);

}  // namespace hd::gpu
