// NVIDIA's libraries as further candidates of the autotuner (gemm.cu): cuDNN for convolutions and
// cuBLASLt for dense products. They are accelerators, not foundations: every problem they take, our own
// kernels take too, and a build without them (the HIP build, or CUDA without cuDNN) simply offers fewer
// candidates. Plain C++; compiled only into CUDA builds that found the library (HD_WITH_CUDNN,
// HD_WITH_CUBLASLT).
#pragma once

#include "ops/gpu/gemm.h"

namespace hd::gpu {

// Whether the library can run `p` exactly as our kernels would (layouts, padding, batch, dtype).
bool cudnn_can_run(const GemmProblem& p);
bool cublaslt_can_run(const GemmProblem& p);

// Run `p`, writing C to `c` (p.c, or a tuning buffer of C's layout); p.residual is read, never written
// (unless it is `c` itself). Throws hd::Error naming the library's status on failure.
void cudnn_conv(const GemmProblem& p, void* c);
void cublaslt_gemm(const GemmProblem& p, void* c);

// cuDNN's graph API: the convolution with bias and residual fused into one plan. The first returns how
// many of the engines cuDNN's heuristics rank first can run `p` (0 when none, or when `p` is not a plain
// NHWC convolution with C apart from the residual); the second runs the engine of that rank.
int cudnn_graph_candidates(const GemmProblem& p);
void cudnn_graph_conv(const GemmProblem& p, int rank, void* c);

}  // namespace hd::gpu
