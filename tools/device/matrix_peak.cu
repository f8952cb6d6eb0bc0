// The matrix units' measured ceilings on the machine it runs on, f16 in and f32 accumulators: what a GEMM
// tile built on each instruction class can reach at most, so that issue 21's targets for our tiles (400
// TFLOP/s on 8192^3 on the mma.sync class, the AMD proxy) can be read as a share of what the instruction
// itself gives, not only against cuBLASLt (which uses Hopper's wgmma).
//   mma.sync, registers only:  independent m16n8k16 chains, operands held in registers (no memory at all)
//   mma.sync + ldmatrix:       a 64x64 warp tile's k16 step as our fragment-layer tiles run it: 4 A and 4
//                              B ldmatrix.x4 from swizzled shared memory, 32 products (no global memory);
//                              and the same with the shared-memory writes a 256x128 tile's copies add
//   wgmma m64n256k16:          both operands from 128-byte-swizzled shared memory, 2 warpgroups a block
// The instructions are the engine's own wrappers (ops/gpu/mma.cuh, ops/gpu/nvidia/wgmma.cuh). Build and run
// on the device: nvcc -O3 -std=c++20 -arch=sm_90a -I src -o /tmp/matrix_peak tools/device/matrix_peak.cu
// (sm_80 and newer run the first two; wgmma needs sm_90a). Prints one line per
// configuration, the best of 5 timed launches.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "ops/gpu/mma.cuh"
#include "ops/gpu/nvidia/wgmma.cuh"

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

using hd::gpu::FragmentA, hd::gpu::FragmentB, hd::gpu::FragmentC;
// The fragment layer's own product (mma.cuh): mma.sync m16n8k16, f16 in, f32 accumulators.
__device__ __forceinline__ void mma(FragmentC& c, const FragmentA& a, const FragmentB& b) {
  hd::gpu::mma_16x8x16<__half, false>(c, a, b);
}

// kChains independent accumulators a warp, each product depending on the one before it in its chain.
template <int kChains>
__global__ void mma_registers(int iterations, float* sink) {
  FragmentA a;
  FragmentB b;
  for (int i = 0; i < 4; ++i) a.r[i] = 0x3c003c00u ^ (threadIdx.x * 2654435761u + i);  // varied f16 bits
  for (int i = 0; i < 2; ++i) b.r[i] = 0x3c003c00u ^ (threadIdx.x * 40503u + i);
  FragmentC c[kChains] = {};
  for (int it = 0; it < iterations; ++it)
#pragma unroll
    for (int j = 0; j < kChains; ++j) mma(c[j], a, b);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kChains; ++j) s += c[j].r[0] + c[j].r[1] + c[j].r[2] + c[j].r[3];
  if (s == 1234.5f) sink[threadIdx.x] = s;  // keeps the products alive
}

// mma.cuh's loads address a padded tile; this one takes the swizzled row's address itself.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Each warp: a 64x64 tile of C from a 64-row A slab and a 64-row B slab of 64 k (128-byte rows, the 16-byte
// chunk c of row r stored at c ^ (r % 8): ldmatrix's eight rows fall in distinct banks), k16 steps
// cycling over the slab; every k16 reads 4 A and 4 B fragments (ldmatrix.x4) and issues 32 products.
// kStores: each lane also stores 3 x 16 bytes a k16 into a landing area of its warp's own, the share of
// shared-memory writes that a 256x128 tile's copies of the next k-step make (48 KiB a 64-k step for 8
// warps); st.shared stands in for cp.async's writes.
inline constexpr int kSlabBytes = 2 * 64 * 128, kLandingBytes = 6 * 1024;
template <bool kStores>
__global__ void mma_ldmatrix(int iterations, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  using hd::gpu::kWarpSize;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  uint8_t* const slab = smem + warp * (kSlabBytes + (kStores ? kLandingBytes : 0));  // A then B, 8 KiB each
  uint4* const landing = reinterpret_cast<uint4*>(slab + kSlabBytes);
  for (int i = lane; i < 2 * 64 * 128 / 4; i += kWarpSize)
    reinterpret_cast<uint32_t*>(slab)[i] = 0x3c003c00u ^ i;
  __syncwarp();
  const uint8_t* const a_s = slab;
  const uint8_t* const b_s = slab + 64 * 128;
  FragmentC c[4][8] = {};
  // ldmatrix.x4: lane l gives the row address of matrix l / 8; matrices (rows 0-7 / 8-15) x (k 0-7 / 8-15).
  const int row_in = lane % 16, chunk_in = lane / 16;
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      FragmentA a[4];
      uint32_t b[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i * 16 + row_in, chunk = kk * 2 + chunk_in;
        ldmatrix_x4(a[i].r, a_s + r * 128 + ((chunk ^ (r % 8)) << 4));
        ldmatrix_x4(b[i], b_s + r * 128 + ((chunk ^ (r % 8)) << 4));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const FragmentB bj{{b[j / 2][(j % 2)], b[j / 2][(j % 2) + 2]}};
          mma(c[i][j], a[i], bj);
        }
      if constexpr (kStores) {
#pragma unroll
        for (int v = 0; v < 3; ++v) {
          const uint4 value = make_uint4(it, kk, v, lane);
          asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                           static_cast<uint32_t>(__cvta_generic_to_shared(
                               landing + (kk * 3 + v) % (kLandingBytes / 512) * kWarpSize + lane))),
                       "r"(value.x), "r"(value.y), "r"(value.z), "r"(value.w)
                       : "memory");
        }
      }
    }
  }
  float s = 0.f;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) s += c[i][j].r[0] + c[i][j].r[1] + c[i][j].r[2] + c[i][j].r[3];
  if (s == 1234.5f) sink[threadIdx.x] = s;
}

// Two warpgroups a block, each 64 rows of A against the block's 256 rows of B over a 64-k slab (k16 steps
// 32 bytes apart), four wgmma a commit, at most one group in flight behind the one issued.
__global__ void __launch_bounds__(256) wgmma_peak(int iterations, float* sink) {
#if defined(HD_NVIDIA_WGMMA)
  extern __shared__ __align__(1024) uint8_t smem[];
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint8_t* const base = smem + ((1024 - (raw & 1023)) & 1023);
  for (int i = threadIdx.x; i < (128 + 256) * 128 / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(base)[i] = 0x3c003c00u ^ (i * 2654435761u & 0x03ff03ffu);
  hd::gpu::wgmma::fence_shared_for_async();
  __syncthreads();
  const int warpgroup = threadIdx.x / hd::gpu::wgmma::kWarpgroupThreads;
  const uint8_t* const a_s = base + warpgroup * 64 * 128;
  const uint8_t* const b_s = base + 128 * 128;
  float d[128];
  for (float& x : d) x = 0.f;
  for (int it = 0; it < iterations; ++it) {
    hd::gpu::wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      hd::gpu::wgmma::mma_async<256, __half>(d, hd::gpu::wgmma::descriptor(a_s + kk * 32),
                                             hd::gpu::wgmma::descriptor(b_s + kk * 32));
    hd::gpu::wgmma::commit();
    hd::gpu::wgmma::wait<1>();
  }
  hd::gpu::wgmma::wait<0>();
  hd::gpu::wgmma::fence_operands(d);  // the sum below reads them after the wait
  float s = 0.f;
  for (float x : d) s += x;
  if (s == 1234.5f) sink[threadIdx.x] = s;
#endif
}

template <class Launch>
double best_ms(Launch launch) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  launch();  // warm-up (and clocks up)
  CHECK(cudaDeviceSynchronize());
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    CHECK(cudaEventRecord(start));
    launch();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (ms < best) best = ms;
  }
  CHECK(cudaGetLastError());
  return best;
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("# %s, %d multiprocessors, compute capability %d.%d\n", prop.name, sms, prop.major, prop.minor);
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, 1024 * sizeof(float)));
  const double mma_flop = 2.0 * 16 * 8 * 16;

  // Registers only: warps a multiprocessor x independent chains a warp.
  for (int warps : {4, 8, 16}) {
    const int iterations = 20000, blocks = sms * (warps / 4 < 1 ? 1 : warps / 4);
    const auto run = [&](auto kernel, int chains) {
      const double ms = best_ms([&] { kernel<<<blocks, 128>>>(iterations, sink); });
      const double flop = mma_flop * chains * iterations * double(blocks) * 4;
      std::printf("mma.sync registers    warps/SM %2d chains %d  %8.3f ms  %6.1f TFLOP/s\n", warps, chains,
                  ms, flop / (ms * 1e9));
    };
    run(mma_registers<4>, 4);
    run(mma_registers<8>, 8);
  }

  // ldmatrix-fed 64x64 warp tiles: 4, 8 or 10 warps a block, one block a multiprocessor (16 KiB a warp,
  // 22 with the landing area; the tile's 128 accumulators and fragments take 180-194 registers a thread,
  // so 10 warps is the most one block holds).
  const auto ldmatrix_fed = [&](auto kernel, bool stores, int warps) {
    const int iterations = 4000, threads = hd::gpu::kWarpSize * warps;
    const size_t shared = size_t(warps) * (kSlabBytes + (stores ? kLandingBytes : 0));
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
    const double ms = best_ms([&] { kernel<<<sms, threads, shared>>>(iterations, sink); });
    const double flop = mma_flop * 32 * 4 * iterations * double(sms) * warps;
    std::printf("mma.sync + ldmatrix%s warps/SM %2d 64x64 tile %8.3f ms  %6.1f TFLOP/s\n",
                stores ? " + stage stores" : "", warps, ms, flop / (ms * 1e9));
  };
  for (int warps : {4, 8, 10}) ldmatrix_fed(mma_ldmatrix<false>, false, warps);
  for (int warps : {4, 8, 10}) ldmatrix_fed(mma_ldmatrix<true>, true, warps);

  if (prop.major == 9) {
    // One block of two warpgroups a multiprocessor (154 registers a thread: two blocks would not fit).
    const int iterations = 4000;
    const size_t shared = (128 + 256) * 128 + 1024;
    CHECK(cudaFuncSetAttribute(wgmma_peak, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
    const double ms = best_ms([&] { wgmma_peak<<<sms, 256, shared>>>(iterations, sink); });
    const double flop = 2.0 * 64 * 256 * 16 * 4 * double(iterations) * 2 * sms;
    std::printf("wgmma m64n256k16 SS   1 block (2 warpgroups) a multiprocessor %8.3f ms  %6.1f TFLOP/s\n", ms,
                flop / (ms * 1e9));
  }
  CHECK(cudaFree(sink));
  return 0;
}
