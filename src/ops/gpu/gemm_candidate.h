// One way the autotuner may compute a GEMM problem (gemm_tiles.cuh lists them per fragment layout).
#pragma once

#include <functional>
#include <string>

#include "ops/gpu/gemm.h"

namespace hd::gpu::gemm_tiles {

// A way to compute a problem, writing C to the pointer it is given (p.c, or a tuning buffer). The launch
// holds nothing of one call's problem but what its shape decides, so that it serves every problem of the
// same signature (gemm.cu remembers it for the next call).
struct Candidate {
  std::string name;
  std::function<void(const GemmProblem& p, void* c)> launch;
  bool quick = false;  // timed under the quick tuning policy (ops/tuning/autotuner.h)
  bool library_pick = false;  // a vendor library's own first pick (the autotuner's library_picks)
};

}  // namespace hd::gpu::gemm_tiles
