// The per-device scratch buffer: large enough for each request, reused while it is, regrown when not.
#include "core/scratch.h"

#include <gtest/gtest.h>

#include <cstring>

namespace hd {
namespace {

TEST(Scratch, GrowsOnDemandAndIsReusedOtherwise) {
  void* a = scratch(Device::cpu(), 1000);
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, 1000);
  EXPECT_EQ(scratch(Device::cpu(), 500), a);  // fits: the same memory
  const size_t big = size_t(8) << 20;          // past the 1 MiB minimum: a new, larger buffer
  auto* b = static_cast<unsigned char*>(scratch(Device::cpu(), big));
  ASSERT_NE(b, nullptr);
  std::memset(b, 2, big);  // all of it writable (ASan checks the bounds)
  EXPECT_EQ(scratch(Device::cpu(), big), b);
}

}  // namespace
}  // namespace hd
