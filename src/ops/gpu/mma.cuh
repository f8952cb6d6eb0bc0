// The matrix-fragment layer: a 16x8x16 multiply-accumulate (C[16x8] += A[16x16] · B[16x8], f16 or bf16
// inputs, f32 accumulation) on a group of 32 lanes, with the register layout of NVIDIA's
// mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"). Kernels above this layer are
// written against that layout only and never name a vendor instruction.
//
//   lane = 4·g + t (g = lane / 4, t = lane % 4)
//   A: r[0] = A[g][2t..2t+1], r[1] = A[g+8][2t..2t+1], r[2] = A[g][2t+8..2t+9], r[3] = A[g+8][2t+8..2t+9]
//   B: r[0] = B[2t..2t+1][g], r[1] = B[2t+8..2t+9][g]
//   C: r[0..1] = C[g][2t..2t+1], r[2..3] = C[g+8][2t..2t+1]
// (two 16-bit values per 32-bit register, the lower index in the low half).
//
// Implementations: the tensor-core instruction on NVIDIA sm_80 and newer; everywhere else (and on
// demand for testing) a portable one that gathers the operands with lane shuffles and multiplies in f32.
//
// AMD's matrix cores work in layouts of their own, each a descriptor below that kernels take as a template
// parameter (the GEMM, and AMD's attention kernel): CDNA's MFMA, 16x16x16 on 64 lanes (Fragments16x16,
// gfx90a/gfx942), and RDNA's WMMA, 16x16x16 on 32 lanes with RDNA3's and RDNA4's register maps
// (FragmentsWmma<11>, FragmentsWmma<12>). Each descriptor names its lanes, fragment types, accumulator
// count, loads, multiply-accumulate and where each lane's accumulators sit in C, says whether the target
// being compiled offers it (kOnThisTarget), and has an emulation that CUDA builds run in the tests.
#pragma once

#include <type_traits>

#include "ops/gpu/matrix_unit.h"
#include "ops/gpu/numeric.cuh"

namespace hd::gpu {

struct FragmentA {
  uint32_t r[4];
};
struct FragmentB {
  uint32_t r[2];
};
struct FragmentC {
  float r[4];
};

template <class T>
__device__ inline float dot2(uint32_t a, uint32_t b) {
  return low_half<T>(a) * low_half<T>(b) + high_half<T>(a) * high_half<T>(b);
}

// Portable path: each lane computes its own four outputs from operands gathered across the group.
template <class T>
__device__ inline void mma_16x8x16_portable(FragmentC& c, const FragmentA& a, const FragmentB& b) {
  const int lane = int(threadIdx.x) % kFragmentLanes, g = lane / 4, t = lane % 4;
  // Not unrolled: a tile's 16 calls, each unrolled into 32 shuffles, took RDNA's registers past 256 and
  // spilled (gfx1100, clang 22); as a loop each call keeps only its four pairs of operands live.
#pragma unroll 1
  for (int k = 0; k < 4; ++k) {  // k: the lane of the quad that holds this slice of A's rows and B's columns
    const int src_a = 4 * g + k;
    const uint32_t a_lo = shuffle(a.r[0], src_a, kFragmentLanes), a_lo8 = shuffle(a.r[1], src_a, kFragmentLanes);
    const uint32_t a_hi = shuffle(a.r[2], src_a, kFragmentLanes), a_hi8 = shuffle(a.r[3], src_a, kFragmentLanes);
    const int src_b0 = 4 * (2 * t) + k, src_b1 = 4 * (2 * t + 1) + k;
    const uint32_t b0_lo = shuffle(b.r[0], src_b0, kFragmentLanes), b0_hi = shuffle(b.r[1], src_b0, kFragmentLanes);
    const uint32_t b1_lo = shuffle(b.r[0], src_b1, kFragmentLanes), b1_hi = shuffle(b.r[1], src_b1, kFragmentLanes);
    c.r[0] += dot2<T>(a_lo, b0_lo) + dot2<T>(a_hi, b0_hi);
    c.r[1] += dot2<T>(a_lo, b1_lo) + dot2<T>(a_hi, b1_hi);
    c.r[2] += dot2<T>(a_lo8, b0_lo) + dot2<T>(a_hi8, b0_hi);
    c.r[3] += dot2<T>(a_lo8, b1_lo) + dot2<T>(a_hi8, b1_hi);
  }
}

template <class T, bool kPortable>
__device__ inline void mma_16x8x16(FragmentC& c, const FragmentA& a, const FragmentB& b) {
#if defined(HD_NVIDIA_MMA)
  if constexpr (!kPortable) {
    if constexpr (std::is_same_v<T, __half>) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c.r[0]), "+f"(c.r[1]), "+f"(c.r[2]), "+f"(c.r[3])
          : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
    } else {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c.r[0]), "+f"(c.r[1]), "+f"(c.r[2]), "+f"(c.r[3])
          : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
    }
    return;
  }
#endif
  mma_16x8x16_portable<T>(c, a, b);
}

// Shared-memory tiles of 16-bit values with 16-byte aligned rows, read into fragments. With rows a
// multiple of 16 bytes plus 16 bytes of padding apart, the eight rows that one ldmatrix reads fall
// into different banks.
//
// A = the 16x16 block at (r0, k0) of a row-major [rows][k] tile.
template <bool kPortable>
__device__ inline FragmentA load_a(const uint16_t* tile, int stride, int r0, int k0) {
  const int lane = int(threadIdx.x) % kFragmentLanes;
#if defined(HD_NVIDIA_MMA)
  if constexpr (!kPortable) {
    // Lanes 0-15 name rows r0..r0+15 at column k0, lanes 16-31 the same rows at k0 + 8: the four 8x8
    // matrices arrive as r[0] (rows 0-7, k 0-7), r[1] (rows 8-15), r[2] (rows 0-7, k 8-15), r[3].
    const uint16_t* row = tile + (r0 + lane % 16) * stride + k0 + (lane / 16) * 8;
    const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    FragmentA a;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(a.r[0]), "=r"(a.r[1]), "=r"(a.r[2]), "=r"(a.r[3])
                 : "r"(address));
    return a;
  }
#endif
  const int g = lane / 4, t = lane % 4;
  const auto pair = [&](int r, int k) { return *reinterpret_cast<const uint32_t*>(tile + r * stride + k); };
  return FragmentA{{pair(r0 + g, k0 + 2 * t), pair(r0 + g + 8, k0 + 2 * t), pair(r0 + g, k0 + 8 + 2 * t),
                    pair(r0 + g + 8, k0 + 8 + 2 * t)}};
}

// B = the 16x8 block at (k0, n0) of B stored as [n][k] rows (a weight matrix [out, in], or keys).
template <bool kPortable>
__device__ inline FragmentB load_b(const uint16_t* tile, int stride, int n0, int k0) {
  const int lane = int(threadIdx.x) % kFragmentLanes;
#if defined(HD_NVIDIA_MMA)
  if constexpr (!kPortable) {
    // Lanes 0-7 name rows n0..n0+7 at k0, lanes 8-15 the same rows at k0 + 8 (the rest are ignored).
    const uint16_t* row = tile + (n0 + lane % 8) * stride + k0 + ((lane / 8) % 2) * 8;
    const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    FragmentB b;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(b.r[0]), "=r"(b.r[1])
                 : "r"(address));
    return b;
  }
#endif
  const int g = lane / 4, t = lane % 4;
  const auto pair = [&](int k) { return *reinterpret_cast<const uint32_t*>(tile + (n0 + g) * stride + k); };
  return FragmentB{{pair(k0 + 2 * t), pair(k0 + 8 + 2 * t)}};
}

// Two neighbouring B fragments, the 16x8 blocks at (k0, n0) and (k0, n0 + 8): one ldmatrix.x4 instead of
// two .x2 on the tensor-core path.
template <bool kPortable>
__device__ inline void load_b_pair(const uint16_t* tile, int stride, int n0, int k0, FragmentB& b0, FragmentB& b1) {
#if defined(HD_NVIDIA_MMA)
  if constexpr (!kPortable) {
    // Lanes 0-7: rows n0..n0+7 at k0; 8-15: the same rows at k0 + 8; 16-23 and 24-31: rows n0+8..n0+15.
    const int lane = int(threadIdx.x) % kFragmentLanes;
    const uint16_t* row = tile + (n0 + lane % 8 + (lane / 16) * 8) * stride + k0 + ((lane / 8) % 2) * 8;
    const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b0.r[0]), "=r"(b0.r[1]), "=r"(b1.r[0]), "=r"(b1.r[1])
                 : "r"(address));
    return;
  }
#endif
  b0 = load_b<kPortable>(tile, stride, n0, k0);
  b1 = load_b<kPortable>(tile, stride, n0 + 8, k0);
}

// B = the 16x8 block at (k0, n0) of a matrix stored transposed in shared memory: element (k, n) at
// tile[(k0 + k) * stride + n0 + n], 16-bit values, rows 16-byte aligned. (In attention: V [keys][dims],
// read as the B operand of P · V.)
template <bool kPortable>
__device__ inline FragmentB load_b_transposed(const uint16_t* tile, int stride, int k0, int n0) {
  const int lane = int(threadIdx.x) % kFragmentLanes, g = lane / 4, t = lane % 4;
#if defined(HD_NVIDIA_MMA)
  if constexpr (!kPortable) {
    // Lanes 0-7 name the rows of the first 8x8 matrix (k0..k0+7), lanes 8-15 those of the second.
    const uint16_t* row = tile + (k0 + (lane % 16)) * stride + n0;
    const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    FragmentB b;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(b.r[0]), "=r"(b.r[1])
                 : "r"(address));
    return b;
  }
#endif
  const auto at = [&](int k) { return uint32_t(tile[(k0 + k) * stride + n0 + g]); };
  return FragmentB{{at(2 * t) | (at(2 * t + 1) << 16), at(2 * t + 8) | (at(2 * t + 9) << 16)}};
}

// ---- Fragment layouts as template parameters ----
//
// A layout names its matrix unit (kUnit, that of the instruction it runs or emulates), the lanes of a
// fragment group, the fragment types, the loads from shared memory (the [rows][k] tiles above; with
// kPairedB also two neighbouring B fragments in one load), the multiply-accumulate, and where each lane's accumulators sit in the 16 x kN tile of C, so that a
// kernel's epilogue needs no vendor knowledge:
//   C.r[r] of `lane` is C[c_row(lane, r)][c_col(lane, r)]; with kColumnPairs, registers 2h and 2h+1
//   are neighbours in one row (one 32-bit store of two 16-bit values).

// NVIDIA's m16n8k16 on 32 lanes (mma.sync on sm_80+, or the portable shuffles).
template <bool kPortable>
struct Fragments16x8 {
  static constexpr MatrixUnit kUnit = kPortable ? MatrixUnit::kNone : MatrixUnit::kNvidiaMma;
  static constexpr int kLanes = 32, kN = 8, kAccumulators = 4;
  static constexpr bool kColumnPairs = true;
  static constexpr int kMaxGroups = 1024 / kLanes;  // fragment groups of a block: the thread limit only
  // The portable path runs everywhere; the instruction only where it exists (CUDA builds are sm_80+).
#if defined(HD_GPU_HIP)
  static constexpr bool kOnThisTarget = kPortable;
#else
  static constexpr bool kOnThisTarget = true;
#endif
  using A = FragmentA;
  using B = FragmentB;
  using C = FragmentC;
  template <class T>
  __device__ static void mma(FragmentC& c, const A& a, const B& b) { mma_16x8x16<T, kPortable>(c, a, b); }
  __device__ static A load_a(const uint16_t* tile, int stride, int r0, int k0) {
    return gpu::load_a<kPortable>(tile, stride, r0, k0);
  }
  __device__ static B load_b(const uint16_t* tile, int stride, int n0, int k0) {
    return gpu::load_b<kPortable>(tile, stride, n0, k0);
  }
  // B fragments at n0 and n0 + kN in one load (the tensor-core path's ldmatrix.x4).
  static constexpr bool kPairedB = !kPortable;
  __device__ static void load_b_pair(const uint16_t* tile, int stride, int n0, int k0, B& b0, B& b1) {
    gpu::load_b_pair<kPortable>(tile, stride, n0, k0, b0, b1);
  }
  __device__ static int c_row(int lane, int r) { return lane / 4 + 8 * (r / 2); }
  __device__ static int c_col(int lane, int r) { return 2 * (lane % 4) + r % 2; }
};

// AMD CDNA's v_mfma_f32_16x16x16{f16,bf16_1k} on a 64-lane wavefront (AMD Instinct MI200 ISA, "Matrix
// fused multiply-add"; AMD's matrix instruction calculator). With lane = 16·q + i (q = lane / 16):
//   A[16x16]: lane holds A[i][4q..4q+3]   (four 16-bit values in two registers, lower k in the low half)
//   B[16x16]: lane holds B[4q..4q+3][i]   (B stored [n][k], so also four consecutive k of row n = i)
//   C[16x16]: lane holds C[4q + r][i] in r[r]
// Both operands are then one 8-byte read of a [rows][k] tile. kEmulate computes the same layout without
// the instruction (shared memory + barriers, every thread of the block calling in step): where no MFMA
// exists, and so that an NVIDIA GPU can test the kernels' use of this layout.
// The multiply-accumulate of a 16x16x16 layout without its instruction, for any layout descriptor below:
// each lane publishes its operands in shared memory, then forms its accumulators from the whole group's,
// finding element (row or column `index`, k) of A and B in the lane Layout::holder(index, k), 16-bit
// slot Layout::slot(k). Every thread of the block calls in step (the barriers): an emulation for tests
// and for targets without the instruction, never fast.
template <class Layout, class T>
__device__ void emulate_mma_16x16x16(typename Layout::C& c, const typename Layout::A& a, const typename Layout::B& b) {
  static_assert(std::is_same_v<typename Layout::A, typename Layout::B>);
  __shared__ typename Layout::A scratch[Layout::kMaxGroups][2][Layout::kLanes];
  const int group = int(threadIdx.x) / Layout::kLanes, lane = int(threadIdx.x) % Layout::kLanes;
  __syncthreads();  // the previous call's reads are done
  scratch[group][0][lane] = a;
  scratch[group][1][lane] = b;
  __syncthreads();
  const auto element = [&](int which, int index, int k) {
    const int slot = Layout::slot(k);
    const uint32_t word = scratch[group][which][Layout::holder(index, k)].r[slot / 2];
    return slot % 2 ? high_half<T>(word) : low_half<T>(word);
  };
  for (int r = 0; r < Layout::kAccumulators; ++r) {
    const int row = Layout::c_row(lane, r), col = Layout::c_col(lane, r);
    float sum = 0.f;
    for (int k = 0; k < 16; ++k) sum += element(0, row, k) * element(1, col, k);
    c.r[r] += sum;
  }
}

struct Fragment4 {
  uint32_t r[2];
};
template <bool kEmulate>
struct Fragments16x16 {
  static constexpr MatrixUnit kUnit = MatrixUnit::kAmdMfma;  // its instruction's, or that emulated
  static constexpr int kLanes = 64, kN = 16, kAccumulators = 4;
  static constexpr bool kColumnPairs = false, kPairedB = false;
  static constexpr int kMaxGroups = 8;  // the emulation's scratch: fragment groups of a block, at most
  // The instruction on CDNA only; the emulation in CUDA builds only (the tests' proxy for AMD).
#if defined(HD_AMD_MFMA)
  static constexpr bool kOnThisTarget = !kEmulate;
#elif defined(HD_GPU_HIP)
  static constexpr bool kOnThisTarget = false;
#else
  static constexpr bool kOnThisTarget = kEmulate;
#endif
  using A = Fragment4;
  using B = Fragment4;
  using C = FragmentC;
  template <class T>
  __device__ static void mma(FragmentC& c, const A& a, const B& b) {
#if defined(HD_AMD_MFMA)
    if constexpr (!kEmulate) {
      using Float4 = float __attribute__((ext_vector_type(4)));
      Float4 acc = __builtin_bit_cast(Float4, c);
      if constexpr (std::is_same_v<T, __half>) {
        using Half4 = _Float16 __attribute__((ext_vector_type(4)));
        acc = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(Half4, a), __builtin_bit_cast(Half4, b), acc,
                                                    0, 0, 0);
      } else {
        using Short4 = short __attribute__((ext_vector_type(4)));
        acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(Short4, a), __builtin_bit_cast(Short4, b),
                                                        acc, 0, 0, 0);
      }
      c = __builtin_bit_cast(FragmentC, acc);
    } else {
      emulated_mma<T>(c, a, b);
    }
#else
    if constexpr (!kEmulate) {
      HD_TRAP();  // not offered here (kOnThisTarget): kernels on this layout are trap stubs
    } else {
      emulated_mma<T>(c, a, b);
    }
#endif
  }
  __device__ static A load_a(const uint16_t* tile, int stride, int r0, int k0) {
    const int lane = int(threadIdx.x) % kLanes;
    return load4(tile + (r0 + lane % 16) * stride + k0 + 4 * (lane / 16));
  }
  __device__ static B load_b(const uint16_t* tile, int stride, int n0, int k0) { return load_a(tile, stride, n0, k0); }
  __device__ static int c_row(int lane, int r) { return 4 * (lane / 16) + r; }
  __device__ static int c_col(int lane, int /*r*/) { return lane % 16; }
  static constexpr bool kRowPairs = true;  // registers 2h and 2h+1 hold neighbouring rows of one column
  // Where element (row or column `index`, k) of A and B lives: lane index + 16 (k / 4), 16-bit slot k % 4.
  __device__ static int holder(int index, int k) { return index + 16 * (k / 4); }
  __device__ static int slot(int k) { return k % 4; }

  // The B operand whose column lane % 16 holds this lane's accumulators of a C fragment, as T: in
  // attention, the probabilities Pᵀ computed as scores Sᵀ, fed to Oᵀ = Vᵀ · Pᵀ. On MFMA the maps agree
  // register for register.
  template <class T>
  __device__ static B b_from_accumulators(const float (&p)[kAccumulators]) {
    return B{{pack2<T>(p[0], p[1]), pack2<T>(p[2], p[3])}};
  }

  // The maximum / sum of v over the four lanes that hold one column of C (lanes i, i + 16, i + 32,
  // i + 48), returned to each of them. Every thread of the block calls in step (the emulation's barriers).
  __device__ static float column_max(float v) {
    return column_reduce(v, [](float x, float y) { return fmaxf(x, y); });
  }
  __device__ static float column_sum(float v) {
    return column_reduce(v, [](float x, float y) { return x + y; });
  }

 private:
  __device__ static A load4(const uint16_t* p) {  // 8-byte aligned: rows of 16-byte multiples, k0 % 4 == 0
    const auto* words = reinterpret_cast<const uint32_t*>(p);
    return A{{words[0], words[1]}};
  }
  template <class Op>
  __device__ static float column_reduce(float v, Op op) {
#if defined(HD_AMD_MFMA)
    if constexpr (!kEmulate) {
      v = op(v, shuffle_xor(v, 16, kLanes));
      return op(v, shuffle_xor(v, 32, kLanes));
    } else {
      return emulated_column_reduce(v, op);
    }
#else
    return emulated_column_reduce(v, op);
#endif
  }
  // The group's lanes need not share a warp here (two NVIDIA warps make one group): shared memory.
  template <class Op>
  __device__ static float emulated_column_reduce(float v, Op op) {
    __shared__ float scratch[kMaxGroups][kLanes];
    const int group = int(threadIdx.x) / kLanes, lane = int(threadIdx.x) % kLanes;
    __syncthreads();
    scratch[group][lane] = v;
    __syncthreads();
    const int i = lane % 16;
    // The same order in all four lanes, so that they agree bit for bit.
    return op(op(scratch[group][i], scratch[group][i + 16]), op(scratch[group][i + 32], scratch[group][i + 48]));
  }

  template <class T>
  __device__ static void emulated_mma(FragmentC& c, const A& a, const B& b) {
    emulate_mma_16x16x16<Fragments16x16, T>(c, a, b);
  }

};

// AMD RDNA's WMMA, v_wmma_f32_16x16x16_{f16,bf16} on a 32-lane wave (C[16x16] += A[16x16] · B[16x16]),
// in its two register maps (RDNA3 ISA and RDNA4 ISA, "Wave Matrix Multiply Accumulate"; AMD GPUOpen's
// RDNA3 and RDNA4 WMMA guides). With lane = 16·h + i (h = lane / 16):
//   RDNA3 (gfx11): A: lane holds A[i][0..15] (sixteen 16-bit values, eight registers), the same in both
//                  half-waves; B: lane holds B[0..15][i] (B stored [n][k]: row n = i); C: r[v] = C[2v + h][i]
//   RDNA4 (gfx12): A: lane holds A[i][4h..4h+3] and A[i][8+4h..8+4h+3] (eight values, four registers);
//                  B: lane holds B[4h..4h+3][i] and B[8+4h..8+4h+3][i]; C: r[v] = C[v + 8h][i]
// (AMD's matrix instruction calculator, ROCm/amd_matrix_instruction_calculator, for both maps.) Operands
// are two 16-byte reads (gfx11) or two 8-byte reads (gfx12) of a [rows][k] tile. kEmulate computes the
// same map without the instruction (emulate_mma_16x16x16), so that the CUDA build's tests run the
// kernels' use of these layouts on NVIDIA. The gfx11 emulation reads k < 8 from the lower half-wave's
// copy and k >= 8 from the upper one's, so that a kernel loading either half wrong fails.
struct Fragment8x32 {
  uint32_t r[8];
};
struct Fragment4x32 {
  uint32_t r[4];
};
struct FragmentC8 {
  float r[8];
};
template <int kGeneration, bool kEmulate>  // kGeneration: 11 (RDNA3) or 12 (RDNA4)
struct FragmentsWmma {
  static_assert(kGeneration == 11 || kGeneration == 12);
  static constexpr MatrixUnit kUnit = kGeneration == 11 ? MatrixUnit::kAmdWmma11 : MatrixUnit::kAmdWmma12;
  static constexpr int kLanes = 32, kN = 16, kAccumulators = 8;
  static constexpr bool kColumnPairs = false, kPairedB = false;
  static constexpr int kMaxGroups = 8;  // the emulation's scratch: fragment groups of a block, at most
  static constexpr int kValuesPerLane = kGeneration == 11 ? 16 : 8;  // 16-bit values of A (and of B) per lane
#if defined(HD_AMD_WMMA_GFX11)
  static constexpr bool kNativeHere = kGeneration == 11;
#elif defined(HD_AMD_WMMA_GFX12)
  static constexpr bool kNativeHere = kGeneration == 12;
#else
  static constexpr bool kNativeHere = false;
#endif
#if defined(HD_GPU_HIP)
  static constexpr bool kOnThisTarget = !kEmulate && kNativeHere;
#else
  static constexpr bool kOnThisTarget = kEmulate;
#endif
  using A = std::conditional_t<kGeneration == 11, Fragment8x32, Fragment4x32>;
  using B = A;
  using C = FragmentC8;

  template <class T>
  __device__ static void mma(C& c, const A& a, const B& b) {
    if constexpr (kEmulate) {
      emulated_mma<T>(c, a, b);
    } else {
      native_mma<T>(c, a, b);
    }
  }
  __device__ static A load_a(const uint16_t* tile, int stride, int r0, int k0) {
    const int lane = int(threadIdx.x) % kLanes;
    const uint16_t* row = tile + (r0 + lane % 16) * stride + k0;
    A f;
    if constexpr (kGeneration == 11) {
      store16(f.r, *reinterpret_cast<const uint4*>(row));
      store16(f.r + 4, *reinterpret_cast<const uint4*>(row + 8));
    } else {
      const uint2 lo = *reinterpret_cast<const uint2*>(row + 4 * (lane / 16));
      const uint2 hi = *reinterpret_cast<const uint2*>(row + 8 + 4 * (lane / 16));
      f.r[0] = lo.x, f.r[1] = lo.y, f.r[2] = hi.x, f.r[3] = hi.y;
    }
    return f;
  }
  __device__ static B load_b(const uint16_t* tile, int stride, int n0, int k0) { return load_a(tile, stride, n0, k0); }
  __device__ static int c_row(int lane, int r) { return kGeneration == 11 ? 2 * r + lane / 16 : r + 8 * (lane / 16); }
  __device__ static int c_col(int lane, int /*r*/) { return lane % 16; }
  static constexpr bool kRowPairs = kGeneration == 12;  // registers 2h and 2h+1 hold neighbouring rows

  // Where element (row or column `index`, k) of A and B lives: gfx11: both halves hold every k (the
  // emulation reads k < 8 from the lower half, the rest from the upper); gfx12: half (k % 8) / 4, slot
  // 4 (k / 8) + k % 4.
  __device__ static int holder(int index, int k) { return index + 16 * (kGeneration == 11 ? k / 8 : (k % 8) / 4); }
  __device__ static int slot(int k) { return kGeneration == 11 ? k : 4 * (k / 8) + k % 4; }

  // The two lanes that hold one column of C are lane and lane ^ 16 (both maps): one exchange.
  __device__ static float column_max(float v) { return fmaxf(v, shuffle_xor(v, 16, kLanes)); }
  __device__ static float column_sum(float v) { return v + shuffle_xor(v, 16, kLanes); }

  // The B operand whose column lane % 16 holds this lane's accumulators of a C fragment, as T (in
  // attention: Pᵀ from the scores Sᵀ). The maps differ, so the two half-waves exchange values:
  //   gfx11: C holds rows 2v + h, B every k in both halves: the even rows come from half 0, the odd
  //          from half 1;
  //   gfx12: C holds rows 8h..8h+7, B rows 4h..4h+3 and 8+4h..8+4h+3: half 0 gives rows 4-7 to half 1,
  //          half 1 gives rows 8-11 to half 0.
  template <class T>
  __device__ static B b_from_accumulators(const float (&p)[kAccumulators]) {
    const int lane = int(threadIdx.x) % kLanes;
    const bool upper = lane >= 16;
    uint32_t own[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) own[j] = pack2<T>(p[2 * j], p[2 * j + 1]);
    B f;
    if constexpr (kGeneration == 11) {
      uint32_t other[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) other[j] = shuffle(own[j], lane ^ 16, kLanes);
#pragma unroll
      for (int m = 0; m < 8; ++m) {  // r[m] = rows 2m (from half 0) and 2m + 1 (from half 1)
        const uint32_t even = upper ? other[m / 2] : own[m / 2], odd = upper ? own[m / 2] : other[m / 2];
        const uint32_t e16 = m % 2 ? even >> 16 : even & 0xffffu, o16 = m % 2 ? odd >> 16 : odd & 0xffffu;
        f.r[m] = e16 | o16 << 16;
      }
    } else {
      const uint32_t got0 = shuffle(upper ? own[0] : own[2], lane ^ 16, kLanes);
      const uint32_t got1 = shuffle(upper ? own[1] : own[3], lane ^ 16, kLanes);
      if (upper) {
        f = B{{got0, got1, own[2], own[3]}};
      } else {
        f = B{{own[0], own[1], got0, got1}};
      }
    }
    return f;
  }

 private:
  __device__ static void store16(uint32_t* r, uint4 v) { r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w; }

  template <class T>
  __device__ static void native_mma(C& c, const A& a, const B& b) {
    // Every builtin is guarded by its own target: an unguarded gfx11 builtin crashes clang 22's backend
    // when built for gfx12. Elsewhere this layout is not offered (kOnThisTarget).
#if defined(HD_AMD_WMMA_GFX11) || defined(HD_AMD_WMMA_GFX12)
    if constexpr (kNativeHere) {
      using Float8 = float __attribute__((ext_vector_type(8)));
      using Halves = _Float16 __attribute__((ext_vector_type(kValuesPerLane)));
      using Shorts = short __attribute__((ext_vector_type(kValuesPerLane)));
      Float8 acc = __builtin_bit_cast(Float8, c);
      if constexpr (std::is_same_v<T, __half>) {
#if defined(HD_AMD_WMMA_GFX11)
        acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(Halves, a), __builtin_bit_cast(Halves, b),
                                                         acc);
#else
        acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(__builtin_bit_cast(Halves, a),
                                                               __builtin_bit_cast(Halves, b), acc);
#endif
      } else {
#if defined(HD_AMD_WMMA_GFX11)
        acc = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(__builtin_bit_cast(Shorts, a), __builtin_bit_cast(Shorts, b),
                                                          acc);
#else
        acc = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(__builtin_bit_cast(Shorts, a),
                                                                __builtin_bit_cast(Shorts, b), acc);
#endif
      }
      c = __builtin_bit_cast(C, acc);
      return;
    }
#endif
    (void)c, (void)a, (void)b;
    HD_TRAP();
  }

  template <class T>
  __device__ static void emulated_mma(C& c, const A& a, const B& b) {
    emulate_mma_16x16x16<FragmentsWmma, T>(c, a, b);
  }
};

}  // namespace hd::gpu
