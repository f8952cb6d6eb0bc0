#include "core/dtype.h"

#include <bit>
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
  if (exponent == 0x1f) {  // inf or NaN: keep the payload
    bits = sign | 0x7f800000u | (mantissa << 13);
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

float load_float(const void* src, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(src)[i];
    case DType::kF16: return half_to_float(static_cast<const Half*>(src)[i]);
    case DType::kBF16: return bf16_to_float(static_cast<const BFloat16*>(src)[i]);
    default: break;
  }
  throw Error(ErrorKind::kUnsupported, str_cat("cannot convert from ", dtype_name(t), " to a float type"));
}

}  // namespace

void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t count) {
  if (src_type == dst_type) {
    std::memcpy(dst, src, count * dtype_size(src_type));
    return;
  }
  HD_CHECK_KIND(is_floating(src_type) && is_floating(dst_type), ErrorKind::kUnsupported, "cannot convert ",
                dtype_name(src_type), " to ", dtype_name(dst_type));
  for (size_t i = 0; i < count; ++i) {
    const float v = load_float(src, src_type, i);
    switch (dst_type) {
      case DType::kF32: static_cast<float*>(dst)[i] = v; break;
      case DType::kF16: static_cast<Half*>(dst)[i] = float_to_half(v); break;
      case DType::kBF16: static_cast<BFloat16*>(dst)[i] = float_to_bf16(v); break;
      default: HD_ASSERT(false);
    }
  }
}

}  // namespace hd
