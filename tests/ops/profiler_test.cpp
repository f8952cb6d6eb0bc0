// The op profiler: off, nothing is recorded; on, each op's calls and time add up under its name, an op
// inside another counts only in the outer one, and turning it on again starts from zero.
#include "ops/profiler.h"

#include <gtest/gtest.h>

#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(Profiler, CountsOutermostOpsOnlyWhileOn) {
  test::Rng rng;
  const OwnedTensor x = test::random_tensor(rng, Shape{64, 64});
  OwnedTensor y(Shape{64, 64}, DType::kF32);
  ops::set_profiling(false);
  ops::silu(x, y);
  EXPECT_TRUE(ops::profile_totals().empty());

  ops::set_profiling(true);
  for (int i = 0; i < 3; ++i) ops::silu(x, y);
  {
    const ops::OpScope outer("outer", Device::cpu());
    ops::scale(x, 2.0f, y);  // inside "outer": not counted on its own
  }
  const std::vector<ops::OpTotal> totals = ops::profile_totals();
  ops::set_profiling(false);
  ASSERT_EQ(totals.size(), 2u);
  for (const ops::OpTotal& t : totals) {
    EXPECT_GE(t.ms, 0.0);
    EXPECT_TRUE(t.op == "silu" || t.op == "outer") << t.op;
    EXPECT_EQ(t.calls, t.op == "silu" ? 3 : 1) << t.op;
  }
  ops::set_profiling(true);
  EXPECT_TRUE(ops::profile_totals().empty());
  ops::set_profiling(false);
}

}  // namespace
}  // namespace hd
