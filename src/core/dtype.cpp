#include "core/dtype.h"

#include <bit>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif
#include <cstring>

#include "core/error.h"

namespace hd {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  HD_ASSERT(false);
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  HD_ASSERT(false);
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return DType::kF32;
  if (name == "f16" || name == "float16" || name == "fp16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  throw Error(ErrorKind::kInvalidInput, str_cat("unknown dtype '", name, "' (expected f32, f16 or bf16)"));
}

bool is_floating(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

float half_to_float(Half h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // inf, or NaN made quiet with its payload kept (as x86's F16C and IEEE 754 do)
    bits = sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal: normalise; the value is mantissa * 2^-24
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | (uint32_t(112 - e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

Half float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep the top payload bits and force quiet so it cannot become inf
    return Half{uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};
  }
  if (abs >= 0x477ff000u) {  // >= 65520 rounds to inf (65504 is the largest finite half)
    return Half{uint16_t(sign | 0x7c00u)};
  }
  if (abs < 0x38800000u) {  // below 2^-14: the result is subnormal (or zero)
    // Adding 0.5 moves the value into [0.5, 1), where a float's ulp is 2^-24, the same as a subnormal
    // half's; the FPU's own round-to-nearest-even then does the rounding, and the low bits are the half.
    const float shifted = std::bit_cast<float>(abs) + 0.5f;
    return Half{uint16_t(sign | uint16_t(std::bit_cast<uint32_t>(shifted) - 0x3f000000u))};
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  const uint32_t mantissa_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xfffu + mantissa_odd;  // may carry into the exponent, which is right
  return Half{uint16_t(sign | uint16_t((rounded - 0x38000000u) >> 13))};
}

float bf16_to_float(BFloat16 b) { return std::bit_cast<float>(uint32_t(b.bits) << 16); }

BFloat16 float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t((x >> 16) | 0x0040u)};  // quiet NaN
  const uint32_t lsb = (x >> 16) & 1u;
  return BFloat16{uint16_t((x + 0x7fffu + lsb) >> 16)};  // overflow past max rounds to inf, as it should
}

namespace {

// The bulk conversions' elements: branch-free, so that the loops below vectorise (a checkpoint's
// gigabytes go through them at load time), and equal to the scalar functions above bit for bit
// (dtype_test checks every f16 pattern and a million random f32 ones). Loads and stores go through
// memcpy: a safetensors offset need not be aligned.
inline uint16_t load_bits16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_bits32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint32_t f32_bits_of_half(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  // Normal and subnormal halves alike: the bits moved into a float's place are the value times 2^-112,
  // which one exact multiplication puts right (a subnormal float input included).
  const uint32_t finite = std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude << 13) * 0x1p112f);
  const uint32_t payload = magnitude & 0x3ffu;  // inf, or a NaN made quiet with its payload kept
  const uint32_t special = 0x7f800000u | (payload << 13) | (payload != 0 ? 0x00400000u : 0u);
  return sign | (magnitude >= 0x7c00u ? special : finite);
}

inline uint16_t half_bits_of_f32(uint32_t x) {
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  // float_to_half's cases, each computed and one selected.
  const uint32_t normal = (abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u) >> 13;
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(abs) + 0.5f) - 0x3f000000u;
  uint32_t r = abs < 0x38800000u ? subnormal : normal;
  r = abs >= 0x477ff000u ? 0x7c00u : r;
  r = abs > 0x7f800000u ? 0x7e00u | ((abs >> 13) & 0x3ffu) : r;
  return uint16_t(sign | r);
}

inline uint16_t bf16_bits_of_f32(uint32_t x) {
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x0040u : rounded);
}

inline uint32_t f32_bits_from(const uint8_t* src, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return load_bits32(src + 4 * i);
    case DType::kF16: return f32_bits_of_half(load_bits16(src + 2 * i));
    default: return uint32_t(load_bits16(src + 2 * i)) << 16;  // bf16
  }
}

template <DType kSrc, DType kDst>
void convert_loop(const uint8_t* src, uint8_t* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const uint32_t bits = f32_bits_from(src, kSrc, i);
    if constexpr (kDst == DType::kF32) {
      std::memcpy(dst + 4 * i, &bits, 4);
    } else {
      const uint16_t out = kDst == DType::kF16 ? half_bits_of_f32(bits) : bf16_bits_of_f32(bits);
      std::memcpy(dst + 2 * i, &out, 2);
    }
  }
}

#if defined(__x86_64__)
// x86's F16C converts eight halves per instruction, with the same results as the loops above (round to
// nearest even, subnormals exact, NaN made quiet); the loops finish the tail. Chosen at run time: the
// build targets baseline x86-64.
__attribute__((target("avx,f16c"))) size_t f16_to_f32_f16c(const uint8_t* src, uint8_t* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + 4 * i), _mm256_cvtph_ps(h));
  }
  return i;
}
__attribute__((target("avx,f16c"))) size_t f32_to_f16_f16c(const uint8_t* src, uint8_t* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 f = _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}
// CPUID's AVX and F16C bits, and the system saving the AVX registers (OSXSAVE, then XCR0's SSE and AVX
// state bits), read directly: clang's __builtin_cpu_supports knows no "f16c".
bool has_f16c() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const bool osxsave = (ecx >> 27) & 1u, avx = (ecx >> 28) & 1u, f16c = (ecx >> 29) & 1u;
    if (!(osxsave && avx && f16c)) return false;
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    return (xcr0_low & 6u) == 6u;
  }();
  return yes;
}
#endif

// The element loops, after the hardware's conversion where it has one.
template <DType kSrc, DType kDst>
void convert_run(const uint8_t* src, uint8_t* dst, size_t count) {
  size_t done = 0;
#if defined(__x86_64__)
  if constexpr (kSrc == DType::kF16 && kDst == DType::kF32) {
    if (has_f16c()) done = f16_to_f32_f16c(src, dst, count);
  } else if constexpr (kSrc == DType::kF32 && kDst == DType::kF16) {
    if (has_f16c()) done = f32_to_f16_f16c(src, dst, count);
  }
#endif
  convert_loop<kSrc, kDst>(src + done * dtype_size(kSrc), dst + done * dtype_size(kDst), count - done);
}

template <DType kSrc>
void convert_from(const uint8_t* src, uint8_t* dst, DType dst_type, size_t count) {
  switch (dst_type) {
    case DType::kF32: return convert_run<kSrc, DType::kF32>(src, dst, count);
    case DType::kF16: return convert_run<kSrc, DType::kF16>(src, dst, count);
    case DType::kBF16: return convert_run<kSrc, DType::kBF16>(src, dst, count);
    default: HD_ASSERT(false);
  }
}

}  // namespace

void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t count) {
  if (src_type == dst_type) {
    std::memcpy(dst, src, count * dtype_size(src_type));
    return;
  }
  HD_CHECK_KIND(is_floating(src_type) && is_floating(dst_type), ErrorKind::kUnsupported, "cannot convert ",
                dtype_name(src_type), " to ", dtype_name(dst_type));
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  switch (src_type) {
    case DType::kF32: return convert_from<DType::kF32>(in, out, dst_type, count);
    case DType::kF16: return convert_from<DType::kF16>(in, out, dst_type, count);
    default: return convert_from<DType::kBF16>(in, out, dst_type, count);
  }
}

}  // namespace hd
