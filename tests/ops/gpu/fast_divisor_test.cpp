// The GEMM kernels' division by a launch-time divisor (ops/gpu/fast_divisor.h) against the division
// operator, on the CPU (the same formula the device code computes with a multiply-high): every divisor
// the kernels can meet in their common range, at every dividend near the edges where the round-up
// method can fail (multiples of d and their neighbours, powers of two, the top of the range), and on
// random dividends.
#include "ops/gpu/fast_divisor.h"

#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <vector>

namespace hd {
namespace {

void expect_divides(const gpu::FastDivisor& f, int d, int x) {
  int q = -1, r = -1;
  f.divide(x, q, r);
  ASSERT_EQ(q, x / d) << x << " / " << d;
  ASSERT_EQ(r, x % d) << x << " % " << d;
}

TEST(FastDivisor, MatchesDivisionOverTheWholeNonNegativeRange) {
  std::mt19937 rng(20261124);
  std::vector<int> divisors;
  for (int d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int d : {5120, 6144, 8191, 8192, 65535, 65536, 1 << 20, (1 << 20) + 1, 1000003, INT_MAX / 3, INT_MAX - 1, INT_MAX})
    divisors.push_back(d);
  for (const int d : divisors) {
    const gpu::FastDivisor f(d);
    EXPECT_EQ(f.divisor(), d);
    const int64_t n = d;  // in 64 bits: d + 1 and 2d - 1 pass INT_MAX for the largest divisors
    for (int64_t x : {int64_t(0), int64_t(1), n - 1, n, n + 1, 2 * n - 1, int64_t(INT_MAX), int64_t(INT_MAX) - 1,
                      int64_t(INT_MAX) - n, int64_t(1) << 30, (int64_t(1) << 30) - 1})
      if (x >= 0 && x <= INT_MAX) expect_divides(f, d, int(x));
    const int64_t top_multiple = int64_t(INT_MAX) / d * d;  // the last multiples below 2^31 and their neighbours
    for (int64_t x = top_multiple - 2; x <= std::min<int64_t>(top_multiple + 1, INT_MAX); ++x)
      if (x >= 0) expect_divides(f, d, int(x));
    std::uniform_int_distribution<int> any(0, INT_MAX);
    for (int i = 0; i < 200; ++i) expect_divides(f, d, any(rng));
    for (int i = 0; i < 50; ++i) expect_divides(f, d, int(any(rng) % (64 * n + 1)));  // small multiples, as k is
  }
}

}  // namespace
}  // namespace hd
