// Placement (device + dtype) rules and the host-side moves between f32 host data and a placement.
#include "ops/placement.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fixture_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(Placement, TheCpuComputesInF32AndAGpuIn16Bits) {
  EXPECT_NO_THROW((ops::Placement{Device::cpu(), DType::kF32}.validate()));
  EXPECT_THROW((ops::Placement{Device::cpu(), DType::kF16}.validate()), Error);
  EXPECT_THROW((ops::Placement{Device::parse("cuda:0"), DType::kF32}.validate()), Error);
  EXPECT_NO_THROW((ops::Placement{Device::parse("cuda:0"), DType::kBF16}.validate()));
  EXPECT_EQ((ops::Placement{Device::parse("hip:1"), DType::kF16}.to_string()), "hip:1 f16");
}

TEST(Placement, PlaceAndBackOnTheHostIsAnExactCopy) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto x = test::random_tensor(rng, Shape{3, 5});
  const OwnedTensor placed = ops::place(x, ops::Placement{});
  EXPECT_NE(placed.view().data, x.view().data);  // a copy, not a view
  EXPECT_EQ(test::relative_l2(ops::to_host_f32(placed), test::as_reference(x)), 0.0);
}

TEST(Placement, CopyMovesBytesAndRefusesMismatches) {
  OwnedTensor a(Shape{4}, DType::kF32), b(Shape{4}, DType::kF32), c(Shape{5}, DType::kF32);
  for (int i = 0; i < 4; ++i) a.ptr<float>()[i] = float(i) + 0.5f;
  ops::copy(a, b);
  EXPECT_EQ(b.ptr<float>()[3], 3.5f);
  EXPECT_THROW(ops::copy(a, c), Error);
}

#if !defined(HD_WITH_GPU)
TEST(Placement, AGpuInABuildWithoutGpuKernelsIsAClearError) {
  try {
    ops::prepare_device(Device::parse("cuda:0"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU kernels"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ops::prepare_device(Device::cpu()));
}
#endif

}  // namespace
}  // namespace hd
