// AMD's libraries as further candidates of the autotuner (gemm_tiles.cuh), as NVIDIA's are
// (nvidia/vendor_gemm.h): hipBLASLt for dense products, rocBLAS for the dense products hipBLASLt has no
// kernel for (Debian's hipBLASLt ships none for gfx942), MIOpen for convolutions. Accelerators, not
// foundations: every problem they take, our kernels take too. Plain C++; compiled only into HIP builds
// that found the library (HD_WITH_HIPBLASLT, HD_WITH_ROCBLAS, HD_WITH_MIOPEN). Built and linked in CI;
// never run (there is no AMD GPU here).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/gpu/gemm.h"

namespace hd::gpu {

// Whether the library can run `p` exactly as our kernels would (one dense product, 16-byte rows; for
// hipBLASLt also a kernel for this device: its heuristic is asked once per shape and remembered).
bool hipblaslt_can_run(const GemmProblem& p);
bool rocblas_can_run(const GemmProblem& p);

// Run `p`, writing C to `c` (p.c, or a tuning buffer of C's layout); p.residual is read, never written
// (unless it is `c` itself). Throws hd::Error naming the library's status on failure.
void hipblaslt_gemm(const GemmProblem& p, void* c);
void rocblas_gemm(const GemmProblem& p, void* c);

// MIOpen's immediate mode: the solutions its heuristics rank first for `p` (at most a few, each within
// the workspace limit; none when `p` is not a plain NHWC convolution), by solution id: the id MIOpen
// expects callers to serialize (miopen.h), so that the autotuner's cache names a solution, not a rank,
// and a choice outlives MIOpen's re-ranking in a later ROCm (a stored id no longer offered is retuned).
std::vector<uint64_t> miopen_solutions(const GemmProblem& p);

// Each library's handle for `device` created ahead of its first use (gpu_runtime.h:
// start_library_warm_up), on a side thread. Throws hd::Error.
void hipblaslt_warm_up(int device);
void rocblas_warm_up(int device);
void miopen_warm_up(int device);
void miopen_conv(const GemmProblem& p, uint64_t solution, void* c);

}  // namespace hd::gpu
