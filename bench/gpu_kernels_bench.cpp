// GPU timings of hipDiffusion's kernels on Stable Diffusion's shapes, with the device's copy bandwidth
// measured in the same run as the ceiling for the memory-bound ones. bench/torch_peers.py times
// PyTorch's kernels on the same shapes; run both in one session on one GPU (BENCHMARKS.md).
// Each figure: the median over 7 batches of launches (each batch long enough to hide launch gaps),
// after a warm-up. Usage: hd_bench_gpu_kernels [--every-tile] [--only SECTION] [--case TEXT]
// (--every-tile: each of our tile shapes timed under each convolution and product, not only the best;
// --only: attention, backward, norm, matrix, geglu, upsample, materialised or layer_norm; --case: only the
// convolutions, products, attention gradients and GroupNorm shapes whose name holds TEXT, "GEMM 8192^3"
// and "[1, 1024, 1024, 128]" among them, so that a profiler sees one problem's kernels)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/group_norm_resident.h"
#include "ops/ops.h"

namespace {

hd::Device gpu0() { return hd::Device{hd::gpu::build_device_type(), 0}; }

hd::OwnedTensor random_gpu(hd::Shape shape, hd::DType dtype, std::mt19937& rng, float mean = 0.f) {
  hd::OwnedTensor host(shape, hd::DType::kF32), narrow(shape, dtype), dev(shape, dtype, gpu0());
  std::normal_distribution<float> dist(mean, 1.0f);
  for (int64_t i = 0; i < host.view().numel(); ++i) host.ptr<float>()[i] = dist(rng);
  hd::ops::convert(host, narrow);
  hd::gpu::copy(narrow, dev);
  return dev;
}

double median_ms(const std::function<void()>& fn) {
  const hd::Device dev = gpu0();
  fn();
  hd::gpu::synchronize(dev);
  // Launches per batch: enough for about 20 ms.
  auto t0 = std::chrono::steady_clock::now();
  fn();
  hd::gpu::synchronize(dev);
  const double once = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int reps = std::clamp(int(20.0 / std::max(once, 1e-3)), 3, 2000);
  std::vector<double> ms;
  for (int b = 0; b < 7; ++b) {
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    hd::gpu::synchronize(dev);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(ms.begin(), ms.end());
  return ms[3];
}

// A candidate's median time, or -1 where it cannot run this problem: cuDNN's graph engines are offered by
// rank without asking its heuristics, and a rank past what they return for a shape refuses.
double candidate_ms(const hd::gpu::GemmProblem& g, const std::string& candidate) {
  try {
    return median_ms([&] { hd::gpu::gemm_with(g, candidate); });
  } catch (const hd::Error& e) {
    if (e.kind() != hd::ErrorKind::kUnsupported) throw;
    return -1.0;
  }
}

// GPU time per call without the host's launch cost: `calls` calls captured into one graph, the replay
// timed as above. This is how the ops run inside the UNet's captured graph.
double replay_ms(const std::function<void()>& fn, int calls = 50) {
  const hd::Device dev = gpu0();
  fn();  // tunes, and grows any scratch memory, outside the capture
  hd::gpu::synchronize(dev);
  const hd::gpu::CapturedGraph graph = hd::gpu::CapturedGraph::capture(dev, [&] {
    for (int i = 0; i < calls; ++i) fn();
  });
  return median_ms([&] { graph.replay(); }) / calls;
}

// A fused problem's candidates timed against its `unfused` one (GEGLU in the epilogue, an upsampler's
// phases): the fastest other candidate, and every one that ran.
struct AgainstUnfused {
  std::string best;
  double best_ms = -1, unfused_ms = -1;
  std::vector<std::pair<std::string, double>> tiles;
};

AgainstUnfused time_against_unfused(const hd::gpu::GemmProblem& g) {
  AgainstUnfused r;
  for (const std::string& candidate : hd::gpu::gemm_candidates(g)) {
    const double ms = candidate_ms(g, candidate);
    if (ms < 0) continue;
    if (candidate == "unfused") {
      r.unfused_ms = ms;
      continue;
    }
    r.tiles.emplace_back(candidate, ms);
    if (r.best_ms < 0 || ms < r.best_ms) r.best_ms = ms, r.best = candidate;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool every_tile = false;
  std::string only;  // one section, or all of them
  std::string only_case;  // --case: only the products whose name holds this (for a profiler's run)
  const std::vector<std::string> sections{"attention", "backward", "norm",         "matrix",
                                          "geglu",     "upsample", "materialised", "layer_norm"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--every-tile") {
      every_tile = true;
    } else if (arg == "--only" && i + 1 < argc &&
               std::count(sections.begin(), sections.end(), argv[i + 1]) == 1) {
      only = argv[++i];
    } else if (arg == "--case" && i + 1 < argc) {
      only_case = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: hd_bench_gpu_kernels [--every-tile] [--only "
                   "attention|backward|norm|matrix|geglu|upsample|materialised|layer_norm] [--case TEXT]\n");
      return 2;
    }
  }
  const auto wanted = [&](const char* section) { return only.empty() || only == section; };
  const auto case_wanted = [&](const char* name) { return std::string(name).find(only_case) != std::string::npos; };
  hd::gpu::initialize();
  std::printf("device: %s\n", hd::gpu::device_name(0).c_str());
  std::mt19937 rng(1234);

  // Ceiling: device-to-device copy of 1 GiB, bytes read + written.
  const int64_t n = int64_t(1) << 29;
  hd::OwnedTensor a(hd::Shape{n}, hd::DType::kF16, gpu0()), b(hd::Shape{n}, hd::DType::kF16, gpu0());
  const double copy_ms = median_ms([&] { hd::gpu::copy(a, b); });
  const double copy_gbs = 2.0 * double(n) * 2 / (copy_ms * 1e6);
  std::printf("copy 1 GiB: %.3f ms, %.0f GB/s (read + write)\n", copy_ms, copy_gbs);

  if (wanted("attention")) {
    // The tuned path (Hopper's warpgroup kernel on an H100/H200) beside the fragment-layer kernel (what
    // NVIDIA GPUs before Hopper run) on the same data.
    std::printf(
        "\nattention (f16, flash forward)       ms     TFLOP/s  fragment layer ms  TFLOP/s  bf16 ms\n");
    struct AttentionCase {
      const char* name;
      int batch, heads, lq, lk, head_dim;
    };
    const AttentionCase attention_cases[] = {
        {"SD1.5 64x64 self  B2 H8 L4096 D40", 2, 8, 4096, 4096, 40},
        {"SD1.5 64x64 cross B2 H8 L4096/77 D40", 2, 8, 4096, 77, 40},
        {"SD1.5 32x32 self  B2 H8 L1024 D80", 2, 8, 1024, 1024, 80},
        {"SD1.5 16x16 self  B2 H8 L256 D160", 2, 8, 256, 256, 160},
        {"SDXL 64x64 self   B2 H10 L4096 D64", 2, 10, 4096, 4096, 64},
        {"SDXL 32x32 self   B2 H20 L1024 D64", 2, 20, 1024, 1024, 64},
    };
    for (const auto& c : attention_cases) {
      const auto q = random_gpu({c.batch, c.lq, int64_t(c.heads) * c.head_dim}, hd::DType::kF16, rng);
      const auto k = random_gpu({c.batch, c.lk, int64_t(c.heads) * c.head_dim}, hd::DType::kF16, rng);
      const auto v = random_gpu({c.batch, c.lk, int64_t(c.heads) * c.head_dim}, hd::DType::kF16, rng);
      hd::OwnedTensor out(q.view().shape, hd::DType::kF16, gpu0());
      hd::ops::AttentionParams p;
      p.heads = c.heads;
      const double ms = median_ms([&] { hd::ops::attention(q, k, v, p, out); });
      const double fragments_ms = median_ms(
          [&] { hd::gpu::attention(q, k, v, c.heads, false, 0.f, out, hd::gpu::KernelPath::kFragments); });
      const auto to_bf16 = [&](const hd::OwnedTensor& t) {
        hd::OwnedTensor converted(t.view().shape, hd::DType::kBF16, gpu0());
        hd::gpu::convert(t, converted);
        return converted;
      };
      const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
      hd::OwnedTensor out_bf16(q.view().shape, hd::DType::kBF16, gpu0());
      const double bf16_ms = median_ms([&] { hd::ops::attention(qb, kb, vb, p, out_bf16); });
      const double flop = 4.0 * c.batch * c.heads * double(c.lq) * c.lk * c.head_dim;
      std::printf("%-38s %8.3f %8.1f %18.3f %8.1f %8.3f\n", c.name, ms, flop / (ms * 1e9), fragments_ms,
                  flop / (fragments_ms * 1e9), bf16_ms);
    }
  }

  if (wanted("backward")) {
    // Attention's gradient alone (dQ, dK, dV from dO, Q, K, V and the forward's O), SD1.5's and SDXL's
    // shapes at batch 2 (bench/attention_backward_bench.py times it beside SDPA's backward through
    // PyTorch's autograd). TFLOP/s counts five products (the scores again, dP, dV, dK, dQ: 2.5x the
    // forward's flops, as FlashAttention counts them). "recomputed": the log-sum-exp recomputed from Q and
    // K; "given": read from the forward (what PyTorch's autograd through the extension does); "fragments":
    // given, on the fragment layer's kernel (what GPUs before Hopper run; the same as the tuned one where
    // the device has no warpgroup kernel or the head is wider than it takes).
    std::printf(
        "\nattention backward (f16)                recomputed ms  TFLOP/s  given ms  TFLOP/s  bf16 given "
        "ms  fragments given ms\n");
    struct BackwardCase {
      const char* name;
      int heads, lq, lk, head_dim;
    };
    const BackwardCase backward_cases[] = {
        {"SD1.5 64x64 self  B2 H8 L4096 D40", 8, 4096, 4096, 40},
        {"SD1.5 64x64 cross B2 H8 L4096/77 D40", 8, 4096, 77, 40},
        {"SD1.5 32x32 self  B2 H8 L1024 D80", 8, 1024, 1024, 80},
        {"SD1.5 16x16 self  B2 H8 L256 D160", 8, 256, 256, 160},
        {"SDXL 64x64 self   B2 H10 L4096 D64", 10, 4096, 4096, 64},
        {"SDXL 64x64 cross  B2 H10 L4096/77 D64", 10, 4096, 77, 64},
        {"SDXL 32x32 self   B2 H20 L1024 D64", 20, 1024, 1024, 64},
    };
    for (const auto& c : backward_cases) {
      if (!case_wanted(c.name)) continue;
      double recomputed_ms = 0.0, given_ms[2] = {}, fragments_ms = 0.0;
      for (int typed = 0; typed < 2; ++typed) {
        const hd::DType t = typed == 0 ? hd::DType::kF16 : hd::DType::kBF16;
        const int64_t width = int64_t(c.heads) * c.head_dim;
        const auto q = random_gpu({2, c.lq, width}, t, rng), k = random_gpu({2, c.lk, width}, t, rng);
        const auto v = random_gpu({2, c.lk, width}, t, rng), grad = random_gpu({2, c.lq, width}, t, rng);
        hd::OwnedTensor out(q.view().shape, t, gpu0()), dq(q.view().shape, t, gpu0());
        hd::OwnedTensor dk(k.view().shape, t, gpu0()), dv(v.view().shape, t, gpu0());
        hd::OwnedTensor lse({2, c.heads, c.lq}, hd::DType::kF32, gpu0());
        hd::gpu::attention(q, k, v, c.heads, false, 0.f, out, hd::gpu::KernelPath::kTuned, &lse.view());
        const auto backward = [&](const hd::Tensor* forward_lse, hd::gpu::KernelPath path) {
          return median_ms([&] {
            hd::gpu::attention_backward(grad, q, k, v, out, c.heads, false, 0.f, dq, dk, dv, path,
                                        forward_lse);
          });
        };
        if (typed == 0) recomputed_ms = backward(nullptr, hd::gpu::KernelPath::kTuned);
        given_ms[typed] = backward(&lse.view(), hd::gpu::KernelPath::kTuned);
        if (typed == 0) fragments_ms = backward(&lse.view(), hd::gpu::KernelPath::kFragments);
      }
      const double flop = 10.0 * 2 * c.heads * double(c.lq) * c.lk * c.head_dim;
      std::printf("%-44s %8.3f %8.1f %9.3f %8.1f %14.3f %19.3f\n", c.name, recomputed_ms,
                  flop / (recomputed_ms * 1e9), given_ms[0], flop / (given_ms[0] * 1e9), given_ms[1],
                  fragments_ms);
    }
  }

  // Small tensors (SD's are 1-5 MB) are measured twice: launched one by one (the host's launch cost
  // included) and replayed from a graph; the copy of the same bytes, replayed the same way, is the
  // ceiling at that size.
  if (wanted("norm")) {
    // "graph ms" is what ops::group_norm chooses; then each path forced, replayed: two passes (norm.cu),
    // one kernel and slices (group_norm_resident.cu; "-" where the path does not take the shape).
    std::printf(
        "\ngroup_norm + SiLU (f16, 32 groups)  launched ms  graph ms  GB/s  of copy  same-size copy ms  of "
        "it  two-pass ms  one-kernel ms  slices ms\n");
    // SD1.5's GroupNorm inputs at 8x8 to 32x32 (where the one-kernel path can take them), then the
    // larger levels, SDXL's and the VAE's.
    const hd::Shape norm_shapes[] = {
        {2, 8, 8, 1280},    {2, 8, 8, 2560},    {2, 16, 16, 640},   {2, 16, 16, 1280},   {2, 16, 16, 1920},
        {2, 16, 16, 2560},  {2, 32, 32, 320},   {2, 32, 32, 640},   {2, 32, 32, 960},    {2, 32, 32, 1280},
        {2, 32, 32, 1920},  {2, 64, 64, 320},   {2, 64, 64, 640},   {2, 64, 64, 960},    {2, 128, 128, 320},
        {1, 128, 128, 512}, {1, 256, 256, 512}, {1, 512, 512, 256}, {1, 1024, 1024, 128}};
    for (const auto& s : norm_shapes) {
      if (!case_wanted(s.to_string().c_str())) continue;
      const auto x = random_gpu(s, hd::DType::kF16, rng, 0.5f);
      const auto gamma = random_gpu({s[3]}, hd::DType::kF16, rng, 1.f);
      const auto beta = random_gpu({s[3]}, hd::DType::kF16, rng);
      hd::OwnedTensor out(s, hd::DType::kF16, gpu0());
      const auto norm = [&] { hd::ops::group_norm(x, gamma, beta, 32, 1e-5f, true, out); };
      const double launched = median_ms(norm), replayed = replay_ms(norm);
      const double copy = replay_ms([&] { hd::gpu::copy(x, out); });
      const double gbs = 2.0 * double(x.view().nbytes()) / (replayed * 1e6);
      const auto path_ms = [&](hd::gpu::GroupNormPath path) {
        return replay_ms([&] { hd::gpu::group_norm(x, gamma, beta, 32, 1e-5f, true, out, nullptr, path); });
      };
      const double two_pass = path_ms(hd::gpu::GroupNormPath::kTwoPass);
      std::printf("%-34s %9.4f %9.4f %6.0f %6.0f%% %12.4f %9.0f%% %12.4f", s.to_string().c_str(), launched,
                  replayed, gbs, 100.0 * gbs / copy_gbs, copy, 100.0 * copy / replayed, two_pass);
      const auto forced = [&](bool fits, hd::gpu::GroupNormPath path) {
        if (fits) {
          std::printf(" %13.4f", path_ms(path));
        } else {
          std::printf(" %13s", "-");
        }
      };
      forced(hd::gpu::group_norm_fits_resident(x, gamma, beta, 32, out), hd::gpu::GroupNormPath::kResident);
      forced(hd::gpu::group_norm_fits_slices(x, gamma, beta, 32, out), hd::gpu::GroupNormPath::kSlices);
      std::printf("\n");
    }
  }

  // Ceiling for the matrix kernels: our own GEMM at 8192^3 (bench/torch_peers.py prints cuBLAS's).
  if (wanted("matrix") && case_wanted("GEMM 8192^3")) {
    const auto a = random_gpu({8192, 8192}, hd::DType::kF16, rng),
               b = random_gpu({8192, 8192}, hd::DType::kF16, rng);
    hd::OwnedTensor c({8192, 8192}, hd::DType::kF16, gpu0());
    const hd::gpu::GemmProblem g =
        hd::gpu::dense_gemm(hd::DType::kF16, gpu0(), 8192, 8192, 8192, a.view().data, 8192, b.view().data,
                            8192, c.view().data, 8192);
    std::printf("\nGEMM 8192^3 f16 (the matrix ceiling of this run)\n");
    for (const std::string& candidate : hd::gpu::gemm_candidates(g)) {
      const double ms = candidate_ms(g, candidate);
      if (ms < 0) continue;
      std::printf("  %-12s %8.3f ms %6.0f TFLOP/s\n", candidate.c_str(), ms,
                  2.0 * 8192.0 * 8192.0 * 8192.0 / (ms * 1e9));
    }
  }

  // Each convolution / product through every candidate the autotuner chooses from: the best of our own
  // tile shapes (the kernel AMD runs too), and NVIDIA's libraries where they take the shape: cuDNN's
  // legacy API or cuBLASLt, and cuDNN's graph API (the best of its engines, bias fused).
  const auto report = [&](const char* name, const hd::gpu::GemmProblem& g, double flop) {
    if (!case_wanted(name)) return;
    double own_ms = 0, library_ms = -1, graph_ms = -1;
    std::string own, graph;
    std::vector<std::pair<std::string, double>> own_tiles;
    for (const std::string& candidate : hd::gpu::gemm_candidates(g)) {
      const double ms = candidate_ms(g, candidate);
      if (ms < 0) continue;
      if (candidate == "cudnn" || candidate == "cublaslt") {
        library_ms = ms;
      } else if (candidate.rfind("cudnn-graph-", 0) == 0) {
        if (graph_ms < 0 || ms < graph_ms) graph_ms = ms, graph = candidate;
      } else {
        own_tiles.emplace_back(candidate, ms);
        if (own.empty() || ms < own_ms) own_ms = ms, own = candidate;
      }
    }
    const auto column = [&](double ms) {
      if (ms > 0) {
        std::printf(" %8.3f %7.1f", ms, flop / (ms * 1e9));
      } else {
        std::printf(" %8s %7s", "-", "-");
      }
    };
    std::printf("%-40s %8.3f %7.1f  %-20s", name, own_ms, flop / (own_ms * 1e9), own.c_str());
    column(library_ms);
    const bool convolution = g.height > 1 || g.kh > 1;  // dense products have no graph-API column
    if (convolution) {
      column(graph_ms);
      std::printf("  %s", graph.c_str());
    }
    std::printf("\n");
    if (every_tile)
      for (const auto& [tile, ms] : own_tiles) std::printf("    %-36s %8.3f %7.1f\n", tile.c_str(), ms, flop / (ms * 1e9));
  };

  if (wanted("matrix")) {
    std::printf(
        "\nconv2d (f16, NHWC, bias)                 ours ms  TFLOP/s  best own tile        "
        "cuDNN legacy ms TFLOP/s  cuDNN graph ms TFLOP/s  engine\n");
    struct ConvCase {
      const char* name;
      hd::Shape x;
      int64_t cout, k;
      int stride;
    };
    const ConvCase conv_cases[] = {
        {"UNet 64x64 320->320 3x3 B2", {2, 64, 64, 320}, 320, 3, 1},
        {"UNet 32x32 640->640 3x3 B2", {2, 32, 32, 640}, 640, 3, 1},
        {"UNet 16x16 1280->1280 3x3 B2", {2, 16, 16, 1280}, 1280, 3, 1},
        {"UNet 8x8 1280->1280 3x3 B2", {2, 8, 8, 1280}, 1280, 3, 1},
        {"UNet up 64x64 640->320 3x3 B2", {2, 64, 64, 640}, 320, 3, 1},
        {"UNet down 64x64 320 3x3 s2 B2", {2, 64, 64, 320}, 320, 3, 2},
        {"UNet shortcut 64x64 640->320 1x1 B2", {2, 64, 64, 640}, 320, 1, 1},
        {"UNet up 32x32 960->640 3x3 B2", {2, 32, 32, 960}, 640, 3, 1},
        {"UNet up 32x32 1920->640 3x3 B2", {2, 32, 32, 1920}, 640, 3, 1},
        {"UNet up 16x16 2560->1280 3x3 B2", {2, 16, 16, 2560}, 1280, 3, 1},
        {"VAE 128x128 512->512 3x3", {1, 128, 128, 512}, 512, 3, 1},
        {"VAE 512x512 256->256 3x3", {1, 512, 512, 256}, 256, 3, 1},
    };
    for (const auto& c : conv_cases) {
      const auto x = random_gpu(c.x, hd::DType::kF16, rng);
      const auto w = random_gpu({c.cout, c.k, c.k, c.x[3]}, hd::DType::kF16, rng);
      const auto bias = random_gpu({c.cout}, hd::DType::kF16, rng);
      const hd::ops::Conv2dParams p{c.stride, int(c.k / 2), 0};
      hd::OwnedTensor out(hd::ops::conv2d_output_shape(c.x, w.view().shape, p), hd::DType::kF16, gpu0());
      report(c.name, hd::gpu::conv_gemm(x, w, &bias.view(), nullptr, p, out),
             2.0 * double(out.view().numel()) * double(c.k * c.k * c.x[3]));
    }

    std::printf(
        "\nlinear (f16, bias)                       ours ms  TFLOP/s  best own tile        cuBLASLt ms "
        "TFLOP/s\n");
    struct LinearCase {
      const char* name;
      int64_t m, n, k;
    };
    const LinearCase linear_cases[] = {
        {"to_q 64x64 B2: 8192 x 320 <- 320", 8192, 320, 320},
        {"GEGLU proj: 8192 x 2560 <- 320", 8192, 2560, 320},
        {"ff out: 8192 x 320 <- 1280", 8192, 320, 1280},
        {"GEGLU proj 16x16: 512 x 10240 <- 1280", 512, 10240, 1280},
        {"to_k cross: 154 x 320 <- 768", 154, 320, 768},
        {"q/k/v 16x16 B2: 512 x 1280 <- 1280", 512, 1280, 1280},
        {"q/k/v 32x32 B2: 2048 x 640 <- 640", 2048, 640, 640},
        {"ff out 16x16: 512 x 1280 <- 5120", 512, 1280, 5120},
        {"ff out 32x32: 2048 x 640 <- 2560", 2048, 640, 2560},
        {"to_k cross 16x16: 154 x 1280 <- 768", 154, 1280, 768},
    };
    for (const auto& c : linear_cases) {
      const auto x = random_gpu({c.m, c.k}, hd::DType::kF16, rng);
      const auto w = random_gpu({c.n, c.k}, hd::DType::kF16, rng);
      const auto bias = random_gpu({c.n}, hd::DType::kF16, rng);
      hd::OwnedTensor out({c.m, c.n}, hd::DType::kF16, gpu0());
      hd::gpu::GemmProblem g = hd::gpu::dense_gemm(hd::DType::kF16, gpu0(), c.m, c.n, c.k, x.view().data, c.k,
                                                   w.view().data, c.k, out.view().data, c.n);
      g.bias = bias.view().data;
      report(c.name, g, 2.0 * double(c.m) * double(c.n) * double(c.k));
    }
  }

  // The feed-forward's projection with GEGLU in the product's epilogue (GemmGate), against the same
  // projection stored and then gated by the GEGLU kernel ("unfused": the plain product's tuned choice,
  // the libraries among them unless HD_KERNELS says otherwise). GB: what each form moves at the least
  // (unfused: the projection written and read back too).
  if (wanted("geglu")) {
    std::printf(
        "\nlinear + GEGLU (f16, bias)               fused ms  TFLOP/s  best fused tile             unfused "
        "ms  "
        "fused / unfused  MB saved\n");
    struct GegluCase {
      const char* name;
      int64_t m, half, k;
    };
    const GegluCase geglu_cases[] = {
        {"SD1.5 64x64 B2: 8192 x 2x1280 <- 320", 8192, 1280, 320},
        {"SD1.5 32x32 B2: 2048 x 2x2560 <- 640", 2048, 2560, 640},
        {"SD1.5 16x16 B2: 512 x 2x5120 <- 1280", 512, 5120, 1280},
        {"SDXL 64x64 B2: 8192 x 2x2560 <- 640", 8192, 2560, 640},
        {"SDXL 32x32 B2: 2048 x 2x5120 <- 1280", 2048, 5120, 1280},
    };
    for (const auto& c : geglu_cases) {
      if (!case_wanted(c.name)) continue;
      const auto x = random_gpu({c.m, c.k}, hd::DType::kF16, rng);
      const auto w = random_gpu({2 * c.half, c.k}, hd::DType::kF16, rng);
      const auto bias = random_gpu({2 * c.half}, hd::DType::kF16, rng);
      hd::OwnedTensor out({c.m, c.half}, hd::DType::kF16, gpu0());
      hd::gpu::GemmProblem g =
          hd::gpu::dense_gemm(hd::DType::kF16, gpu0(), c.m, 2 * c.half, c.k, x.view().data, c.k,
                              w.view().data, c.k, out.view().data, c.half);
      g.bias = bias.view().data;
      g.gate = hd::gpu::GemmGate::kGeluErf;
      const double flop = 2.0 * double(c.m) * double(2 * c.half) * double(c.k);
      const AgainstUnfused t = time_against_unfused(g);
      const double saved_mb = 2.0 * double(c.m) * double(2 * c.half) * 2 / 1e6;  // written, then read back
      std::printf("%-40s %8.3f %7.1f  %-26s %10.3f %15.2f %9.0f\n", c.name, t.best_ms,
                  flop / (t.best_ms * 1e9), t.best.c_str(), t.unfused_ms, t.best_ms / t.unfused_ms, saved_mb);
      if (every_tile)
        for (const auto& [tile, ms] : t.tiles)
          std::printf("    %-36s %8.3f %7.1f\n", tile.c_str(), ms, flop / (ms * 1e9));
    }
  }

  // Upsample2D (nearest 2x, then a 3x3 convolution) as the convolution's four output phases over the image
  // itself (gemm.h, upsample_conv_gemm), against upsampling into scratch and convolving ("unfused": the
  // convolution's tuned choice, the libraries among them unless HD_KERNELS says otherwise). TFLOP/s: of
  // the upsampled convolution's multiply-adds, which the phases do 16/36 of.
  if (wanted("upsample")) {
    std::printf(
        "\nupsample 2x + conv 3x3 (f16, bias)       phases ms  TFLOP/s  best phase tile            unfused "
        "ms  TFLOP/s  phases / unfused\n");
    struct UpsampleCase {
      const char* name;
      int64_t n, h, c;  // the image before upsampling: n x h x h x c, c channels out
    };
    const UpsampleCase upsample_cases[] = {
        {"SD1.5 UNet B2 8x8 -> 16x16, 1280", 2, 8, 1280},
        {"SD1.5 UNet B2 16x16 -> 32x32, 1280", 2, 16, 1280},
        {"SD1.5 UNet B2 32x32 -> 64x64, 640", 2, 32, 640},
        {"SDXL UNet B2 64x64 -> 128x128, 640", 2, 64, 640},
        {"VAE 1024 128x128 -> 256x256, 512", 1, 128, 512},
        {"VAE 1024 256x256 -> 512x512, 512", 1, 256, 512},
        {"VAE 1024 512x512 -> 1024x1024, 256", 1, 512, 256},
    };
    for (const auto& c : upsample_cases) {
      if (!case_wanted(c.name)) continue;
      const auto x = random_gpu({c.n, c.h, c.h, c.c}, hd::DType::kF16, rng);
      const auto w = random_gpu({c.c, 3, 3, c.c}, hd::DType::kF16, rng);
      const auto bias = random_gpu({c.c}, hd::DType::kF16, rng);
      hd::OwnedTensor phases({2, 2, c.c, 2, 2, c.c}, hd::DType::kF16, gpu0());
      hd::ops::upsample_conv2d_phases(w, phases);
      hd::OwnedTensor out({c.n, 2 * c.h, 2 * c.h, c.c}, hd::DType::kF16, gpu0());
      const hd::gpu::GemmProblem g = hd::gpu::upsample_conv_gemm(x, phases, w, &bias.view(), out);
      const double flop = 2.0 * double(c.n) * double(4 * c.h * c.h) * double(c.c) * double(9 * c.c);
      const AgainstUnfused t = time_against_unfused(g);
      std::printf("%-40s %9.3f %8.1f  %-26s %10.3f %8.1f %17.2f\n", c.name, t.best_ms,
                  flop / (t.best_ms * 1e9), t.best.c_str(), t.unfused_ms, flop / (t.unfused_ms * 1e9),
                  t.best_ms / t.unfused_ms);
      if (every_tile)
        for (const auto& [tile, ms] : t.tiles)
          std::printf("    %-36s %9.3f %8.1f\n", tile.c_str(), ms, flop / (ms * 1e9));
    }
  }

  if (wanted("materialised")) {
    std::printf("\nattention, materialised path (f16)   ms     TFLOP/s\n");
    // 65536 tokens: the mid block of a 2048x2048 picture's decode (scores of 8 GiB at once, before they
    // went through in chunks of queries).
    for (const int64_t l : {int64_t(4096), int64_t(16384), int64_t(65536)}) {
      const auto q = random_gpu({1, l, 512}, hd::DType::kF16, rng);
      hd::OwnedTensor out(q.view().shape, hd::DType::kF16, gpu0());
      hd::ops::AttentionParams p;
      const double ms = median_ms([&] { hd::ops::attention(q, q, q, p, out); });
      std::printf("VAE mid B1 H1 L%-6lld D512           %8.3f %8.1f\n", (long long)l, ms,
                  4.0 * double(l) * double(l) * 512 / (ms * 1e9));
    }
  }

  if (wanted("layer_norm")) {
    std::printf("\nlayer_norm (f16)                     ms     GB/s   of copy\n");
    for (const hd::Shape& s : {hd::Shape{2, 4096, 320}, hd::Shape{2, 1024, 640}, hd::Shape{2, 77, 768}}) {
      const auto x = random_gpu(s, hd::DType::kF16, rng);
      const auto gamma = random_gpu({s[2]}, hd::DType::kF16, rng, 1.f);
      const auto beta = random_gpu({s[2]}, hd::DType::kF16, rng);
      hd::OwnedTensor out(s, hd::DType::kF16, gpu0());
      const double ms = median_ms([&] { hd::ops::layer_norm(x, gamma, beta, 1e-5f, out); });
      const double gbs = 2.0 * double(x.view().nbytes()) / (ms * 1e6);
      std::printf("%-34s %8.3f %8.0f %6.0f%%\n", s.to_string().c_str(), ms, gbs, 100.0 * gbs / copy_gbs);
    }
  }
  return 0;
}
