// The matrix units' measured ceilings on the machine it runs on, f16 in and f32 accumulators: what a GEMM
// tile built on each instruction class can reach at most, so that issue 21's targets for our tiles (400
// TFLOP/s on 8192^3 on the mma.sync class, the AMD proxy) can be read as a share of what the instruction
// itself gives, not only against cuBLASLt (which uses Hopper's wgmma).
//   mma.sync, registers only:  independent m16n8k16 chains, operands held in registers (no memory at all)
//   mma.sync + ldmatrix:       a 64x64 warp tile's k16 step as our fragment-layer tiles run it: 4 A and 4
//                              B ldmatrix.x4 from swizzled shared memory, 32 products (no global memory);
//                              and the same with the shared-memory writes a 256x128 tile's copies add
//   wgmma m64n256k16:          both operands from 128-byte-swizzled shared memory, 2 warpgroups a block
// Build and run on the device: nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/matrix_peak
// tools/device/matrix_peak.cu (sm_80 and newer run the first two; wgmma needs sm_90a). Prints one line per
// configuration, the best of 5 timed launches.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// kChains independent accumulators a warp, each product depending on the one before it in its chain.
template <int kChains>
__global__ void mma_registers(int iterations, float* sink) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * 2654435761u + i);  // varied f16 bits
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * 40503u + i);
  float c[kChains][4] = {};
  for (int it = 0; it < iterations; ++it)
#pragma unroll
    for (int j = 0; j < kChains; ++j) mma(c[j], a, b);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kChains; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 1234.5f) sink[threadIdx.x] = s;  // keeps the products alive
}

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
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint8_t* const slab = smem + warp * (kSlabBytes + (kStores ? kLandingBytes : 0));  // A then B, 8 KiB each
  uint4* const landing = reinterpret_cast<uint4*>(slab + kSlabBytes);
  for (int i = lane; i < 2 * 64 * 128 / 4; i += 32) reinterpret_cast<uint32_t*>(slab)[i] = 0x3c003c00u ^ i;
  __syncwarp();
  const uint8_t* const a_s = slab;
  const uint8_t* const b_s = slab + 64 * 128;
  float c[4][8][4] = {};
  // ldmatrix.x4: lane l gives the row address of matrix l / 8; matrices (rows 0-7 / 8-15) x (k 0-7 / 8-15).
  const int row_in = lane % 16, chunk_in = lane / 16;
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t a[4][4], b[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i * 16 + row_in, chunk = kk * 2 + chunk_in;
        ldmatrix_x4(a[i], a_s + r * 128 + ((chunk ^ (r % 8)) << 4));
        ldmatrix_x4(b[i], b_s + r * 128 + ((chunk ^ (r % 8)) << 4));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const uint32_t bj[2] = {b[j / 2][(j % 2)], b[j / 2][(j % 2) + 2]};
          mma(c[i][j], a[i], bj);
        }
      if constexpr (kStores) {
#pragma unroll
        for (int v = 0; v < 3; ++v) {
          const uint4 value = make_uint4(it, kk, v, lane);
          asm volatile(
              "st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(static_cast<uint32_t>(
                  __cvta_generic_to_shared(landing + (kk * 3 + v) % (kLandingBytes / 512) * 32 + lane))),
              "r"(value.x), "r"(value.y), "r"(value.z), "r"(value.w)
              : "memory");
        }
      }
    }
  }
  float s = 0.f;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) s += c[i][j][0] + c[i][j][1] + c[i][j][2] + c[i][j][3];
  if (s == 1234.5f) sink[threadIdx.x] = s;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
#define HAVE_WGMMA 1
#endif

__device__ __forceinline__ uint64_t descriptor(const void* tile) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t((address & 0x3FFFF) >> 4) | uint64_t(1) << 16 | uint64_t(1024 >> 4) << 32 |
         uint64_t(1) << 62;
}

// Two warpgroups a block, each 64 rows of A against the block's 256 rows of B over a 64-k slab (k16 steps
// 32 bytes apart), four wgmma a commit, at most one group in flight behind the one issued.
__global__ void __launch_bounds__(256) wgmma_peak(int iterations, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t smem[];
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint8_t* const base = smem + ((1024 - (raw & 1023)) & 1023);
  for (int i = threadIdx.x; i < (128 + 256) * 128 / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(base)[i] = 0x3c003c00u ^ (i * 2654435761u & 0x03ff03ffu);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int warpgroup = threadIdx.x / 128;
  const uint8_t* const a_s = base + warpgroup * 64 * 128;
  const uint8_t* const b_s = base + 128 * 128;
  float d[128];
  for (float& x : d) x = 0.f;
  for (int it = 0; it < iterations; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t a = descriptor(a_s + kk * 32), b = descriptor(b_s + kk * 32);
      asm volatile(
          "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
          "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
          "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
          "%40, "
          "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
          "%60, "
          "%61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
          "%80, "
          "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
          "%100, "
          "%101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, "
          "%117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
            "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
            "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
            "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
            "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
            "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
            "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
            "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
            "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
            "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
            "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
            "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
            "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
            "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),
            "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]),
            "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),
            "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
            "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),
            "+f"(d[127])
          : "l"(a), "l"(b));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (float& x : d) asm volatile("" : "+f"(x)::"memory");  // the sum below reads them after the wait
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
    const int iterations = 4000, threads = 32 * warps;
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
