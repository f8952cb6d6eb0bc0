// Division by a divisor fixed when a kernel is launched, as one multiply-high and one shift instead of a
// general 32-bit division (about 20 instructions on either vendor's GPU), which the implicit GEMM did
// twice per k-step and its gather tile eight times per vector: tools/rocm/amd_matrix_peak.py found them
// in the AMD main loops. The round-up method of Granlund and Montgomery ("Division by invariant integers
// using multiplication", PLDI 1994): with l = ceil(log2 d) and m = ceil(2^(31+l) / d),
// x / d = (x · m) >> (31 + l) for every 0 <= x < 2^31, since m·d − 2^(31+l) < d <= 2^l; and m < 2^32,
// so the product's high word is one 32-bit multiply-high. Plain C++ where no GPU compiler is at work, so
// that the CPU tests check it at its range's edges and at random.
#pragma once

#include <cstdint>

#include "ops/host_device.h"

namespace hd::gpu {

class FastDivisor {
 public:
  FastDivisor() = default;  // divides by 1
  // d >= 1 (the callers pass sizes: channels, kernel widths).
  explicit FastDivisor(int d) : divisor_(uint32_t(d)) {
    if (d <= 1) return;  // divisor 1: the quotient is x itself (m would need 33 bits)
    uint32_t l = 0;
    while ((uint64_t(1) << l) < uint64_t(d)) ++l;
    multiplier_ = uint32_t(((uint64_t(1) << (31 + l)) + uint64_t(d) - 1) / uint64_t(d));
    shift_ = l - 1;  // the high word is already >> 32
  }

  // x / d and x % d, for 0 <= x < 2^31.
  HD_HOST_DEVICE int quotient(int x) const {
    if (multiplier_ == 0) return x;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return int(__umulhi(uint32_t(x), multiplier_) >> shift_);
#else
    return int(uint32_t((uint64_t(uint32_t(x)) * multiplier_) >> 32) >> shift_);
#endif
  }
  HD_HOST_DEVICE void divide(int x, int& quotient_out, int& remainder_out) const {
    quotient_out = quotient(x);
    remainder_out = x - quotient_out * int(divisor_);
  }
  HD_HOST_DEVICE int divisor() const { return int(divisor_); }

 private:
  uint32_t divisor_ = 1, multiplier_ = 0, shift_ = 0;
};

}  // namespace hd::gpu
