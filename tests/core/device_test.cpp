#include "core/device.h"

#include <gtest/gtest.h>

#include "core/buffer.h"
#include "core/error.h"

namespace hd {
namespace {

TEST(Device, ParsesEveryForm) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), (Device{DeviceType::kCuda, 0}));
  EXPECT_EQ(Device::parse("cuda:3"), (Device{DeviceType::kCuda, 3}));
  EXPECT_EQ(Device::parse("hip:1"), (Device{DeviceType::kHip, 1}));
  EXPECT_EQ(Device::parse("hip:1").to_string(), "hip:1");
}

TEST(Device, RejectsMalformedNames) {
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999", "CPU", "cpu:0", "hip:a", "cuda:0:1"}) {
    EXPECT_THROW(Device::parse(bad), Error) << bad;
  }
  try {
    Device::parse("rocm:0");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected cpu, cuda:N or hip:N"), std::string::npos);
  }
}

TEST(Device, GpuAllocationWithoutGpuSupportIsAClearError) {
  // The CPU test binary links no GPU runtime, so no allocator is registered for HIP.
  try {
    Buffer b(Device::parse("hip:0"), 16);
    FAIL() << "allocation succeeded without a HIP runtime";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("cmake --preset hip"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hd
