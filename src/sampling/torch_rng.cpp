#include "sampling/torch_rng.h"

#include <cmath>
#include <numbers>

namespace hd {

TorchCpuGenerator::TorchCpuGenerator(uint64_t seed) : engine_(uint32_t(seed & 0xffffffffu)) {}

uint64_t TorchCpuGenerator::random64() {
  const uint64_t hi = random();
  const uint64_t lo = random();
  return (hi << 32) | lo;
}

float TorchCpuGenerator::uniform_float() {
  return float(random() & ((1u << 24) - 1)) * (1.0f / float(1u << 24));
}

double TorchCpuGenerator::uniform_double() {
  return double(random64() & ((uint64_t(1) << 53) - 1)) * (1.0 / double(uint64_t(1) << 53));
}

double TorchCpuGenerator::normal_double() {
  if (next_double_normal_) {
    const double cached = *next_double_normal_;
    next_double_normal_.reset();
    return cached;
  }
  const double u1 = uniform_double();
  const double u2 = uniform_double();
  const double r = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  next_double_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

namespace {

// Box-Muller over 16 uniforms in place, in float, in torch's order.
void normal_fill_16(float* data) {
  constexpr float kTwoPi = float(2.0 * std::numbers::pi);
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j];  // [0, 1) -> (0, 1] for the log
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * std::log(u1));
    const float theta = kTwoPi * u2;
    data[j] = radius * std::cos(theta);
    data[j + 8] = radius * std::sin(theta);
  }
}

}  // namespace

void TorchCpuGenerator::randn(float* out, int64_t count) {
  if (count < 16) {
    for (int64_t i = 0; i < count; ++i) out[i] = float(normal_double());
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = uniform_float();
  for (int64_t i = 0; i + 16 <= count; i += 16) normal_fill_16(out + i);
  if (count % 16 != 0) {
    float* tail = out + count - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform_float();
    normal_fill_16(tail);
  }
}

}  // namespace hd
