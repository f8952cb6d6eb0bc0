// Hopper's warpgroup matrix instructions (wgmma.mma_async, sm_90a): four warps multiply a 64 x N tile of
// A by an N-wide tile of B, B (and A, or A from registers) read straight from shared memory through 64-bit
// descriptors, while the warps go on issuing. One shared-memory layout is described: rows of 64 16-bit
// elements (128 bytes) stored with the 128-byte swizzle (the 16-byte chunk c of row r at chunk
// c ^ (r % 8)), so that the eight rows one core matrix spans fall in different banks. Read K-major (a
// row holds 64 k of one row of A or column of B: the GEMM's operands, attention's Q and K) or N-major (a
// row holds 64 columns of B at one k: attention's V, whose rows are keys). Compiled only for sm_90a
// (HD_NVIDIA_WGMMA); elsewhere these are never called.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/gpu/common.cuh"

namespace hd::gpu::wgmma {

inline constexpr int kWarpgroupThreads = 4 * kWarpSize;  // the threads one wgmma spans
inline constexpr int kRowBytes = 128;                     // a swizzled row: 64 16-bit elements
inline constexpr int kAtomBytes = 1024;                   // a swizzle atom: 8 rows, 1024-byte aligned

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of 128-byte swizzled rows.
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * kRowBytes + ((chunk ^ (row & 7)) << 4); }

// The descriptor of a K-major, 128-byte-swizzled operand whose rows start at `tile` (1024-byte aligned,
// plus 32 bytes per 16 k of the slice): start address, leading offset (unused by this layout: 1), stride
// between groups of 8 rows (1024 bytes), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t descriptor(const void* tile) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t((address & 0x3FFFF) >> 4) | uint64_t(1) << 16 | uint64_t(kAtomBytes >> 4) << 32 |
         uint64_t(1) << 62;
}

// The descriptor of an N-major, 128-byte-swizzled B whose k-row 0 starts at `tile` (1024-byte aligned, plus
// 1024 bytes per 8 k): leading offset = the bytes between 64-column blocks of rows (where N > 64), stride
// between groups of 8 k-rows 1024 bytes, swizzle mode 1 (CUTLASS's canonical MN-major SW128 layout,
// make_gmma_desc<Major::MN>).
__device__ __forceinline__ uint64_t descriptor_n_major(const void* tile, int column_block_bytes) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t((address & 0x3FFFF) >> 4) | uint64_t((column_block_bytes >> 4) & 0x3FFF) << 16 |
         uint64_t(kAtomBytes >> 4) << 32 | uint64_t(1) << 62;
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
// The same for A fragments in registers: keeps them (their registers) alive until this point, after the
// wait for the wgmma that reads them, so that nothing else is written into them while it runs.
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}
// Makes this thread's generic-proxy writes to shared memory (cp.async's) visible to wgmma's reads.
__device__ __forceinline__ void fence_shared_for_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The accumulators and operands of one wgmma are spelled out in inline assembly, which has no loops:
// HD_WGMMA_Qi names operands %4i..%4i+3, HD_WGMMA_REGS_r the first r (the accumulators: N / 2 of them)
// and HD_WGMMA_DS_r their constraints; the operands after them are numbered by hand below.
// clang-format off
#define HD_WGMMA_Q0 "%0, %1, %2, %3"
#define HD_WGMMA_Q1 "%4, %5, %6, %7"
#define HD_WGMMA_Q2 "%8, %9, %10, %11"
#define HD_WGMMA_Q3 "%12, %13, %14, %15"
#define HD_WGMMA_Q4 "%16, %17, %18, %19"
#define HD_WGMMA_Q5 "%20, %21, %22, %23"
#define HD_WGMMA_Q6 "%24, %25, %26, %27"
#define HD_WGMMA_Q7 "%28, %29, %30, %31"
#define HD_WGMMA_Q8 "%32, %33, %34, %35"
#define HD_WGMMA_Q9 "%36, %37, %38, %39"
#define HD_WGMMA_Q10 "%40, %41, %42, %43"
#define HD_WGMMA_Q11 "%44, %45, %46, %47"
#define HD_WGMMA_Q12 "%48, %49, %50, %51"
#define HD_WGMMA_Q13 "%52, %53, %54, %55"
#define HD_WGMMA_Q14 "%56, %57, %58, %59"
#define HD_WGMMA_Q15 "%60, %61, %62, %63"
#define HD_WGMMA_Q16 "%64, %65, %66, %67"
#define HD_WGMMA_Q17 "%68, %69, %70, %71"
#define HD_WGMMA_Q18 "%72, %73, %74, %75"
#define HD_WGMMA_Q19 "%76, %77, %78, %79"
#define HD_WGMMA_Q20 "%80, %81, %82, %83"
#define HD_WGMMA_Q21 "%84, %85, %86, %87"
#define HD_WGMMA_Q22 "%88, %89, %90, %91"
#define HD_WGMMA_Q23 "%92, %93, %94, %95"
#define HD_WGMMA_Q24 "%96, %97, %98, %99"
#define HD_WGMMA_Q25 "%100, %101, %102, %103"
#define HD_WGMMA_Q26 "%104, %105, %106, %107"
#define HD_WGMMA_Q27 "%108, %109, %110, %111"
#define HD_WGMMA_Q28 "%112, %113, %114, %115"
#define HD_WGMMA_Q29 "%116, %117, %118, %119"
#define HD_WGMMA_Q30 "%120, %121, %122, %123"
#define HD_WGMMA_Q31 "%124, %125, %126, %127"
#define HD_WGMMA_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define HD_WGMMA_REGS_16 HD_WGMMA_Q0 ", " HD_WGMMA_Q1 ", " HD_WGMMA_Q2 ", " HD_WGMMA_Q3
#define HD_WGMMA_REGS_20 HD_WGMMA_REGS_16 ", " HD_WGMMA_Q4
#define HD_WGMMA_REGS_24 HD_WGMMA_REGS_20 ", " HD_WGMMA_Q5
#define HD_WGMMA_REGS_32 HD_WGMMA_REGS_24 ", " HD_WGMMA_Q6 ", " HD_WGMMA_Q7
#define HD_WGMMA_REGS_40 HD_WGMMA_REGS_32 ", " HD_WGMMA_Q8 ", " HD_WGMMA_Q9
#define HD_WGMMA_REGS_48 HD_WGMMA_REGS_40 ", " HD_WGMMA_Q10 ", " HD_WGMMA_Q11
#define HD_WGMMA_REGS_64 HD_WGMMA_REGS_48 ", " HD_WGMMA_Q12 ", " HD_WGMMA_Q13 ", " HD_WGMMA_Q14 ", " HD_WGMMA_Q15
#define HD_WGMMA_REGS_80 HD_WGMMA_REGS_64 ", " HD_WGMMA_Q16 ", " HD_WGMMA_Q17 ", " HD_WGMMA_Q18 ", " HD_WGMMA_Q19
#define HD_WGMMA_REGS_128 HD_WGMMA_REGS_80 ", " HD_WGMMA_Q20 ", " HD_WGMMA_Q21 ", " HD_WGMMA_Q22 ", " HD_WGMMA_Q23 ", " HD_WGMMA_Q24 ", " HD_WGMMA_Q25 ", " HD_WGMMA_Q26 ", " HD_WGMMA_Q27 ", " HD_WGMMA_Q28 ", " HD_WGMMA_Q29 ", " HD_WGMMA_Q30 ", " HD_WGMMA_Q31
#define HD_WGMMA_DS_16 HD_WGMMA_D4(0), HD_WGMMA_D4(4), HD_WGMMA_D4(8), HD_WGMMA_D4(12)
#define HD_WGMMA_DS_20 HD_WGMMA_DS_16, HD_WGMMA_D4(16)
#define HD_WGMMA_DS_24 HD_WGMMA_DS_20, HD_WGMMA_D4(20)
#define HD_WGMMA_DS_32 HD_WGMMA_DS_24, HD_WGMMA_D4(24), HD_WGMMA_D4(28)
#define HD_WGMMA_DS_40 HD_WGMMA_DS_32, HD_WGMMA_D4(32), HD_WGMMA_D4(36)
#define HD_WGMMA_DS_48 HD_WGMMA_DS_40, HD_WGMMA_D4(40), HD_WGMMA_D4(44)
#define HD_WGMMA_DS_64 HD_WGMMA_DS_48, HD_WGMMA_D4(48), HD_WGMMA_D4(52), HD_WGMMA_D4(56), HD_WGMMA_D4(60)
#define HD_WGMMA_DS_80 HD_WGMMA_DS_64, HD_WGMMA_D4(64), HD_WGMMA_D4(68), HD_WGMMA_D4(72), HD_WGMMA_D4(76)
#define HD_WGMMA_DS_128 HD_WGMMA_DS_80, HD_WGMMA_D4(80), HD_WGMMA_D4(84), HD_WGMMA_D4(88), HD_WGMMA_D4(92), HD_WGMMA_D4(96), HD_WGMMA_D4(100), HD_WGMMA_D4(104), HD_WGMMA_D4(108), HD_WGMMA_D4(112), HD_WGMMA_D4(116), HD_WGMMA_D4(120), HD_WGMMA_D4(124)
// Both operands from shared memory: K-major (TRANS "0, 0": imm-trans-a = imm-trans-b = 0) or both
// MN-major ("1, 1").
#define HD_WGMMA_SS(N, TYPE, R, A, B, SCALE, TRANS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE ", 0;\n" \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" HD_WGMMA_REGS_##R "}, %" A ", %" B \
               ", p, 1, 1, " TRANS ";\n}\n" \
               : HD_WGMMA_DS_##R : "l"(a), "l"(b), "r"(scale_d))
// A from registers (four 32-bit registers a thread), B from shared memory N-major (imm-trans-b = 1).
#define HD_WGMMA_RS(N, TYPE, R, A4, B, SCALE) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE ", 0;\n" \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" HD_WGMMA_REGS_##R "}, {" A4 "}, %" B \
               ", p, 1, 1, 1;\n}\n" \
               : HD_WGMMA_DS_##R : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d))
#define HD_WGMMA_TYPED(FORM, N, ...) \
  if constexpr (W == N) { \
    if constexpr (std::is_same_v<T, __half>) FORM(N, "f16", __VA_ARGS__); \
    else FORM(N, "bf16", __VA_ARGS__); \
  }
// clang-format on

// d (64 x N f32, N / 2 values a thread) = A (64 x 16 at descriptor a) * B (16 x N at descriptor b), plus d
// unless scale_d is 0. Both operands K-major.
template <int W, class T>
__device__ __forceinline__ void mma_async(float (&d)[W / 2], uint64_t a, uint64_t b, int scale_d = 1) {
  static_assert(W == 64 || W == 128 || W == 160 || W == 256, "widths this build spells out: 64, 128, 160, 256");
  HD_WGMMA_TYPED(HD_WGMMA_SS, 64, 32, "32", "33", "34", "0, 0")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 128, 64, "64", "65", "66", "0, 0")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 160, 80, "80", "81", "82", "0, 0")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 256, 128, "128", "129", "130", "0, 0")
}

// d (64 x N f32) = A (64 x 16) * B (16 x N), plus d unless scale_d is 0, both read MN-major: A at
// descriptor a stored as B is by descriptor_n_major (a row of 64 elements of A's column at one k), B at
// descriptor b likewise. Attention's gradient takes dQ = dS K this way, from dSᵀ and K as they are stored.
template <int W, class T>
__device__ __forceinline__ void mma_async_mn_major(float (&d)[W / 2], uint64_t a, uint64_t b,
                                                   int scale_d = 1) {
  static_assert(W == 32 || W == 40 || W == 48 || W == 64 || W == 80 || W == 96,
                "widths this build spells out: 32, 40, 48, 64, 80, 96");
  HD_WGMMA_TYPED(HD_WGMMA_SS, 32, 16, "16", "17", "18", "1, 1")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 40, 20, "20", "21", "22", "1, 1")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 48, 24, "24", "25", "26", "1, 1")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 64, 32, "32", "33", "34", "1, 1")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 80, 40, "40", "41", "42", "1, 1")
  HD_WGMMA_TYPED(HD_WGMMA_SS, 96, 48, "48", "49", "50", "1, 1")
}

// d (64 x N f32) += A (64 x 16, this thread's fragment in registers: mma.sync's m16n8k16 A layout, warp w
// of the warpgroup holding rows 16w..16w+15) * B (16 x N at descriptor b, N-major: descriptor_n_major).
template <int W, class T>
__device__ __forceinline__ void mma_async(float (&d)[W / 2], const uint32_t (&a)[4], uint64_t b, int scale_d = 1) {
  static_assert(W == 32 || W == 40 || W == 48 || W == 64 || W == 80 || W == 96 || W == 128 || W == 160,
                "widths this build spells out: 32, 40, 48, 64, 80, 96, 128, 160");
  HD_WGMMA_TYPED(HD_WGMMA_RS, 32, 16, HD_WGMMA_Q4, "20", "21")
  HD_WGMMA_TYPED(HD_WGMMA_RS, 40, 20, HD_WGMMA_Q5, "24", "25")
  HD_WGMMA_TYPED(HD_WGMMA_RS, 48, 24, HD_WGMMA_Q6, "28", "29")
  HD_WGMMA_TYPED(HD_WGMMA_RS, 64, 32, HD_WGMMA_Q8, "36", "37")
  HD_WGMMA_TYPED(HD_WGMMA_RS, 80, 40, HD_WGMMA_Q10, "44", "45")
  HD_WGMMA_TYPED(HD_WGMMA_RS, 96, 48, HD_WGMMA_Q12, "52", "53")
  HD_WGMMA_TYPED(HD_WGMMA_RS, 128, 64, HD_WGMMA_Q16, "68", "69")
  HD_WGMMA_TYPED(HD_WGMMA_RS, 160, 80, HD_WGMMA_Q20, "84", "85")
}
#undef HD_WGMMA_TYPED
#undef HD_WGMMA_RS
#undef HD_WGMMA_SS
#undef HD_WGMMA_D4
#undef HD_WGMMA_Q0
#undef HD_WGMMA_Q1
#undef HD_WGMMA_Q2
#undef HD_WGMMA_Q3
#undef HD_WGMMA_Q4
#undef HD_WGMMA_Q5
#undef HD_WGMMA_Q6
#undef HD_WGMMA_Q7
#undef HD_WGMMA_Q8
#undef HD_WGMMA_Q9
#undef HD_WGMMA_Q10
#undef HD_WGMMA_Q11
#undef HD_WGMMA_Q12
#undef HD_WGMMA_Q13
#undef HD_WGMMA_Q14
#undef HD_WGMMA_Q15
#undef HD_WGMMA_Q16
#undef HD_WGMMA_Q17
#undef HD_WGMMA_Q18
#undef HD_WGMMA_Q19
#undef HD_WGMMA_Q20
#undef HD_WGMMA_Q21
#undef HD_WGMMA_Q22
#undef HD_WGMMA_Q23
#undef HD_WGMMA_Q24
#undef HD_WGMMA_Q25
#undef HD_WGMMA_Q26
#undef HD_WGMMA_Q27
#undef HD_WGMMA_Q28
#undef HD_WGMMA_Q29
#undef HD_WGMMA_Q30
#undef HD_WGMMA_Q31
#undef HD_WGMMA_REGS_16
#undef HD_WGMMA_REGS_20
#undef HD_WGMMA_REGS_24
#undef HD_WGMMA_REGS_32
#undef HD_WGMMA_REGS_40
#undef HD_WGMMA_REGS_48
#undef HD_WGMMA_REGS_64
#undef HD_WGMMA_REGS_80
#undef HD_WGMMA_REGS_128
#undef HD_WGMMA_DS_16
#undef HD_WGMMA_DS_20
#undef HD_WGMMA_DS_24
#undef HD_WGMMA_DS_32
#undef HD_WGMMA_DS_40
#undef HD_WGMMA_DS_48
#undef HD_WGMMA_DS_64
#undef HD_WGMMA_DS_80
#undef HD_WGMMA_DS_128
#endif

}  // namespace hd::gpu::wgmma
