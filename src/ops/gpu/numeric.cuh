// Element types of GPU tensors and their conversions, the same on every vendor. f16 uses the vendor's
// __half; bf16 is a plain 16-bit pattern converted in integer arithmetic, because ROCm 5.2 (Debian 12)
// ships no bf16 header and because the rounding must match the CPU's hd::convert bit for bit.
#pragma once

#include "core/dtype.h"
#include "ops/gpu/common.cuh"

namespace hd::gpu {

struct Bf16 {
  uint16_t bits;
};

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(Bf16 x) { return __uint_as_float(uint32_t(x.bits) << 16); }

__device__ inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x0040u);  // quiet NaN
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);                   // nearest even
}

template <class T>
__device__ T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline Bf16 from_float<Bf16>(float x) { return Bf16{float_to_bf16_bits(x)}; }

// SiLU, y / (1 + e^-y), with the fast division: it gives 0 where e^-y overflows, which is the limit.
// GroupNorm's fused SiLU on 16-bit tensors (both of its vector paths), whose rounding hides the error.
__device__ inline float fast_silu(float y) {
  return __fdividef(y, 1.f + __expf(-y));
}

// Two 16-bit values in one 32-bit register, the lower index in the low half (the matrix units' order).
template <class T>
__device__ inline uint32_t pack2(float lo, float hi);
template <>
__device__ inline uint32_t pack2<__half>(float lo, float hi) {
  return uint32_t(__half_as_ushort(__float2half_rn(lo))) | (uint32_t(__half_as_ushort(__float2half_rn(hi))) << 16);
}
template <>
__device__ inline uint32_t pack2<Bf16>(float lo, float hi) {
  return uint32_t(float_to_bf16_bits(lo)) | (uint32_t(float_to_bf16_bits(hi)) << 16);
}

template <class T>
__device__ inline float low_half(uint32_t v);
template <>
__device__ inline float low_half<__half>(uint32_t v) { return __half2float(__ushort_as_half(uint16_t(v & 0xffffu))); }
template <>
__device__ inline float low_half<Bf16>(uint32_t v) { return __uint_as_float(v << 16); }
template <class T>
__device__ inline float high_half(uint32_t v);
template <>
__device__ inline float high_half<__half>(uint32_t v) { return __half2float(__ushort_as_half(uint16_t(v >> 16))); }
template <>
__device__ inline float high_half<Bf16>(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// a + b for the eight 16-bit values of two 16-byte vectors, each sum rounded to T. f16 adds in packed
// pairs with no conversion: with f32 conversions, GroupNorm's register-held kernels of 8 vectors a
// thread went from 105 to 160 VGPRs on gfx1030 and spilled (clang 22).
template <class T>
__device__ inline uint4 add_vectors(const uint4& a, const uint4& b) {
  static_assert(sizeof(T) == 2, "eight values to a 16-byte vector");
  const T* x = reinterpret_cast<const T*>(&a);
  const T* y = reinterpret_cast<const T*>(&b);
  T sum[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) sum[j] = from_float<T>(to_float(x[j]) + to_float(y[j]));
  return *reinterpret_cast<const uint4*>(sum);
}
template <>
__device__ inline uint4 add_vectors<__half>(const uint4& a, const uint4& b) {
  const __half2* x = reinterpret_cast<const __half2*>(&a);
  const __half2* y = reinterpret_cast<const __half2*>(&b);
  uint4 r;
  __half2* sum = reinterpret_cast<__half2*>(&r);
#pragma unroll
  for (int k = 0; k < 4; ++k) sum[k] = __hadd2(x[k], y[k]);
  return r;
}

// Lanes that cooperate through shuffles (NVIDIA's 32-lane matrix-fragment layout and its portable
// version, row reductions): 32 on every target. A 64-wide AMD wavefront holds two such groups; shuffles
// never cross a group. (AMD's MFMA layout works on 64-lane groups: Fragments16x16 in mma.cuh.)
inline constexpr int kFragmentLanes = 32;

#if !defined(HD_GPU_HIP)
// CUDA's shuffles name the lanes taking part: every lane of the warp.
inline constexpr unsigned kAllLanes = unsigned((uint64_t(1) << kWarpSize) - 1);
#endif

// Lane exchange within groups of `width` lanes, spelled once for both vendors.
__device__ inline uint32_t shuffle(uint32_t v, int src_lane, int width) {
#if defined(HD_GPU_HIP)
  return uint32_t(__shfl(int(v), src_lane, width));
#else
  return __shfl_sync(kAllLanes, v, src_lane, width);
#endif
}
__device__ inline float shuffle_xor(float v, int lane_mask, int width) {
#if defined(HD_GPU_HIP)
  return __shfl_xor(v, lane_mask, width);
#else
  return __shfl_xor_sync(kAllLanes, v, lane_mask, width);
#endif
}

// The sum / maximum of v over the calling group of kFragmentLanes lanes, returned to every lane.
__device__ inline float group_sum(float v) {
  for (int m = kFragmentLanes / 2; m > 0; m /= 2) v += shuffle_xor(v, m, kFragmentLanes);
  return v;
}
__device__ inline float group_max(float v) {
  for (int m = kFragmentLanes / 2; m > 0; m /= 2) v = fmaxf(v, shuffle_xor(v, m, kFragmentLanes));
  return v;
}

// Host side: calls f with a null pointer of the element type that holds `t` (float, __half or Bf16), so
// that one launcher instantiates a kernel for each.
template <class F>
void with_element_type(DType t, F f) {
  switch (t) {
    case DType::kF16: return f(static_cast<__half*>(nullptr));
    case DType::kBF16: return f(static_cast<Bf16*>(nullptr));
    default: return f(static_cast<float*>(nullptr));
  }
}

}  // namespace hd::gpu
