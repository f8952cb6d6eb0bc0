#include "core/arena.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace hd {
namespace {

// The property the GPU graph capture depends on: the same sequence of requests gives the same addresses.
TEST(Arena, SameShapesGiveSameAddressesOnEveryCall) {
  Arena arena(Device::cpu(), 1 << 20);
  const auto forward = [&] {
    arena.reset();
    std::vector<void*> addresses;
    addresses.push_back(arena.allocate(Shape{2, 64, 64, 4}, DType::kF32, "latent").data);
    const size_t mark = arena.mark();
    addresses.push_back(arena.allocate(Shape{77, 3}, DType::kF16, "scratch").data);
    arena.release(mark);
    addresses.push_back(arena.allocate(Shape{5}, DType::kF32, "out").data);
    return addresses;
  };
  const auto first = forward();
  EXPECT_EQ(forward(), first);
  EXPECT_EQ(first[1], first[2]);  // released scratch is reused
  for (void* p : first) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % Arena::kAlignment, 0u);
  EXPECT_GE(arena.peak(), size_t(2 * 64 * 64 * 4 * 4));
}

TEST(Arena, ExhaustionNamesTheAllocation) {
  Arena arena(Device::cpu(), 4096);
  arena.allocate(Shape{512}, DType::kF32, "first");
  try {
    arena.allocate(Shape{1024}, DType::kF32, "attention scores");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    const std::string what = e.what();
    EXPECT_NE(what.find("attention scores"), std::string::npos) << what;
    EXPECT_NE(what.find("f32[1024]"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace hd
