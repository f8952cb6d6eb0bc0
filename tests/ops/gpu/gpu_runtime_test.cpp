// The GPU runtime: discovery, allocation through core's Buffer, copies, out-of-memory reporting.
#include "ops/gpu/gpu_runtime.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "test_util.h"

namespace hd {
namespace {

Device gpu0() { return Device{gpu::build_device_type(), 0}; }

class GpuRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu::initialize();
    ASSERT_GT(gpu::device_count(), 0) << "no GPU visible: the gpu tests need one";
  }
};

// The names HIP reports (gcnArchName, with feature suffixes) pick the fragment layout the kernels use.
TEST(GpuMatrixUnit, AmdArchitectureNamesPickTheirFamily) {
  using gpu::MatrixUnit;
  EXPECT_EQ(gpu::amd_matrix_unit("gfx90a:sramecc+:xnack-"), MatrixUnit::kAmdMfma);
  EXPECT_EQ(gpu::amd_matrix_unit("gfx942:sramecc+:xnack-"), MatrixUnit::kAmdMfma);
  EXPECT_EQ(gpu::amd_matrix_unit("gfx1100"), MatrixUnit::kAmdWmma11);
  EXPECT_EQ(gpu::amd_matrix_unit("gfx1101"), MatrixUnit::kAmdWmma11);
  EXPECT_EQ(gpu::amd_matrix_unit("gfx1200"), MatrixUnit::kAmdWmma12);
  EXPECT_EQ(gpu::amd_matrix_unit("gfx1201"), MatrixUnit::kAmdWmma12);
  EXPECT_EQ(gpu::amd_matrix_unit("gfx1030"), MatrixUnit::kNone);
  EXPECT_EQ(gpu::amd_matrix_unit("gfx908"), MatrixUnit::kNone);
  EXPECT_EQ(gpu::amd_matrix_unit(""), MatrixUnit::kNone);
}

TEST_F(GpuRuntime, RoundTripThroughDeviceMemory) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  std::printf("device 0: %s\n", gpu::device_name(0).c_str());
  const auto host = test::random_tensor(rng, Shape{3, 1000});
  OwnedTensor device(Shape{3, 1000}, DType::kF32, gpu0());
  OwnedTensor device2(Shape{3, 1000}, DType::kF32, gpu0());
  auto back = test::poisoned_tensor(Shape{3, 1000});
  gpu::copy(host, device);
  gpu::copy(device, device2);
  gpu::copy(device2, back);
  EXPECT_EQ(std::memcmp(host.view().data, back.view().data, host.view().nbytes()), 0);
}

TEST_F(GpuRuntime, ImpossibleAllocationIsAClearOutOfMemoryError) {
  try {
    Buffer b(gpu0(), size_t(1) << 50);  // 1 PiB
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  // The failed allocation leaves the device usable.
  OwnedTensor ok(Shape{16}, DType::kF32, gpu0());
  EXPECT_NE(ok.view().data, nullptr);
}

// Pinned host memory: a host buffer that copies to and from the device read and write, kept when freed
// and handed to the next request it is large enough for.
TEST_F(GpuRuntime, PinnedHostMemoryRoundTripsAndIsReused) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto values = test::random_tensor(rng, Shape{5, 999});
  void* first = nullptr;
  {
    const Buffer pinned = Buffer::pinned_host(gpu0(), values.view().nbytes());
    EXPECT_TRUE(pinned.device().is_cpu());
    first = pinned.data();
    const Tensor host = Tensor::contiguous(pinned.data(), DType::kF32, Shape{5, 999});
    std::memcpy(host.data, values.view().data, host.nbytes());
    OwnedTensor device(host.shape, DType::kF32, gpu0());
    gpu::copy(host, device);
    std::memset(host.data, 0xff, host.nbytes());
    gpu::copy(device, host);
    EXPECT_EQ(std::memcmp(host.data, values.view().data, host.nbytes()), 0);
  }
  const Buffer again = Buffer::pinned_host(gpu0(), 1000);
  EXPECT_EQ(again.data(), first);
  // On the CPU, ordinary host memory.
  const Buffer plain = Buffer::pinned_host(Device::cpu(), 64);
  EXPECT_NE(plain.data(), nullptr);
}

TEST_F(GpuRuntime, MismatchedCopiesAreErrors) {
  OwnedTensor a(Shape{4}, DType::kF32), b(Shape{5}, DType::kF32, gpu0());
  EXPECT_THROW(gpu::copy(a, b), Error);
}

}  // namespace
}  // namespace hd
