// The generator against draws that torch 2.11 itself made (tests/fixtures/sampling/torch_randn.safetensors).
#include "sampling/torch_rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "fixture_util.h"

namespace hd {
namespace {

TEST(TorchRng, MatchesTorchRandnForEverySeedAndShape) {
  const test::Fixture fixture("sampling/torch_randn.safetensors");
  std::map<std::string, TorchCpuGenerator> generators;  // one per seed, drawn in the recorded order
  int64_t compared = 0, bit_exact = 0;
  for (const auto& c : fixture.cases()) {
    const std::string name = c["name"];
    const std::string seed = c["seed"];
    auto it = generators.try_emplace(seed, std::stoull(seed)).first;
    const std::vector<float> expected = fixture.floats(name);
    std::vector<float> got(expected.size());
    it->second.randn(got.data(), int64_t(got.size()));
    for (size_t i = 0; i < got.size(); ++i) {
      // Box-Muller in float through libm: the two builds' logf/sinf/cosf may differ in the last bit.
      ASSERT_NEAR(got[i], expected[i], 4e-6 * std::max(1.0f, std::abs(expected[i]))) << name << " element " << i;
      bit_exact += got[i] == expected[i];
      ++compared;
    }
  }
  EXPECT_EQ(compared, 893);  // every recorded draw was compared
  std::printf("%lld of %lld values bit-identical to torch\n", static_cast<long long>(bit_exact),
              static_cast<long long>(compared));
}

TEST(TorchRng, UniformsUseTheDocumentedBitCounts) {
  TorchCpuGenerator a(5), b(5);
  const uint32_t raw = a.random();
  EXPECT_EQ(b.uniform_float(), float(raw & 0xffffffu) / 16777216.0f);
  TorchCpuGenerator c(5);
  const double u = c.uniform_double();
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

}  // namespace
}  // namespace hd
