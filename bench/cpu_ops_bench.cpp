// CPU timings of two SD1.5-sized ops, the baseline later backends are compared with:
//   conv2d 3x3, 320 -> 320 channels on a batch-2 64x64 latent (the UNet's first-level ResNet conv);
//   linear 320 -> 2560 on 2 x 4096 tokens (the first level's GEGLU projection).
// Median of repeated runs after a warm-up. Usage: hd_bench_cpu_ops [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "ops/ops.h"

namespace {

hd::OwnedTensor random_tensor(hd::Shape shape, std::mt19937& rng) {
  hd::OwnedTensor t(shape, hd::DType::kF32);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < t.view().numel(); ++i) t.ptr<float>()[i] = dist(rng);
  return t;
}

double median_ms(int repeats, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, BLAS thread start-up
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::mt19937 rng(1234);
  std::printf("hardware threads: %u, repeats: %d (median reported)\n", std::thread::hardware_concurrency(), repeats);

  const auto x = random_tensor({2, 64, 64, 320}, rng);
  const auto w = random_tensor({320, 3, 3, 320}, rng);
  const auto b = random_tensor({320}, rng);
  hd::OwnedTensor y({2, 64, 64, 320}, hd::DType::kF32);
  const double conv_ms = median_ms(repeats, [&] { hd::ops::conv2d(x, w, &b.view(), nullptr, {1, 1}, y); });
  const double conv_flop = 2.0 * 2 * 64 * 64 * 320 * (9.0 * 320);
  std::printf("conv2d 3x3 [2,64,64,320] -> 320   %9.1f ms  %6.1f GFLOP/s\n", conv_ms, conv_flop / conv_ms / 1e6);

  const auto tokens = random_tensor({2, 4096, 320}, rng);
  const auto proj = random_tensor({2560, 320}, rng);
  const auto proj_b = random_tensor({2560}, rng);
  hd::OwnedTensor out({2, 4096, 2560}, hd::DType::kF32);
  const double gemm_ms = median_ms(repeats, [&] { hd::ops::linear(tokens, proj, &proj_b.view(), out); });
  const double gemm_flop = 2.0 * 8192 * 320 * 2560;
  std::printf("linear [8192,320] x [320,2560]      %9.1f ms  %6.1f GFLOP/s\n", gemm_ms, gemm_flop / gemm_ms / 1e6);
  return 0;
}
