#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "test_util.h"

namespace hd {
namespace {

// The reference for f32 -> 16-bit: among all finite values of the format (decoded exactly), the nearest
// to x, ties to the even bit pattern; beyond the largest finite value by half an ulp or more, infinity.
// `decode` gives the value of a bit pattern, `max_finite_bits` the largest finite positive pattern.
template <typename Decode>
uint16_t nearest_reference(float x, Decode decode, uint16_t max_finite_bits, uint16_t inf_bits) {
  const double v = std::abs(double(x));
  const uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  // Positive finite patterns are ordered like their values: binary search for the neighbours.
  uint16_t lo = 0, hi = max_finite_bits;
  if (v >= double(decode(max_finite_bits))) {
    const double ulp = double(decode(max_finite_bits)) - double(decode(max_finite_bits - 1));
    return uint16_t(sign | (v >= double(decode(max_finite_bits)) + ulp / 2 ? inf_bits : max_finite_bits));
  }
  while (hi - lo > 1) {
    const uint16_t mid = uint16_t((lo + hi) / 2);
    if (double(decode(mid)) <= v) lo = mid; else hi = mid;
  }
  const double d_lo = v - double(decode(lo)), d_hi = double(decode(hi)) - v;
  uint16_t pick = d_lo < d_hi ? lo : d_hi < d_lo ? hi : ((lo & 1u) == 0 ? lo : hi);
  return uint16_t(sign | pick);
}

float random_float_any_magnitude(test::Rng& rng) {
  // Uniform over bit patterns covers subnormals, normals near every exponent, and the overflow region.
  return std::bit_cast<float>(uint32_t(rng.engine()()));
}

TEST(DType, HalfToFloatToHalfRoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const Half h{uint16_t(bits)};
    const float f = half_to_float(h);
    const bool is_nan = (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    if (is_nan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      // NaN comes back quiet, sign and top payload bits kept.
      ASSERT_EQ(float_to_half(f).bits, uint16_t(bits | 0x0200u)) << std::hex << bits;
    } else {
      ASSERT_EQ(float_to_half(f).bits, bits) << std::hex << bits;
    }
  }
}

TEST(DType, HalfDecodesKnownValues) {
  EXPECT_EQ(half_to_float(Half{0x3c00}), 1.0f);
  EXPECT_EQ(half_to_float(Half{0xc000}), -2.0f);
  EXPECT_EQ(half_to_float(Half{0x7bff}), 65504.0f);
  EXPECT_EQ(half_to_float(Half{0x0001}), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_to_float(Half{0x0400}), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(half_to_float(Half{0x7c00})));
  EXPECT_TRUE(std::signbit(half_to_float(Half{0x8000})));
}

TEST(DType, FloatToHalfRoundsToNearestEvenOnRandomValues) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto decode = [](uint16_t b) { return half_to_float(Half{b}); };
  for (int i = 0; i < 200000; ++i) {
    float x = random_float_any_magnitude(rng);
    if (i % 2) x = std::ldexp(rng.uniform(-1.0f, 1.0f), int(rng.integer(-27, 17)));  // the half range, densely
    if (std::isnan(x)) continue;
    const uint16_t expected = std::isinf(x) ? uint16_t((std::signbit(x) ? 0x8000u : 0u) | 0x7c00u)
                                            : nearest_reference(x, decode, 0x7bffu, 0x7c00u);
    ASSERT_EQ(float_to_half(x).bits, expected) << "x = " << x;
#if defined(__FLT16_MAX__)
    // The compiler's own conversion is a second, independent reference.
    ASSERT_EQ(std::bit_cast<uint16_t>(static_cast<_Float16>(x)), expected) << "x = " << x;
#endif
  }
}

TEST(DType, FloatToHalfTiesGoToEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: the even pattern (1.0) wins.
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00u);
  // 1 + 3·2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02u);
  EXPECT_EQ(float_to_half(65519.0f).bits, 0x7bffu);  // just under the rounding boundary
  EXPECT_EQ(float_to_half(65520.0f).bits, 0x7c00u);  // the tie rounds up to infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)).bits, 0x0000u);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -26)).bits, 0x0001u);
}

TEST(DType, Bf16RoundsToNearestEvenOnRandomValues) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto decode = [](uint16_t b) { return bf16_to_float(BFloat16{b}); };
  for (int i = 0; i < 200000; ++i) {
    const float x = random_float_any_magnitude(rng);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(x))));
      continue;
    }
    const uint16_t expected = std::isinf(x) ? uint16_t((std::signbit(x) ? 0x8000u : 0u) | 0x7f80u)
                                            : nearest_reference(x, decode, 0x7f7fu, 0x7f80u);
    ASSERT_EQ(float_to_bf16(x).bits, expected) << "x = " << x;
  }
}

TEST(DType, Bf16IsExactForItsValuesAndTiesToEven) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float f = bf16_to_float(BFloat16{uint16_t(bits)});
    if (!std::isnan(f)) {
      ASSERT_EQ(float_to_bf16(f).bits, bits);
    }
  }
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80u);      // tie to even (down)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82u);  // tie to even (up)
}

TEST(DType, BulkConvertMatchesScalar) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  std::vector<float> src(1000);
  for (float& v : src) v = rng.normal(0.0f, 100.0f);
  std::vector<Half> h(src.size());
  std::vector<BFloat16> b(src.size());
  std::vector<float> back(src.size());
  convert(src.data(), DType::kF32, h.data(), DType::kF16, src.size());
  convert(h.data(), DType::kF16, b.data(), DType::kBF16, src.size());
  convert(b.data(), DType::kBF16, back.data(), DType::kF32, src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(h[i].bits, float_to_half(src[i]).bits);
    ASSERT_EQ(b[i].bits, float_to_bf16(half_to_float(h[i])).bits);
    ASSERT_EQ(back[i], bf16_to_float(b[i]));
  }
}

// The bulk conversions (x86's F16C where the CPU has it, else branch-free loops, which also finish
// every run's tail) must agree with the scalar functions bit for bit on every f16 pattern and a million
// random f32 bit patterns (NaNs, infinities, subnormals and overflow included), read from an unaligned
// address as a safetensors file may hold them. One element at a time takes the loops on every CPU.
TEST(DType, BulkConvertEqualsScalarOnEveryHalfAndRandomFloatBits) {
  std::vector<uint8_t> halves(2 * 65536 + 1);
  for (uint32_t i = 0; i < 65536; ++i) std::memcpy(&halves[1 + 2 * i], &i, 2);
  std::vector<float> as_f32(65536);
  std::vector<BFloat16> as_bf16(65536);
  convert(halves.data() + 1, DType::kF16, as_f32.data(), DType::kF32, 65536);
  convert(halves.data() + 1, DType::kF16, as_bf16.data(), DType::kBF16, 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float expected = half_to_float(Half{uint16_t(i)});
    ASSERT_EQ(std::bit_cast<uint32_t>(as_f32[i]), std::bit_cast<uint32_t>(expected)) << "half 0x" << std::hex << i;
    ASSERT_EQ(as_bf16[i].bits, float_to_bf16(expected).bits) << "half 0x" << std::hex << i;
    float one = 0.0f;
    convert(halves.data() + 1 + 2 * i, DType::kF16, &one, DType::kF32, 1);
    ASSERT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(expected)) << "half 0x" << std::hex << i;
  }
  test::Rng rng;
  HD_SEED_TRACE(rng);
  std::vector<uint32_t> bits(1 << 20);
  for (uint32_t& b : bits) b = uint32_t(rng.engine()());
  // The edges of each case of float_to_half.
  const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x33000000u, 0x33000001u, 0x387fffffu,
                            0x38800000u, 0x477fefffu, 0x477ff000u, 0x7f800000u, 0xff800000u, 0x7f800001u,
                            0x7fc00000u, 0xffffffffu, 0x3f800000u, 0x3f801000u, 0x3f803000u};
  std::copy(std::begin(edges), std::end(edges), bits.begin());
  std::vector<Half> h(bits.size());
  std::vector<BFloat16> b(bits.size());
  convert(bits.data(), DType::kF32, h.data(), DType::kF16, bits.size());
  convert(bits.data(), DType::kF32, b.data(), DType::kBF16, bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    const float f = std::bit_cast<float>(bits[i]);
    ASSERT_EQ(h[i].bits, float_to_half(f).bits) << "f32 bits 0x" << std::hex << bits[i];
    ASSERT_EQ(b[i].bits, float_to_bf16(f).bits) << "f32 bits 0x" << std::hex << bits[i];
    if (i % 16 != 0) continue;
    Half one{};
    convert(&bits[i], DType::kF32, &one, DType::kF16, 1);
    ASSERT_EQ(one.bits, float_to_half(f).bits) << "f32 bits 0x" << std::hex << bits[i];
  }
}

TEST(DType, NamesAndErrors) {
  EXPECT_EQ(parse_dtype("fp16"), DType::kF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_THROW(parse_dtype("f8"), Error);
  int32_t ints[2] = {1, 2};
  float out[2];
  EXPECT_THROW(convert(ints, DType::kI32, out, DType::kF32, 2), Error);
}

}  // namespace
}  // namespace hd
