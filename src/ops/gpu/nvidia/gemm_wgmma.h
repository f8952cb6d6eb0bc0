// Hopper's warpgroup GEMM / implicit-GEMM convolution tiles (gemm_wgmma.cu): NVIDIA-only candidates
// beside the fragment-layer tiles, reported apart from them (the portable numbers are the
// fragment layer's: what AMD GPUs run).
#pragma once

#include <vector>

#include "ops/gpu/gemm_candidate.h"

namespace hd::gpu::gemm_tiles {

struct KernelArgs;

// The warpgroup tiles for a problem whose A and B load in 16-byte vectors, on a device of compute
// capability 9.0 (H100, H200); none on any other device. The build compiles them for sm_90a only.
template <class T>
std::vector<Candidate> wgmma_candidates(const GemmProblem& p, const KernelArgs& args);

}  // namespace hd::gpu::gemm_tiles
