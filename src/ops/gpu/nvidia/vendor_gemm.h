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

// Each library's one-time start-up in this process on `device` (loading its engines and what its first
// heuristic query needs: about 0.1 s each for cuDNN and cuBLASLt on the H100 machine), through a handle
// of its own, so that it can run on a thread of its own while the caller loads weights. Throws hd::Error.
void cudnn_warm_up(int device);
void cublaslt_warm_up(int device);

// cuDNN's graph API: the convolution with bias and residual fused into one plan. Whether `p` is a plain
// NHWC convolution with C apart from the residual, the form the graph takes (no cuDNN call); and a run
// of the engine cuDNN's heuristics rank `rank` among the deterministic ones of a family
// (< kCudnnGraphCandidates), which throws kUnsupported when the heuristics return fewer or that engine
// cannot run `p`. The families: engines whose kernels ship compiled, and engines that compile theirs
// when their plan is built (runtime fusion: 0.1-0.5 s per new shape the first time on a machine).
inline constexpr int kCudnnGraphCandidates = 6;
enum class CudnnEngines { kPrecompiled, kRuntimeCompiled };
bool cudnn_graph_can_run(const GemmProblem& p);
void cudnn_graph_conv(const GemmProblem& p, CudnnEngines family, int rank, void* c);

}  // namespace hd::gpu
