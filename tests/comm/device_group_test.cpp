// A device list's ranks: the CPU named several times makes an in-process group whose failure ends every
// rank's waits; devices of two kinds, or none, are refused.
#include "comm/device_group.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace hd::comm {
namespace {

TEST(DeviceGroup, TheCpuNamedSeveralTimesIsAnInProcessGroup) {
  const std::vector<Device> cpus(3, Device::cpu());
  DeviceGroup group(cpus);
  ASSERT_EQ(group.size(), 3);
  EXPECT_EQ(group.exchange_name(), "in-process group");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(group.rank(r).rank(), r);
    EXPECT_EQ(group.rank(r).size(), 3);
  }
  group.fail(1, "it broke");
  test::expect_error_containing([&] { group.rank(0).barrier(); }, "it broke");
  test::expect_error_containing([] { DeviceGroup none(std::vector<Device>{}); }, "a group of no devices");
}

}  // namespace
}  // namespace hd::comm
