// Reproduces PyTorch's CPU random number generator, so that `--seed N` gives the same noise as
// `torch.randn(shape, generator=torch.Generator("cpu").manual_seed(N))` and so the same images as
// diffusers (and as its users' published seeds).
//
// torch's CPU generator is a 32-bit Mersenne Twister seeded with the low 32 bits of the seed.
// torch.randn of a float32 tensor with at least 16 elements draws one 24-bit uniform per element, then
// turns each group of 16 into normals by Box-Muller (first 8 from cosines, last 8 from sines); when the
// count is not a multiple of 16, the last 16 elements are drawn again and recomputed. Smaller tensors
// take a scalar path of 53-bit uniforms in double, which caches the second Box-Muller value in the
// generator for the next call. Both are matched here, in that order of draws.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

namespace hd {

class TorchCpuGenerator {
 public:
  explicit TorchCpuGenerator(uint64_t seed);

  uint32_t random() { return uint32_t(engine_()); }
  uint64_t random64();
  float uniform_float();    // [0, 1) from 24 bits, as at::uniform_real_distribution<float>
  double uniform_double();  // [0, 1) from 53 bits, as at::uniform_real_distribution<double>

  // Fills out[0, count) exactly as torch.randn(count, dtype=float32) would, continuing this generator.
  void randn(float* out, int64_t count);

 private:
  double normal_double();  // at::normal_distribution<double>, with its cached second sample

  std::mt19937 engine_;  // the standard MT19937 is bit-identical to at::mt19937
  std::optional<double> next_double_normal_;
};

}  // namespace hd
