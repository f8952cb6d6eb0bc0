// Element types and exact conversions between them.
//
// f16 and bf16 are stored as raw 16-bit patterns (struct wrappers, so that they never convert silently).
// Conversions from f32 round to nearest, ties to even, as the hardware and PyTorch do; so CPU results
// converted here match what a GPU or diffusers stores bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hd {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "f16", "bf16", "i32", "i64"
// Parses "f32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16"; throws Error otherwise.
DType parse_dtype(std::string_view name);
bool is_floating(DType t);

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// Exact: every f16 / bf16 value is representable in f32.
float half_to_float(Half h);
float bf16_to_float(BFloat16 b);
// Round to nearest, ties to even. Overflow gives +-inf; NaN stays NaN (quiet) with its sign.
Half float_to_half(float f);
BFloat16 float_to_bf16(float f);

// Bulk conversions between any two floating dtypes (src and dst may not overlap).
void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t count);

}  // namespace hd
