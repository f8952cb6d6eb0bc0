// The GPU convert kernel against the CPU conversion, bit for bit, on fresh random data.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

Device gpu0() { return Device{gpu::build_device_type(), 0}; }

// Random floats over every magnitude: subnormals, halfway cases, overflow, infinities and NaN.
OwnedTensor random_any_float(test::Rng& rng, int64_t n) {
  OwnedTensor t(Shape{n}, DType::kF32);
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0: p[i] = std::bit_cast<float>(uint32_t(rng.engine()())); break;
      case 1: p[i] = std::ldexp(rng.uniform(-1.0f, 1.0f), int(rng.integer(-27, 17))); break;
      case 2: p[i] = rng.normal(0.0f, 10.0f); break;
      default: {  // exact ties of the f16 and bf16 roundings
        const uint32_t base = uint32_t(rng.engine()()) & 0xbfffe000u;
        p[i] = std::bit_cast<float>(base | (i % 8 == 3 ? 0x1000u : 0x8000u));
      }
    }
  }
  p[0] = std::numeric_limits<float>::infinity();
  p[4] = std::numeric_limits<float>::quiet_NaN();
  return t;
}

TEST(GpuConvert, BitIdenticalToCpu) {
  gpu::initialize();
  ASSERT_GT(gpu::device_count(), 0);
  test::Rng rng;
  HD_SEED_TRACE(rng);
  // A multiple of 8 takes the 16-byte vector kernel from f32, 3 fewer the element kernel.
  for (const int64_t n : {int64_t(1) << 20, (int64_t(1) << 20) - 3}) {
    const auto host = random_any_float(rng, n);
    OwnedTensor dev_f32(Shape{n}, DType::kF32, gpu0());
    gpu::copy(host, dev_f32);
    for (DType narrow : {DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(narrow)) + ", " + std::to_string(n) + " elements");
      OwnedTensor dev_narrow(Shape{n}, narrow, gpu0()), cpu_narrow(Shape{n}, narrow), got(Shape{n}, narrow);
      std::memset(got.view().data, 0xff, got.view().nbytes());  // poison
      ops::convert(dev_f32, dev_narrow);
      gpu::copy(dev_narrow, got);
      ops::convert(host, cpu_narrow);
      const auto* a = static_cast<const uint16_t*>(got.view().data);
      const auto* b = static_cast<const uint16_t*>(cpu_narrow.view().data);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i) mismatches += a[i] != b[i];
      EXPECT_EQ(mismatches, 0);

      // And back to f32: exact.
      OwnedTensor dev_wide(Shape{n}, DType::kF32, gpu0());
      auto wide = test::poisoned_tensor(Shape{n});
      OwnedTensor cpu_wide(Shape{n}, DType::kF32);
      ops::convert(dev_narrow, dev_wide);
      gpu::copy(dev_wide, wide);
      ops::convert(cpu_narrow, cpu_wide);
      const auto* w = static_cast<const uint32_t*>(wide.view().data);
      const auto* c = static_cast<const uint32_t*>(cpu_wide.view().data);
      int64_t wide_mismatches = 0, first = -1;
      for (int64_t i = 0; i < n; ++i) {
        if (w[i] != c[i] && first < 0) first = i;
        wide_mismatches += w[i] != c[i];
      }
      EXPECT_EQ(wide_mismatches, 0) << "first at " << first << ": gpu 0x" << std::hex
                                    << (first >= 0 ? w[first] : 0) << " cpu 0x"
                                    << (first >= 0 ? c[first] : 0);
    }
  }
}

// Three f32 tensors stored one after another, narrowed into three tensors in one launch (the attention
// gradient's sums): each bit for bit the CPU's conversion of its own third.
TEST(GpuConvert, StackedSumsNarrowIntoEachTensor) {
  gpu::initialize();
  ASSERT_GT(gpu::device_count(), 0);
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t count = 3 * 4096 + 8;
  const auto host = random_any_float(rng, 3 * count);
  OwnedTensor dev_f32(Shape{3 * count}, DType::kF32, gpu0());
  gpu::copy(host, dev_f32);
  for (DType narrow : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(dtype_name(narrow)));
    std::array<OwnedTensor, 3> outs{OwnedTensor(Shape{count}, narrow, gpu0()),
                                    OwnedTensor(Shape{count}, narrow, gpu0()),
                                    OwnedTensor(Shape{count}, narrow, gpu0())};
    gpu::narrow_stacked(dev_f32.ptr<float>(), count, {&outs[0].view(), &outs[1].view(), &outs[2].view()});
    for (int i = 0; i < 3; ++i) {
      OwnedTensor third(Shape{count}, DType::kF32), cpu_narrow(Shape{count}, narrow),
          got(Shape{count}, narrow);
      std::memcpy(third.view().data, host.ptr<float>() + i * count, size_t(count) * sizeof(float));
      ops::convert(third, cpu_narrow);
      gpu::copy(outs[i], got);
      const auto* a = static_cast<const uint16_t*>(got.view().data);
      const auto* b = static_cast<const uint16_t*>(cpu_narrow.view().data);
      int64_t mismatches = 0;
      for (int64_t e = 0; e < count; ++e) mismatches += a[e] != b[e];
      EXPECT_EQ(mismatches, 0) << "tensor " << i;
    }
  }
  // What it does not take is refused: a count off the 8-element vectors.
  OwnedTensor odd(Shape{count - 4}, DType::kF16, gpu0());
  EXPECT_THROW(gpu::narrow_stacked(dev_f32.ptr<float>(), count - 4, {&odd.view()}), Error);
}

}  // namespace
}  // namespace hd
