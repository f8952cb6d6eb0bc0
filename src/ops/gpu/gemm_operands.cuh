// What every GEMM / implicit-GEMM convolution tile kernel shares, whatever its matrix instructions: the
// problem in the kernel's integer widths (KernelArgs), where a thread's 16-byte vectors of A (output
// pixels x im2col k) and B (output channels x k) come from (TileOperands), and how a C value leaves
// (OutputWriter: alpha, bias, residual, or a split-K partial sum). The fragment-layer kernel
// (gemm_kernel.cuh) and Hopper's warpgroup kernel (nvidia/gemm_wgmma.cuh) differ only in how the tiles
// reach the matrix units.
#pragma once

#include <climits>
#include <cstdint>

#include "ops/gpu/fast_divisor.h"
#include "ops/gpu/gelu.cuh"
#include "ops/gpu/numeric.cuh"
#include "ops/gpu/target.cuh"
#include "ops/host_device.h"

namespace hd::gpu::gemm_tiles {

struct KernelArgs {  // GemmProblem in the kernel's integer widths
  int m, n, k, inner;
  int64_t a_outer, a_inner, b_outer, b_inner, c_outer, c_inner;
  int height, width, out_hw, out_width, stride, padding;
  int64_t pixel_stride, image_stride, ldb, ldc;
  float alpha;
  bool pairs;  // C rows and batch offsets even: two neighbours are one 32-bit store
  int splits;  // split-K: the k-steps are shared among this many blocks, which write f32 partial sums
  // k = (kernel row · kw + kernel column) · channels + channel, split at every k-step without a division.
  FastDivisor by_channels, by_kw;
  bool gelu_tanh = false;  // a GEGLU tile's GELU (GemmGate): the tanh form, else erf's
  // GemmProblem's padding_batch_step and C's row groups (c_grouped: more than one group).
  int padding_batch_step = 0;
  bool c_grouped = false;
  FastDivisor by_c_group_rows;
  int64_t c_group_stride = 0;

  // Where C's row `row` starts, in elements from this batch entry's C (GemmProblem::c_row_offset).
  __device__ __forceinline__ int64_t c_row_at(int row) const {
    if (!c_grouped) return int64_t(row) * ldc;
    int group, within;
    by_c_group_rows.divide(row, group, within);
    return int64_t(group) * c_group_stride + int64_t(within) * ldc;
  }
};

// GEGLU's value of one output column: its hidden and gate sums scaled and their biases added, the hidden
// times gelu(gate) (GemmProblem::gate). Written once for the tiles that pair the sums in registers
// (OutputWriter::gated) and those that stage them (store_staged_gated_tile).
__device__ __forceinline__ float geglu_value(float hidden, float gate, float alpha, float hidden_bias,
                                             float gate_bias, bool tanh_form) {
  return (hidden * alpha + hidden_bias) * gelu(gate * alpha + gate_bias, tanh_form);
}

// A GEGLU tile (TileShape::gated) computes the projection's columns in chunks of kGateChunk: the first
// half of a chunk are 16 hidden columns of the projection, the second half the 16 gate columns that
// multiply them (weight rows F further on), so that a hidden value and its gate meet in one thread's
// accumulators (16 columns: one or two fragments further along) and the projection is never stored. Tile
// column t of the block at n0 is projection column gated_row(n0 + t): the weight row the tile reads.
constexpr int kGateChunk = 32;
HD_HOST_DEVICE constexpr int gated_row(int column, int half_width) {
  return column / kGateChunk * (kGateChunk / 2) + column % (kGateChunk / 2) +
         (column % kGateChunk >= kGateChunk / 2 ? half_width : 0);
}

// 16 bytes from src, or zeros; src must be readable either way (the callers pass the operand's first
// vector when !ok). Loaded unconditionally and the value selected: a branch around the load cost AMD
// targets an exec-mask branch per vector (s_and_saveexec), and `ok ? *src : uint4{}` made clang select
// between src and the address of a zero temporary on the stack, which put every staged vector in scratch.
__device__ __forceinline__ uint4 load_or_zero(const uint16_t* src, bool ok) {
  const uint4 v = *reinterpret_cast<const uint4*>(src);
  return make_uint4(ok ? v.x : 0u, ok ? v.y : 0u, ok ? v.z : 0u, ok ? v.w : 0u);
}

// One thread's share of a bm x bn tile's operands, a k-step of step_k at a time: the block's threads
// cover rows_per_pass rows of step_k / 8 vectors each per pass, kAPasses passes over A's bm rows and
// kBPasses over B's bn rows. A's rows are output pixels; their k-th element is found by splitting k into
// (kernel row, kernel column, channel), so the im2col matrix never exists. kGated: B's rows in GEGLU's
// chunks (gated_row); a pass's rows are then one whole number of chunks further on, half as many weight
// rows, so the rows stay one pointer and one stride.
template <int kBM, int kBN, int kThreads, int kStepK, bool kGated = false>
struct TileOperands {
  static constexpr int kVectorsPerRow = kStepK / 8, kRowsPerPass = kThreads / kVectorsPerRow;
  static constexpr int kAPasses = kBM / kRowsPerPass, kBPasses = kBN / kRowsPerPass;
  static_assert(kBM % kRowsPerPass == 0 && kBN % kRowsPerPass == 0);
  static_assert(!kGated || kRowsPerPass % kGateChunk == 0, "a GEGLU tile's passes cover whole chunks");

  const KernelArgs& p;
  const uint16_t* a_bits;
  const uint16_t* b_bits;
  int n0, vec, pass_row;
  // Where this thread's A rows (output pixels) read from: their image and top-left input position.
  // A row past the end gets a position that no kernel offset brings into the image. a_corner: the
  // element at that position, so that a k-step's vector is the corner plus one offset that every row
  // shares (the loads' address arithmetic is most of a k-step's non-matrix instructions).
  int a_iy[kAPasses], a_ix[kAPasses];
  const uint16_t* a_corner[kAPasses];
  // This thread's B rows (output channels) are evenly spaced: one pointer, and the count of passes whose
  // row exists (a pointer and a flag per pass kept the k-step-64 tiles' registers past 255, and spilled).
  int b_passes;
  const uint16_t* b_first_row;
  int64_t b_pass_stride;

  // pad_top, pad_left: this block's padding (BlockBatch's, which differs between problems of a batch
  // where GemmProblem::padding_batch_step says so).
  __device__ __forceinline__ TileOperands(const KernelArgs& args, const uint16_t* a, const uint16_t* b,
                                          int m0, int n_first, int tid, int pad_top, int pad_left)
      : p(args),
        a_bits(a),
        b_bits(b),
        n0(n_first),
        vec(tid % kVectorsPerRow),
        pass_row(tid / kVectorsPerRow) {
#pragma unroll
    for (int i = 0; i < kAPasses; ++i) {
      const int m = m0 + pass_row + i * kRowsPerPass;
      const int img = m / p.out_hw, rem = m % p.out_hw;
      a_iy[i] = m < p.m ? (rem / p.out_width) * p.stride - pad_top : INT_MIN / 2;
      a_ix[i] = (rem % p.out_width) * p.stride - pad_left;
      a_corner[i] = m < p.m ? a_bits + int64_t(img) * p.image_stride + (int64_t(a_iy[i]) * p.width + a_ix[i]) * p.pixel_stride
                            : a_bits;
    }
    const int b_first = n0 + pass_row;
    b_passes = b_first < p.n ? (p.n - b_first + kRowsPerPass - 1) / kRowsPerPass : 0;
    const int weight_row = kGated ? gated_row(b_first, p.n / 2) : b_first;
    b_first_row = b_bits + (b_passes > 0 ? int64_t(weight_row) * p.ldb : 0);
    b_pass_stride = int64_t(kGated ? kRowsPerPass / 2 : kRowsPerPass) * p.ldb;
  }

  // Row of the tile that pass i (A) or j (B) of this thread fills, and its vector's k offset in the step.
  __device__ __forceinline__ int row(int pass) const { return pass_row + pass * kRowsPerPass; }

  // For the 16-byte paths (channels % 8 == 0, so the 8 elements of a vector share one kernel position):
  // calls f(pass, address, valid) for this thread's A vectors of the k-step at k0, then g(...) for B's.
  // A form for 1x1 problems without the split of k and the bounds tests (the 256x128 tile's loop 368 -> 301
  // instructions a k-step) gained 1%-2% on 8192^3 and nothing on SD's products (H200, 2026-11-29): the
  // tiles are not bound by issuing instructions, so it was not kept.
  template <class F, class G>
  __device__ __forceinline__ void for_each_vector(int k0, F f, G g) const {
    for_vectors(k0, 0, kAPasses + kBPasses, f, g);
  }
  // The same for vectors [first, end) of this thread's A vectors followed by its B vectors: a k-step's
  // copies issued in parts (first and end are constants where the caller's loop is unrolled).
  template <class F, class G>
  __device__ __forceinline__ void for_vectors(int k0, int first, int end, F f, G g) const {
    const int k = k0 + vec * 8;
    const bool k_ok = k < p.k;
    int kk, ch, ky, kx;
    p.by_channels.divide(k_ok ? k : 0, kk, ch);
    p.by_kw.divide(kk, ky, kx);
    const int64_t offset = (int64_t(ky) * p.width + kx) * p.pixel_stride + ch;  // from a row's corner
#pragma unroll
    for (int i = 0; i < kAPasses; ++i) {
      if (i < first || i >= end) continue;
      const bool ok = k_ok && unsigned(a_iy[i] + ky) < unsigned(p.height) && unsigned(a_ix[i] + kx) < unsigned(p.width);
      f(i, ok ? a_corner[i] + offset : a_bits, ok);
    }
#pragma unroll
    for (int j = 0; j < kBPasses; ++j) {
      if (kAPasses + j < first || kAPasses + j >= end) continue;
      const bool ok = k_ok && j < b_passes;
      g(j, ok ? b_first_row + j * b_pass_stride + k : b_bits, ok);
    }
  }

  // The gather path (few channels): one element of A, and of B.
  __device__ __forceinline__ uint16_t a_element(int i, int k) const {
    if (k >= p.k) return 0;
    int kk, ch, ky, kx;
    p.by_channels.divide(k, kk, ch);
    p.by_kw.divide(kk, ky, kx);
    const int iy = a_iy[i] + ky, ix = a_ix[i] + kx;
    if (unsigned(iy) >= unsigned(p.height) || unsigned(ix) >= unsigned(p.width)) return 0;
    return a_corner[i][(int64_t(ky) * p.width + kx) * p.pixel_stride + ch];
  }
  __device__ __forceinline__ uint16_t b_element(int j, int k) const {
    static_assert(!kGated, "GEGLU tiles read 16-byte vectors");
    const int n = n0 + row(j);
    return n < p.n && k < p.k ? b_bits[int64_t(n) * p.ldb + k] : uint16_t(0);
  }
};

// Where a block's C values go: C = alpha · acc + bias + residual, rounded once to T; or, for split-K, the
// unscaled f32 partial sum of this block's split ([batch][split][m][n]), which split_k_reduce_kernel adds.
template <class T, bool kSplit>
struct OutputWriter {
  const KernelArgs& p;
  const T* __restrict__ bias;
  const T* residual;
  T* c;
  float* partial;  // this batch's and split's partial sums (split-K)

  // Values at (row, col) and, when `both`, (row, col + 1); rows and columns past C are skipped.
  __device__ __forceinline__ void store(int row, int col, float a0, float a1, bool pair) const {
    if (row >= p.m || col >= p.n) return;
    const bool both = pair && col + 1 < p.n;
    if constexpr (kSplit) {
      float* out = partial + int64_t(row) * p.n + col;
      out[0] = a0;
      if (both) out[1] = a1;
    } else {
      float v0 = a0 * p.alpha + (bias ? to_float(bias[col]) : 0.f);
      float v1 = both ? a1 * p.alpha + (bias ? to_float(bias[col + 1]) : 0.f) : 0.f;
      const int64_t at = p.c_row_at(row) + col;
      if (both && p.pairs) {
        if (residual) {
          const uint32_t res = *reinterpret_cast<const uint32_t*>(residual + at);
          v0 += low_half<T>(res), v1 += high_half<T>(res);
        }
        *reinterpret_cast<uint32_t*>(c + at) = pack2<T>(v0, v1);
      } else {
        if (residual) v0 += to_float(residual[at]);
        c[at] = from_float<T>(v0);
        if (both) {
          if (residual) v1 += to_float(residual[at + 1]);
          c[at + 1] = from_float<T>(v1);
        }
      }
    }
  }

  // GEGLU: output column col (of C [m, n/2]) from its hidden and gate sums; P's bias for the hidden
  // column is bias[col], for the gate bias[n/2 + col].
  __device__ __forceinline__ float gated(int col, float hidden, float gate) const {
    return geglu_value(hidden, gate, p.alpha, bias ? to_float(bias[col]) : 0.f,
                       bias ? to_float(bias[p.n / 2 + col]) : 0.f, p.gelu_tanh);
  }
  // Final values at (row, col) and, when `pair`, (row, col + 1) of the GEGLU output C [m, n/2].
  __device__ __forceinline__ void store_final(int row, int col, float v0, float v1, bool pair) const {
    const int columns = p.n / 2;
    if (row >= p.m || col >= columns) return;
    const int64_t at = p.c_row_at(row) + col;
    if (pair && col + 1 < columns && p.pairs) {
      *reinterpret_cast<uint32_t*>(c + at) = pack2<T>(v0, v1);
      return;
    }
    c[at] = from_float<T>(v0);
    if (pair && col + 1 < columns) c[at + 1] = from_float<T>(v1);
  }
};

// Eight values from column col of a row (tile kernels that stage C through shared memory): one 16-byte
// store where the row segment and the residual's lie on 16-byte boundaries inside C, else in pairs.
template <class T>
__device__ __forceinline__ void store_eight(const OutputWriter<T, false>& out, int row, int col, const float (&v)[8]) {
  if (row >= out.p.m || col >= out.p.n) return;
  const int64_t at = out.p.c_row_at(row) + col;
  const bool aligned = (reinterpret_cast<uintptr_t>(out.c + at) & 15) == 0 &&
                       (!out.residual || (reinterpret_cast<uintptr_t>(out.residual + at) & 15) == 0);
  if (col + 8 > out.p.n || !aligned) {
#pragma unroll
    for (int e = 0; e < 8; e += 2) out.store(row, col + e, v[e], v[e + 1], true);
    return;
  }
  float w[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) w[e] = v[e] * out.p.alpha + (out.bias ? to_float(out.bias[col + e]) : 0.f);
  if (out.residual) {
    const uint4 r = *reinterpret_cast<const uint4*>(out.residual + at);
    const uint32_t words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) w[2 * e] += low_half<T>(words[e]), w[2 * e + 1] += high_half<T>(words[e]);
  }
  *reinterpret_cast<uint4*>(out.c + at) = make_uint4(pack2<T>(w[0], w[1]), pack2<T>(w[2], w[3]), pack2<T>(w[4], w[5]),
                                                     pack2<T>(w[6], w[7]));
}

// The row pitch, in floats, of a bn-wide tile of C staged in shared memory: 8 floats of padding, so that
// a half-warp's 8-byte writes of accumulator pairs take one pass.
HD_HOST_DEVICE constexpr int staged_pitch(int bn) {
  return bn + 8;
}

// A block's bm x bn tile of C, staged in shared memory in f32 (`staged`, rows staged_pitch(bn) floats
// apart), sent out 16 contiguous bytes a thread (store_eight). Where a row's vectors do not divide the
// threads (160 wide), the last few threads idle.
template <int kBM, int kBN, int kThreads, class T>
__device__ __forceinline__ void store_staged_tile(const OutputWriter<T, false>& out, const float* staged,
                                                  int m0, int n0, int tid) {
  constexpr int pitch = staged_pitch(kBN), kVectors = kBN / 8, kRowsPerPass = kThreads / kVectors;
  static_assert(kBN % 8 == 0 && kRowsPerPass > 0);
  const int column = tid % kVectors * 8;
  for (int r = tid / kVectors; r < kBM && tid < kRowsPerPass * kVectors; r += kRowsPerPass) {
    float v[8];
    const float4 lo = *reinterpret_cast<const float4*>(staged + r * pitch + column);
    const float4 hi = *reinterpret_cast<const float4*>(staged + r * pitch + column + 4);
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
    store_eight(out, m0 + r, n0 + column, v);
  }
}

// Where a tile's accumulator column goes in the staged C tile: itself, or for a GEGLU tile its chunks'
// hidden halves first (staged columns [0, bn/2)) and their gates after (bn/2 further), so that
// store_staged_gated_tile reads both as contiguous 16-byte vectors. Read in place from the chunks, a
// warp's loads of a row's hidden (or gate) halves fell on a quarter of the banks: on SD1.5's 64x64
// projection each tile took 0.009-0.020 ms more with GEGLU than without (H200, 2026-11-29).
template <bool kGated, int kBN>
HD_HOST_DEVICE constexpr int staged_column(int col) {
  if (!kGated) return col;
  const int chunk = col / kGateChunk, at = col % kGateChunk, half = kGateChunk / 2;
  return (at < half ? 0 : kBN / 2) + chunk * half + at % half;
}

// A GEGLU tile's C (staged by staged_column<true>) sent out as bn / 2 columns: each thread reads 8 hidden
// sums and their 8 gate sums, and stores 16 contiguous bytes where C's row allows.
template <int kBM, int kBN, int kThreads, class T>
__device__ __forceinline__ void store_staged_gated_tile(const OutputWriter<T, false>& out,
                                                        const float* staged, int m0, int n0, int tid) {
  constexpr int pitch = staged_pitch(kBN), kVectors = kBN / 16, kRowsPerPass = kThreads / kVectors;
  static_assert(kBN % kGateChunk == 0 && kRowsPerPass > 0);
  const int vector = tid % kVectors, column = vector * 8;  // hidden; the gates kBN / 2 further
  const int out_col = n0 / 2 + column;
  // A thread's 8 columns are the same in every row: their biases are read once. The width is whole chunks,
  // so the 8 columns are all inside C or all past it.
  if (out_col >= out.p.n / 2 || tid >= kRowsPerPass * kVectors) return;
  float hidden_bias[8], gate_bias[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    hidden_bias[e] = out.bias ? to_float(out.bias[out_col + e]) : 0.f;
    gate_bias[e] = out.bias ? to_float(out.bias[out.p.n / 2 + out_col + e]) : 0.f;
  }
  for (int r = tid / kVectors; r < kBM; r += kRowsPerPass) {
    const float* const hidden_at = staged + r * pitch + column;
    const float4 h_lo = *reinterpret_cast<const float4*>(hidden_at),
                 h_hi = *reinterpret_cast<const float4*>(hidden_at + 4);
    const float4 g_lo = *reinterpret_cast<const float4*>(hidden_at + kBN / 2),
                 g_hi = *reinterpret_cast<const float4*>(hidden_at + kBN / 2 + 4);
    const float hidden[8] = {h_lo.x, h_lo.y, h_lo.z, h_lo.w, h_hi.x, h_hi.y, h_hi.z, h_hi.w};
    const float gate[8] = {g_lo.x, g_lo.y, g_lo.z, g_lo.w, g_hi.x, g_hi.y, g_hi.z, g_hi.w};
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      v[e] = geglu_value(hidden[e], gate[e], out.p.alpha, hidden_bias[e], gate_bias[e], out.p.gelu_tanh);
    const int row = m0 + r;
    const int64_t at = out.p.c_row_at(row) + out_col;
    if (row < out.p.m && (reinterpret_cast<uintptr_t>(out.c + at) & 15) == 0) {
      *reinterpret_cast<uint4*>(out.c + at) =
          make_uint4(pack2<T>(v[0], v[1]), pack2<T>(v[2], v[3]), pack2<T>(v[4], v[5]), pack2<T>(v[6], v[7]));
    } else {
#pragma unroll
      for (int e = 0; e < 8; e += 2) out.store_final(row, out_col + e, v[e], v[e + 1], true);
    }
  }
}

// A block's operands and output for batch entry blockIdx.z / splits, and its split.
template <class T, bool kSplit>
struct BlockBatch {
  const uint16_t* a_bits;
  const uint16_t* b_bits;
  OutputWriter<T, kSplit> out;
  int split;
  int pad_top, pad_left;  // this problem's padding (GemmProblem::padding_batch_step)

  __device__ __forceinline__ BlockBatch(const T* a, const T* b, const T* bias, const T* residual, T* c,
                                        float* partial, const KernelArgs& p)
      : out{p, bias, residual, c, partial} {
    const int batch = int(blockIdx.z) / p.splits, zo = batch / p.inner, zi = batch % p.inner;
    split = int(blockIdx.z) % p.splits;
    pad_top = p.padding - zo * p.padding_batch_step;
    pad_left = p.padding - zi * p.padding_batch_step;
    a_bits = reinterpret_cast<const uint16_t*>(a + zo * p.a_outer + zi * p.a_inner);
    b_bits = reinterpret_cast<const uint16_t*>(b + zo * p.b_outer + zi * p.b_inner);
    out.c += zo * p.c_outer + zi * p.c_inner;
    if (residual) out.residual += zo * p.c_outer + zi * p.c_inner;
    if constexpr (kSplit) out.partial += (int64_t(batch) * p.splits + split) * int64_t(p.m) * p.n;
  }

  // This block's k-steps of `step_k`: all of them, or its split's share ([first, first + count)).
  __device__ __forceinline__ void steps(const KernelArgs& p, int step_k, int& first, int& count) const {
    const int all_steps = (p.k + step_k - 1) / step_k, per_split = (all_steps + p.splits - 1) / p.splits;
    first = split * per_split;
    count = max(0, min(all_steps, first + per_split) - first);
  }
};

}  // namespace hd::gpu::gemm_tiles
