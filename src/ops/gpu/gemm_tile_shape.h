// A GEMM tile configuration: everything one instance of the tile kernel (gemm_kernel.cuh) fixes at
// compile time but the element type and the fragment layout. The kernel takes one named tile of the table
// below as a single template argument, and the candidates (gemm_tiles.cuh) name those tiles, so that a
// new property of a tile is a field here, not one more template parameter spelled at every instance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/host_device.h"

namespace hd::gpu::gemm_tiles {

constexpr int kDefaultStepK = 32;  // k per pipeline step, unless a tile names another

// A shared row: step_k 16-bit elements and 16 bytes of padding, so that the eight rows one ldmatrix (or
// one AMD fragment load) reads fall into different banks (row pitches of 80 and 144 bytes both do).
HD_HOST_DEVICE constexpr int tile_stride(int step_k) { return step_k + 8; }

struct TileShape {
  int bm, bn;  // the block's tile of C
  int wm, wn;  // fragment groups (warps or waves) along m and along n
  // 2: the next k-step waits in registers while the matrix units work on this one (every target);
  // 3-4: stages - 1 k-steps in flight through asynchronous copies (NVIDIA sm_80+).
  int stages;
  int step_k = kDefaultStepK;
  int splits = 1;       // split-K: the k-steps shared among this many blocks, added by a second kernel
  bool vector = true;   // A in 16-byte vectors (channels % 8 == 0), or gathered element by element
  // The next 16 k's fragments are read from shared memory while this 16's products run, across the
  // k-step's barrier too: the profile of the large tiles showed warps waiting on their fragment loads
  // after every barrier, with 8 warps a multiprocessor to hide them.
  bool pipelined = false;
  // Asynchronous pipelined tiles: the next k-step's copies issued in this many parts over this step's
  // first slices (fewer than its slices), not all at its first. The profile of the 256x128 tile put a
  // fifth of its stall samples on the long scoreboard: its fragment loads, and the address arithmetic
  // reusing the copies' source registers, waited behind a burst of 96 copies a block. Measured per tile
  // on SD's shapes and 8192^3 (H200, 2026-11-29; BENCHMARKS.md): 2 parts fastest for 256x128, 128x256,
  // 128x128 in 8 groups and 128x160, 3 for 64x160.
  int copy_parts = 1;
  // GEGLU in the epilogue (GemmGate): B's rows read in gated_row's chunks, C leaving as bn / 2 columns of
  // hidden · gelu(gate), so that a feed-forward's projection (SD1.5's 64x64 level: 42 MB at batch 2) is
  // neither written nor read back.
  bool gated = false;

  HD_HOST_DEVICE constexpr int groups() const { return wm * wn; }
  HD_HOST_DEVICE constexpr size_t shared_bytes() const {
    return size_t(stages) * size_t(bm + bn) * size_t(tile_stride(step_k)) * sizeof(uint16_t);
  }
  HD_HOST_DEVICE constexpr TileShape split(int n) const {
    TileShape t = *this;
    t.splits = n;
    return t;
  }
  HD_HOST_DEVICE constexpr TileShape gate() const {
    TileShape t = *this;
    t.gated = true;
    return t;
  }
};

// The name a candidate, a tuning cache and a benchmark know the tile by (the layout's suffix follows):
// "mma128x128" (register-staged), "async3-256x128w8k64" (3 stages, 8 groups, k-steps of 64),
// "gather64x64", then "-pipelined", "-spread2", "-split4" and "-geglu" where they apply.
inline std::string tile_name(const TileShape& t) {
  std::string name = !t.vector ? "gather" : t.stages == 2 ? "mma" : "async" + std::to_string(t.stages) + "-";
  name += std::to_string(t.bm) + "x" + std::to_string(t.bn);
  if (t.groups() == 8) name += "w8";
  if (t.step_k != kDefaultStepK) name += "k" + std::to_string(t.step_k);
  if (t.pipelined) name += "-pipelined";
  if (t.copy_parts > 1) name += "-spread" + std::to_string(t.copy_parts);
  if (t.splits > 1) name += "-split" + std::to_string(t.splits);
  if (t.gated) name += "-geglu";
  return name;
}

// The instance table: every tile any layout offers (candidates_of picks among them per layout and device).
// Each is a type whose `shape` is its TileShape, because kernels take them as template arguments and
// nvcc 13's host stubs cannot spell a class value there (a TileShape argument failed to compile).
namespace tiles {
// One tile a line or two: the formatter would give each field of the longer ones a line of its own.
// clang-format off
struct Gather64x64 {
  static constexpr TileShape shape{.bm = 64, .bn = 64, .wm = 2, .wn = 2, .stages = 2, .vector = false};
};
// Register-staged, every layout.
struct Mma128x128 {
  static constexpr TileShape shape{.bm = 128, .bn = 128, .wm = 2, .wn = 2, .stages = 2};
};
struct Mma128x128w8 {
  static constexpr TileShape shape{.bm = 128, .bn = 128, .wm = 4, .wn = 2, .stages = 2};
};
struct Mma128x64 {
  static constexpr TileShape shape{.bm = 128, .bn = 64, .wm = 2, .wn = 2, .stages = 2};
};
struct Mma64x128 {
  static constexpr TileShape shape{.bm = 64, .bn = 128, .wm = 2, .wn = 2, .stages = 2};
};
struct Mma64x64 {
  static constexpr TileShape shape{.bm = 64, .bn = 64, .wm = 2, .wn = 2, .stages = 2};
};
// Register-staged with pipelined fragments (gemm_kernel.cuh), every layout: what AMD's matrix cores run
// of the technique that took NVIDIA's large asynchronous tiles from 295 to 339 TFLOP/s.
struct Mma128x128w8Pipelined {
  static constexpr TileShape shape{.bm = 128, .bn = 128, .wm = 4, .wn = 2, .stages = 2, .pipelined = true};
};
// Asynchronous copies, NVIDIA's tensor cores.
struct Async3_128x128 {
  static constexpr TileShape shape{.bm = 128, .bn = 128, .wm = 2, .wn = 2, .stages = 3};
};
struct Async3_128x256w8 {
  static constexpr TileShape shape{.bm = 128, .bn = 256, .wm = 2, .wn = 4, .stages = 3};
};
struct Async3_256x128w8 {
  static constexpr TileShape shape{.bm = 256, .bn = 128, .wm = 4, .wn = 2, .stages = 3};
};
struct Async4_64x128 {
  static constexpr TileShape shape{.bm = 64, .bn = 128, .wm = 2, .wn = 2, .stages = 4};
};
struct Async4_128x64 {
  static constexpr TileShape shape{.bm = 128, .bn = 64, .wm = 2, .wn = 2, .stages = 4};
};
struct Async4_64x64 {
  static constexpr TileShape shape{.bm = 64, .bn = 64, .wm = 2, .wn = 2, .stages = 4};
};
struct Async3_128x128w8 {
  static constexpr TileShape shape{.bm = 128, .bn = 128, .wm = 2, .wn = 4, .stages = 3};
};
struct Async3_128x128w8k64 {
  static constexpr TileShape shape{.bm = 128, .bn = 128, .wm = 2, .wn = 4, .stages = 3, .step_k = 64};
};
struct Async3_128x128k64 {
  static constexpr TileShape shape{.bm = 128, .bn = 128, .wm = 2, .wn = 2, .stages = 3, .step_k = 64};
};
struct Async4_64x128k64 {
  static constexpr TileShape shape{.bm = 64, .bn = 128, .wm = 2, .wn = 2, .stages = 4, .step_k = 64};
};
struct Async3_128x256w8k64 {
  static constexpr TileShape shape{.bm = 128, .bn = 256, .wm = 2, .wn = 4, .stages = 3, .step_k = 64};
};
struct Async3_256x128w8k64 {
  static constexpr TileShape shape{.bm = 256, .bn = 128, .wm = 4, .wn = 2, .stages = 3, .step_k = 64};
};
// The same shapes with pipelined fragments.
struct Async3_256x128w8k64Pipelined {
  static constexpr TileShape shape{
      .bm = 256, .bn = 128, .wm = 4, .wn = 2, .stages = 3, .step_k = 64, .pipelined = true, .copy_parts = 2};
};
struct Async3_128x256w8k64Pipelined {
  static constexpr TileShape shape{
      .bm = 128, .bn = 256, .wm = 2, .wn = 4, .stages = 3, .step_k = 64, .pipelined = true, .copy_parts = 2};
};
struct Async3_128x128w8k64Pipelined {
  static constexpr TileShape shape{
      .bm = 128, .bn = 128, .wm = 2, .wn = 4, .stages = 3, .step_k = 64, .pipelined = true, .copy_parts = 2};
};
struct Async4_64x128k64Pipelined {
  static constexpr TileShape shape{.bm = 64, .bn = 128, .wm = 2, .wn = 2, .stages = 4, .step_k = 64, .pipelined = true};
};
// 160 columns: SD's channel counts (320, 640, 1280) are 2, 4 and 8 of them, so that the UNet's outputs
// fill the multiprocessors in whole waves (64x64 latents: 8192 x 320 is 128 tiles of 128x160 for an
// H100's 132 multiprocessors, where 256x128 gives 96 and 128x128 192, a wave and a half).
struct Async3_128x160w8k64Pipelined {
  static constexpr TileShape shape{
      .bm = 128, .bn = 160, .wm = 4, .wn = 2, .stages = 3, .step_k = 64, .pipelined = true, .copy_parts = 2};
};
struct Async3_64x160k64Pipelined {
  static constexpr TileShape shape{
      .bm = 64, .bn = 160, .wm = 2, .wn = 2, .stages = 3, .step_k = 64, .pipelined = true, .copy_parts = 3};
};
// clang-format on
// A tile with its k-steps shared among `kSplits` blocks.
template <class Tile, int kSplits>
struct SplitK {
  static constexpr TileShape shape = Tile::shape.split(kSplits);
};
// A tile with GEGLU in its epilogue, for the feed-forward's projection.
template <class Tile>
struct Gated {
  static constexpr TileShape shape = Tile::shape.gate();
};
}  // namespace tiles

}  // namespace hd::gpu::gemm_tiles
