// What Hopper's attention kernels (nvidia/attention_wgmma.cu, the forward; attention_gradient_wgmma.cu, the
// gradient) share: rows of Q, K, V or dO copied into wgmma.cuh's swizzled tiles, and probabilities packed
// into an A fragment.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/gpu/async_copy.cuh"
#include "ops/gpu/numeric.cuh"
#include "ops/gpu/nvidia/wgmma.cuh"

namespace hd::gpu {

// Two probabilities (finite, in [0, 1]) in one register of the A fragment. bf16 through the conversion
// instruction: numeric.cuh's pack2 rounds in integer arithmetic (the same bits on every vendor, NaN
// included), about ten instructions a value where the softmax makes 64 values a thread per key tile; on
// an H100 (2026-11-26) bf16 attention took 1.7x-1.9x f16's time with it. For finite values both round to
// nearest even, so the bits are the same.
template <class T>
__device__ __forceinline__ uint32_t pack_probabilities(float lo, float hi) {
  if constexpr (std::is_same_v<T, Bf16>) {
    uint32_t packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
  } else {
    return pack2<T>(lo, hi);
  }
}

// Copies rows [row0, row0 + kRows) of a [tokens, head] slice into a tile of kRows swizzled rows per
// 64-element block, chunks past the head (and rows at or past `limit`) as zeros: the k-steps of Q Kᵀ read
// the padding up to kD, and zeros there add nothing.
//
// Where a row's chunks divide the block's threads, each thread copies one fixed chunk of every
// (threads / chunks)-th row: one address computed per call and constant steps from it. Written as a loop
// over i = thread, thread + threads, ... (its count unknown to the compiler), the copies' index and bounds
// arithmetic took more instructions than the softmax (SASS of SDXL's D64 kernel, 2026-11-27: 2560
// instructions, 398 IMAD and 232 ISETP against 73 MUFU; 1696 now), and with the loop unrolled instead
// ptxas kept every copy's address in registers (the D64 kernel spilled 108 bytes). On an H200 this took
// SDXL's D64 self-attention from 0.258 to 0.204-0.214 ms, SD1.5's D40 from 0.175 to 0.161, D80 from 0.029
// to 0.024. The same decision as attention_kernel.cuh's for_each_tile_vector, made here apart because of
// the swizzled layout: rows kStep apart share a swizzle phase only when kStep is a multiple of 8, and the
// destination is then one address plus constant offsets, which a per-(row, vector) callback would leave
// to the compiler to discover.
template <class Tile, int kRows, class T>
__device__ __forceinline__ void load_rows(uint8_t* tile, const T* src, int64_t row_stride, int row0,
                                          int limit, int head_dim) {
  // Copied per row: every chunk of its 64-element blocks where that divides the threads (heads of 80 copy
  // 16, six of them zeros that no product reads).
  constexpr int kChunks = Tile::threads % (Tile::atoms * 8) == 0 ? Tile::atoms * 8 : Tile::chunks;
  const int vectors = head_dim / 8;  // chunks that hold data
  if constexpr (Tile::threads % kChunks == 0 && kRows % (Tile::threads / kChunks) == 0 &&
                (Tile::threads / kChunks) % 8 == 0) {
    // Rows r, r + kStep, ...: the same swizzle phase (kStep is a multiple of 8), so one shared address plus
    // constant offsets.
    constexpr int kStep = Tile::threads / kChunks;
    const int c = int(threadIdx.x) % kChunks, r = int(threadIdx.x) / kChunks;
    uint8_t* const dst = tile + (c / 8) * kRows * wgmma::kRowBytes + wgmma::swizzled(r, c % 8);
    const T* const first = src + int64_t(row0 + r) * row_stride + c * 8;
    const int64_t step = int64_t(kStep) * row_stride;
#pragma unroll
    for (int j = 0; j < kRows / kStep; ++j) {
      const bool valid = c < vectors && row0 + r + j * kStep < limit;
      copy_16_async(dst + j * kStep * wgmma::kRowBytes, valid ? first + j * step : src, valid);
    }
  } else {
    for (int i = int(threadIdx.x); i < kRows * Tile::chunks; i += Tile::threads) {
      const int r = i / Tile::chunks, c = i % Tile::chunks;
      const bool valid = row0 + r < limit && c < vectors;
      uint8_t* dst = tile + (c / 8) * kRows * wgmma::kRowBytes + wgmma::swizzled(r, c % 8);
      copy_16_async(dst, valid ? src + int64_t(row0 + r) * row_stride + c * 8 : src, valid);
    }
  }
}

}  // namespace hd::gpu
