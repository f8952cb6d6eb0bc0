// What attention's two gradient kernels share: the fragment layer's (attention_backward.cu, every GPU) and
// Hopper's warpgroup one (nvidia/attention_gradient_wgmma.cu). Their arguments, how many parts a key
// block's query steps are split into, and the f32 sums they add into.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "ops/gpu/attention_kernel.cuh"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/target.cuh"

namespace hd::gpu {

struct GradientArgs {
  AttentionArgs a;
  int64_t grad_row;  // elements between tokens of dO, O, dQ's sums, dK and dV (dense [B, L, heads·D])
  float scale;       // the softmax scale itself (dK and dQ carry it)
};

// How many parts the query steps of each key block are split into, given the blocks the GPU holds at once
// (resident): as many copies of the key blocks as fit in that one wave, each part at least four steps
// long. Where the key blocks fill more than half the wave, a split would only add a wave (and dK's and
// dV's atomics).
inline int query_parts(int64_t key_blocks, int query_steps, int64_t resident) {
  if (2 * key_blocks > resident) return 1;
  return int(std::max<int64_t>(1, std::min<int64_t>(resident / key_blocks, query_steps / 4)));
}

// f32 sums of `shape` on `device`, zeroed on the current stream: what the kernels add dQ into (every key
// block adds into it), and dK and dV where the query steps are split.
inline OwnedTensor zeroed_sums(const Shape& shape, const Device& device) {
  OwnedTensor sums(shape, DType::kF32, device);
  HD_GPU_CHECK(cudaMemsetAsync(sums.view().data, 0, sums.view().nbytes(), current_stream()));
  return sums;
}

// Adds a 16 x 8 accumulator fragment (r0, r1: the lane's row g at columns 2t, 2t + 1; r2, r3: row g + 8) to
// f32 sums in global memory (row_g, row_g8: those rows at column 2t). Where one instruction adds four
// neighbouring floats (NVIDIA sm_90+), lanes t and t ^ 1 swap halves first so that each adds four columns
// of one row: a quarter of the atomic operations of adding floats one by one, which is what bounds dQ's
// sums (every key block adds into the same rows). The even lanes add row g, the odd ones row g + 8, chosen
// by selects rather than branches, so that one instruction with every lane active does the fragment
// (branching on the lane's parity took two, each with half the lanes, and the branch's latency). Every lane
// of the 32 must call it.
__device__ inline void add_fragment(float* row_g, float* row_g8, float r0, float r1, float r2, float r3,
                                    int t, bool has_g, bool has_g8) {
#if defined(HD_NVIDIA_VECTOR_ATOMICS)
  const bool even = (t & 1) == 0;
  const float give0 = even ? r2 : r0, give1 = even ? r3 : r1;
  const float got0 = shuffle_xor(give0, 1, kFragmentLanes), got1 = shuffle_xor(give1, 1, kFragmentLanes);
  const float4 sum = even ? make_float4(r0, r1, got0, got1) : make_float4(got0, got1, r2, r3);
  float* const at = even ? row_g : row_g8 - 2;
  if (even ? has_g : has_g8) atomicAdd(reinterpret_cast<float4*>(at), sum);
#else
  (void)t;
  if (has_g) atomicAdd(row_g, r0), atomicAdd(row_g + 1, r1);
  if (has_g8) atomicAdd(row_g8, r2), atomicAdd(row_g8 + 1, r3);
#endif
}

}  // namespace hd::gpu
