// Element type conversion on the GPU, and the weight transform of an upsampled convolution's phases. The bf16
// and f16 roundings are written out in integer arithmetic, the same on every vendor, so that the result is
// bit-identical to the CPU's hd::convert (and does not depend on which bf16 header a ROCm release ships).
#include "core/error.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/numeric.cuh"
#include "ops/upsample_phases.h"

namespace hd::gpu {

namespace {

__device__ float load_element(const void* p, DType t, int64_t i) {
  if (t == DType::kF32) return static_cast<const float*>(p)[i];
  const uint16_t bits = static_cast<const uint16_t*>(p)[i];
  if (t == DType::kBF16) return __uint_as_float(uint32_t(bits) << 16);
  // NaN is widened by hand: the hardware conversion may return a canonical NaN, and the first H100 run
  // of the test (2026-11-22) found f16->f32 differing from the CPU's payload-keeping widening.
  if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0)
    return __uint_as_float((uint32_t(bits & 0x8000u) << 16) | 0x7f800000u | (uint32_t(bits & 0x3ffu) << 13));
  return __half2float(__ushort_as_half(bits));
}

__device__ uint16_t float_to_half_bits(float f) {
  // The vendor's intrinsic rounds to nearest even; NaN is made quiet as on the CPU.
  const uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
  return __half_as_ushort(__float2half_rn(f));
}

__global__ void convert_kernel(const void* src, DType src_type, void* dst, DType dst_type, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float v = load_element(src, src_type, i);
    if (dst_type == DType::kF32) {
      static_cast<float*>(dst)[i] = v;
    } else {
      static_cast<uint16_t*>(dst)[i] = dst_type == DType::kBF16 ? float_to_bf16_bits(v) : float_to_half_bits(v);
    }
  }
}

// f32 into 16 bits, 8 elements a thread (two 16-byte loads, one 16-byte store), the same rounding as
// convert_kernel's: where the count is a multiple of 8 and both ends are 16-byte aligned, as the attention
// gradient's f32 sums of dQ are. Element by element, SDXL's 21 MB of those sums took 18.7 us on an H200
// (2026-11-28), where cuDNN's own conversion of the same sums took 11.1; this kernel, 8.3.
__device__ uint32_t narrow_pair(float lo, float hi, bool bf16) {
  return bf16 ? uint32_t(float_to_bf16_bits(lo)) | uint32_t(float_to_bf16_bits(hi)) << 16
              : uint32_t(float_to_half_bits(lo)) | uint32_t(float_to_half_bits(hi)) << 16;
}

// Up to three f32 tensors of `vectors` 8-element vectors each, one after another in src, narrowed into
// their own destinations: blockIdx.y picks the tensor.
struct NarrowedOuts {
  uint4* dst[3];
};

__global__ void narrow_vectors_kernel(const float4* __restrict__ src, NarrowedOuts outs, bool bf16,
                                      int64_t vectors) {
  src += 2 * vectors * blockIdx.y;
  // Chosen by selects: indexed by blockIdx.y instead, the attention gradient's conversions took SDXL's
  // cross-attention gradient from 0.063 to 0.068 ms (H200, 2026-11-28; why, not profiled).
  uint4* __restrict__ const dst = blockIdx.y == 0 ? outs.dst[0] : blockIdx.y == 1 ? outs.dst[1] : outs.dst[2];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += stride) {
    const float4 a = src[2 * i], b = src[2 * i + 1];
    dst[i] = make_uint4(narrow_pair(a.x, a.y, bf16), narrow_pair(a.z, a.w, bf16), narrow_pair(b.x, b.y, bf16),
                        narrow_pair(b.z, b.w, bf16));
  }
}

constexpr int kThreads = 256;  // a block of each kernel

void launch_narrow_vectors(const float* src, const NarrowedOuts& outs, int tensors, bool bf16,
                           int64_t count) {
  const dim3 grid(grid_stride_blocks(count / 8, kThreads), unsigned(tensors));
  narrow_vectors_kernel<<<grid, kThreads, 0, current_stream()>>>(reinterpret_cast<const float4*>(src), outs,
                                                                 bf16, count / 8);
  HD_GPU_CHECK_LAUNCH();
}

// out [2, 2, Cout, 2, 2, Cin] from w [Cout, 3, 3, Cin] (upsample_phases.h): each tap the sum of the 3x3
// taps it stands for, in f32 in the CPU's order, rounded once as convert_kernel rounds.
__global__ void upsample_conv_phases_kernel(const void* w, void* out, DType t, int64_t cout, int64_t cin,
                                            int64_t total) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t ci = i % cin, tap = i / cin;
    const int c = int(tap % 2), r = int(tap / 2 % 2);
    const int64_t co = tap / 4 % cout;
    const int dx = int(tap / 4 / cout % 2), dy = int(tap / 4 / cout / 2);
    float sum = 0.f;
    for (int a = ops::phase_first_row(dy, r); a <= ops::phase_last_row(dy, r); ++a)
      for (int b = ops::phase_first_row(dx, c); b <= ops::phase_last_row(dx, c); ++b)
        sum += load_element(w, t, ((co * 3 + a) * 3 + b) * cin + ci);
    if (t == DType::kF32) {
      static_cast<float*>(out)[i] = sum;
    } else {
      static_cast<uint16_t*>(out)[i] = t == DType::kBF16 ? float_to_bf16_bits(sum) : float_to_half_bits(sum);
    }
  }
}

}  // namespace

void upsample_conv2d_phases(const Tensor& w, const Tensor& out) {
  HD_CHECK_KIND(out.dtype == w.dtype, ErrorKind::kUnsupported,
                "upsample_conv2d_phases: weight and phases dtypes differ");
  const int64_t total = out.numel();
  if (total == 0) return;
  HD_GPU_CHECK(cudaSetDevice(w.device.index));
  upsample_conv_phases_kernel<<<grid_stride_blocks(total, kThreads), kThreads, 0, current_stream()>>>(
      w.data, out.data, w.dtype, w.dim(0), w.dim(3), total);
  HD_GPU_CHECK_LAUNCH();
}

void convert(const Tensor& src, const Tensor& dst) {
  const int64_t count = src.numel();
  if (count == 0) return;
  HD_GPU_CHECK(cudaSetDevice(src.device.index));
  if (src.dtype == DType::kF32 && (dst.dtype == DType::kF16 || dst.dtype == DType::kBF16) && count % 8 == 0 &&
      is_aligned(src.data, 16) && is_aligned(dst.data, 16)) {
    launch_narrow_vectors(static_cast<const float*>(src.data), NarrowedOuts{{static_cast<uint4*>(dst.data)}},
                          1, dst.dtype == DType::kBF16, count);
    return;
  }
  convert_kernel<<<grid_stride_blocks(count, kThreads), kThreads, 0, current_stream()>>>(
      src.data, src.dtype, dst.data, dst.dtype, count);
  HD_GPU_CHECK_LAUNCH();
}

void narrow_stacked(const float* sums, int64_t count, std::initializer_list<const Tensor*> outs) {
  HD_CHECK(outs.size() >= 1 && outs.size() <= 3 && count % 8 == 0 && is_aligned(sums, 16),
           "narrow_stacked: 1 to 3 tensors of a multiple of 8 elements from 16-byte-aligned sums");
  const Tensor& first = **outs.begin();
  NarrowedOuts targets{};
  int i = 0;
  for (const Tensor* out : outs) {
    HD_CHECK(out->numel() == count && out->is_contiguous() && is_aligned(out->data, 16) &&
                 (out->dtype == DType::kF16 || out->dtype == DType::kBF16) && out->dtype == first.dtype,
             "narrow_stacked: every output dense, 16-byte aligned, of ", count,
             " f16 or bf16 elements alike");
    targets.dst[i++] = static_cast<uint4*>(out->data);
  }
  if (count == 0) return;
  HD_GPU_CHECK(cudaSetDevice(first.device.index));
  launch_narrow_vectors(sums, targets, int(outs.size()), first.dtype == DType::kBF16, count);
}

}  // namespace hd::gpu
