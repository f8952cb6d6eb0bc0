// Time of one SD1.5 UNet step at 512x512 (64x64 latent), batch 2 as classifier-free guidance runs it,
// on the CPU (f32) or a GPU (f16 or bf16), on random weights (speed does not depend on their values). The
// weights are written once (src/pipeline/random_model.h), in diffusers' names and f16 as real
// checkpoints are, and loaded through the same path a real model takes.
// Usage: hd_bench_unet_step [repeats] [latent_size] [device: cpu|cuda:N|hip:N] [dtype: f16|bf16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/model_source.h"
#include "models/unet.h"
#include "models/unet_graphs.h"
#include "ops/ops.h"
#include "ops/placement.h"
#include "pipeline/random_model.h"

namespace {

constexpr const char* kUsage =
    "usage: hd_bench_unet_step [repeats (3)] [latent size, a multiple of 8 (64)] [cpu|cuda:N|hip:N] [f16|bf16]\n";

// A positional count, whole and positive, or an error naming it.
int64_t count_argument(const char* text, const char* what) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  HD_CHECK(end != text && *end == '\0' && value > 0 && value <= 100000, what, " must be a positive whole number, got '",
           text, "'");
  return value;
}

int run(int argc, char** argv) {
  const int repeats = argc > 1 ? int(count_argument(argv[1], "repeats")) : 3;
  const int64_t latent = argc > 2 ? count_argument(argv[2], "the latent size") : 64;
  HD_CHECK(latent % 8 == 0, "the latent size must be a multiple of 8 (the UNet halves it three times), got ", latent);
  hd::ops::Placement placement{hd::Device::parse(argc > 3 ? argv[3] : "cpu"), hd::DType::kF32};
  if (placement.device.is_gpu()) placement.dtype = argc > 4 ? hd::parse_dtype(argv[4]) : hd::DType::kF16;
  placement.validate();
  hd::ops::prepare_device(placement.device);
  // The random SD1.5 model `hipdiffusion bench --arch sd15` writes (and reuses): diffusers' names and
  // shapes, f16.
  const hd::RandomModelSpec spec{hd::RandomModelArch::kSD15};
  const std::string dir = hd::random_model_folder(spec);
  std::printf("random SD1.5 weights (%.1f M parameters, whole model) in %s\n",
              double(hd::write_random_model(spec, dir)) / 1e6, dir.c_str());
  const hd::ModelSource model = hd::ModelSource::open(dir);
  const auto load_start = std::chrono::steady_clock::now();
  const hd::Unet unet = hd::Unet::load(*model.component("unet"), placement);
  std::printf("load: %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  hd::OwnedTensor sample(hd::Shape{2, latent, latent, 4}, hd::DType::kF32), context(hd::Shape{2, 77, 768}, hd::DType::kF32);
  for (int64_t i = 0; i < sample.view().numel(); ++i) sample.ptr<float>()[i] = normal(rng);
  for (int64_t i = 0; i < context.view().numel(); ++i) context.ptr<float>()[i] = normal(rng);
  const hd::OwnedTensor placed_sample = hd::ops::place(sample, placement), placed_context = hd::ops::place(context, placement);
  // Plain forwards (one launch per op), then on a GPU the captured graph the pipeline replays.
  hd::UnetGraphs graphs;
  for (const bool replay : {false, true}) {
    if (replay && placement.device.is_cpu()) break;
    std::vector<double> seconds;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      // Reading the result back waits for the GPU: the time is the whole step (its 128 KB copy included).
      const hd::OwnedTensor out = hd::ops::to_host_f32(replay ? graphs.forward(unet, placed_sample, 500.0f, placed_context)
                                                              : unet.forward(placed_sample, 500.0f, placed_context));
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      std::printf("%s step %d: %.2f ms%s\n", replay ? "graph" : "plain", r + 1, 1e3 * seconds.back(),
                  r == 0 ? (replay ? " (first: one plain forward)" : " (first: includes autotuning)")
                         : (replay && r == 1 ? " (second: capture + replay)" : ""));
    }
    const size_t skip = std::min<size_t>(replay ? 2 : 1, seconds.size() - 1);
    std::sort(seconds.begin() + long(skip), seconds.end());
    const double median = seconds[skip + (seconds.size() - skip) / 2];
    std::printf("SD1.5 UNet step, batch 2, %lldx%lld latent, %s, %s: median %.2f ms over %d runs (first %zu excluded)\n",
                (long long)latent, (long long)latent, placement.to_string().c_str(),
                replay ? "captured graph" : "one launch per op", 1e3 * median, repeats, skip);
  }
  if (placement.device.is_gpu())
    std::printf("peak GPU memory held by activations and weights: %.2f GiB\n",
                double(hd::ops::peak_device_memory(placement.device)) / double(1 << 30));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc > 5) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  try {
    return run(argc, argv);
  } catch (const hd::Error& e) {
    std::fprintf(stderr, "hd_bench_unet_step: error: %s\n%s", e.what(), kUsage);
    return 1;
  }
}
