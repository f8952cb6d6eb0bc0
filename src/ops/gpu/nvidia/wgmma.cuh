// Hopper's warpgroup matrix instructions (wgmma.mma_async, sm_90a): four warps multiply a 64 x N tile of
// A by an N-wide tile of B, both read straight from shared memory through 64-bit descriptors, while the
// warps go on issuing. Only the layout the GEMM kernel uses is described: both operands K-major (rows of
// k-contiguous elements), 64 elements (128 bytes) of k per row, stored with the 128-byte swizzle (the
// 16-byte chunk c of row r at chunk c ^ (r % 8)), so that the eight rows one core matrix spans fall in
// different banks. Compiled only for sm_90a (HD_NVIDIA_WGMMA); elsewhere these are never called.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/gpu/common.cuh"

namespace hd::gpu::wgmma {

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of 128-byte swizzled rows.
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

// The descriptor of a K-major, 128-byte-swizzled operand whose rows start at `tile` (1024-byte aligned,
// plus 32 bytes per 16 k of the slice): start address, leading offset (unused by this layout: 1), stride
// between groups of 8 rows (1024 bytes), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t descriptor(const void* tile) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t((address & 0x3FFFF) >> 4) | uint64_t(1) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}

#if defined(HD_NVIDIA_WGMMA)
// Before the first wgmma that touches accumulators the warps' own instructions wrote.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending committed groups are still running.
template <int kPending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Ties the accumulators to this point of the program: the compiler sees the wgmma's register results
// only as asm operands, so without this it could read them before the wait that makes them final.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Makes this thread's generic-proxy writes to shared memory (cp.async's) visible to wgmma's reads.
__device__ __forceinline__ void fence_shared_for_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d (64 x N f32, N / 2 values a thread) += A (64 x 16 at descriptor a) * B (16 x N at descriptor b). The
// operands are spelled out, 16 at a time (inline assembly has no loops): REGS names the accumulators'
// operands %0.. (N / 2 of them), A, B and SCALE the descriptors' and scale-d's numbers after them.
// clang-format off
#define HD_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define HD_WGMMA_R16 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define HD_WGMMA_R32 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define HD_WGMMA_R48 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define HD_WGMMA_R64 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define HD_WGMMA_R80 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define HD_WGMMA_R96 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define HD_WGMMA_R112 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define HD_WGMMA_D16(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7]), \
  "+f"(d[i + 8]), "+f"(d[i + 9]), "+f"(d[i + 10]), "+f"(d[i + 11]), "+f"(d[i + 12]), "+f"(d[i + 13]), "+f"(d[i + 14]), "+f"(d[i + 15])
#define HD_WGMMA(SHAPE, TYPE, REGS, A, B, SCALE, ...) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE ", 0;\n" \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " {" REGS "}, %" A ", %" B \
               ", p, 1, 1, 0, 0;\n}\n" \
               : __VA_ARGS__ : "l"(a), "l"(b), "r"(scale_d))
#define HD_WGMMA_M64N128(TYPE) \
  HD_WGMMA("m64n128k16", TYPE, HD_WGMMA_R0 ", " HD_WGMMA_R16 ", " HD_WGMMA_R32 ", " HD_WGMMA_R48, "64", "65", "66", \
           HD_WGMMA_D16(0), HD_WGMMA_D16(16), HD_WGMMA_D16(32), HD_WGMMA_D16(48))
#define HD_WGMMA_M64N160(TYPE) \
  HD_WGMMA("m64n160k16", TYPE, HD_WGMMA_R0 ", " HD_WGMMA_R16 ", " HD_WGMMA_R32 ", " HD_WGMMA_R48 ", " HD_WGMMA_R64, \
           "80", "81", "82", HD_WGMMA_D16(0), HD_WGMMA_D16(16), HD_WGMMA_D16(32), HD_WGMMA_D16(48), HD_WGMMA_D16(64))
#define HD_WGMMA_M64N256(TYPE) \
  HD_WGMMA("m64n256k16", TYPE, HD_WGMMA_R0 ", " HD_WGMMA_R16 ", " HD_WGMMA_R32 ", " HD_WGMMA_R48 ", " HD_WGMMA_R64 \
           ", " HD_WGMMA_R80 ", " HD_WGMMA_R96 ", " HD_WGMMA_R112, "128", "129", "130", \
           HD_WGMMA_D16(0), HD_WGMMA_D16(16), HD_WGMMA_D16(32), HD_WGMMA_D16(48), HD_WGMMA_D16(64), HD_WGMMA_D16(80), \
           HD_WGMMA_D16(96), HD_WGMMA_D16(112))
// clang-format on

template <int N, class T>
__device__ __forceinline__ void mma_async(float (&d)[N / 2], uint64_t a, uint64_t b) {
  constexpr int scale_d = 1;  // accumulate (d starts at zero)
  static_assert(N == 128 || N == 160 || N == 256, "wgmma widths this build spells out: 128, 160, 256");
  if constexpr (std::is_same_v<T, __half>) {
    if constexpr (N == 128) HD_WGMMA_M64N128("f16");
    if constexpr (N == 160) HD_WGMMA_M64N160("f16");
    if constexpr (N == 256) HD_WGMMA_M64N256("f16");
  } else {
    if constexpr (N == 128) HD_WGMMA_M64N128("bf16");
    if constexpr (N == 160) HD_WGMMA_M64N160("bf16");
    if constexpr (N == 256) HD_WGMMA_M64N256("bf16");
  }
}
#undef HD_WGMMA_M64N128
#undef HD_WGMMA_M64N160
#undef HD_WGMMA_M64N256
#undef HD_WGMMA
#undef HD_WGMMA_D16
#undef HD_WGMMA_R0
#undef HD_WGMMA_R16
#undef HD_WGMMA_R32
#undef HD_WGMMA_R48
#undef HD_WGMMA_R64
#undef HD_WGMMA_R80
#undef HD_WGMMA_R96
#undef HD_WGMMA_R112
#endif

}  // namespace hd::gpu::wgmma
