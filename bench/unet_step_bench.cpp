// Time of one SD1.5 UNet step at 512x512 (64x64 latent), batch 2 as classifier-free guidance runs it,
// on the CPU (f32) or a GPU (f16 or bf16), on random weights (speed does not depend on their values). The weights are written once, in
// diffusers' names and f16 as real checkpoints are, to a temporary safetensors file, and loaded through
// the same path a real model takes.
// Usage: hd_bench_unet_step [repeats] [latent_size] [device: cpu|cuda:N|hip:N] [dtype: f16|bf16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/model_source.h"
#include "io/safetensors.h"
#include "models/unet.h"
#include "models/unet_graphs.h"
#include "ops/ops.h"
#include "ops/placement.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/device_memory.h"
#endif

namespace {

using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// diffusers' UNet2DConditionModel for SD1.x: 320/640/1280/1280, two layers a level, cross-attention
// in the first three levels, 768-wide context, 1x1-conv transformer projections.
Shapes sd15_unet_shapes() {
  const std::vector<int64_t> ch = {320, 640, 1280, 1280};
  const std::vector<bool> attn = {true, true, true, false};
  const int64_t temb = 1280, ctx = 768, lpb = 2;
  Shapes s;
  const auto add = [&](const std::string& n, std::vector<int64_t> shape) { s.emplace_back(n, std::move(shape)); };
  const auto resnet = [&](const std::string& p, int64_t in, int64_t out) {
    add(p + ".norm1.weight", {in}); add(p + ".norm1.bias", {in});
    add(p + ".conv1.weight", {out, in, 3, 3}); add(p + ".conv1.bias", {out});
    add(p + ".time_emb_proj.weight", {out, temb}); add(p + ".time_emb_proj.bias", {out});
    add(p + ".norm2.weight", {out}); add(p + ".norm2.bias", {out});
    add(p + ".conv2.weight", {out, out, 3, 3}); add(p + ".conv2.bias", {out});
    if (in != out) { add(p + ".conv_shortcut.weight", {out, in, 1, 1}); add(p + ".conv_shortcut.bias", {out}); }
  };
  const auto transformer = [&](const std::string& p, int64_t c) {
    add(p + ".norm.weight", {c}); add(p + ".norm.bias", {c});
    add(p + ".proj_in.weight", {c, c, 1, 1}); add(p + ".proj_in.bias", {c});
    const std::string b = p + ".transformer_blocks.0.";
    for (const char* norm : {"norm1", "norm2", "norm3"}) { add(b + norm + ".weight", {c}); add(b + norm + ".bias", {c}); }
    for (const char* a : {"attn1", "attn2"}) {
      const int64_t kv = std::string(a) == "attn1" ? c : ctx;
      add(b + a + ".to_q.weight", {c, c}); add(b + a + ".to_k.weight", {c, kv}); add(b + a + ".to_v.weight", {c, kv});
      add(b + a + ".to_out.0.weight", {c, c}); add(b + a + ".to_out.0.bias", {c});
    }
    add(b + "ff.net.0.proj.weight", {8 * c, c}); add(b + "ff.net.0.proj.bias", {8 * c});
    add(b + "ff.net.2.weight", {c, 4 * c}); add(b + "ff.net.2.bias", {c});
    add(p + ".proj_out.weight", {c, c, 1, 1}); add(p + ".proj_out.bias", {c});
  };
  add("conv_in.weight", {320, 4, 3, 3}); add("conv_in.bias", {320});
  add("time_embedding.linear_1.weight", {temb, 320}); add("time_embedding.linear_1.bias", {temb});
  add("time_embedding.linear_2.weight", {temb, temb}); add("time_embedding.linear_2.bias", {temb});
  int64_t prev = 320;
  for (size_t i = 0; i < ch.size(); ++i) {
    const std::string p = "down_blocks." + std::to_string(i);
    for (int64_t j = 0; j < lpb; ++j) {
      resnet(p + ".resnets." + std::to_string(j), j == 0 ? prev : ch[i], ch[i]);
      if (attn[i]) transformer(p + ".attentions." + std::to_string(j), ch[i]);
    }
    if (i + 1 < ch.size()) { add(p + ".downsamplers.0.conv.weight", {ch[i], ch[i], 3, 3}); add(p + ".downsamplers.0.conv.bias", {ch[i]}); }
    prev = ch[i];
  }
  resnet("mid_block.resnets.0", 1280, 1280);
  transformer("mid_block.attentions.0", 1280);
  resnet("mid_block.resnets.1", 1280, 1280);
  const std::vector<int64_t> rev(ch.rbegin(), ch.rend());
  const std::vector<bool> rev_attn(attn.rbegin(), attn.rend());
  int64_t prev_out = rev[0];
  for (size_t i = 0; i < rev.size(); ++i) {
    const std::string p = "up_blocks." + std::to_string(i);
    const int64_t out = rev[i], in = rev[std::min(i + 1, rev.size() - 1)];
    for (int64_t j = 0; j <= lpb; ++j) {
      const int64_t skip = j == lpb ? in : out, res_in = j == 0 ? prev_out : out;
      resnet(p + ".resnets." + std::to_string(j), res_in + skip, out);
      if (rev_attn[i]) transformer(p + ".attentions." + std::to_string(j), out);
    }
    if (i + 1 < rev.size()) { add(p + ".upsamplers.0.conv.weight", {out, out, 3, 3}); add(p + ".upsamplers.0.conv.bias", {out}); }
    prev_out = out;
  }
  add("conv_norm_out.weight", {320}); add("conv_norm_out.bias", {320});
  add("conv_out.weight", {4, 320, 3, 3}); add("conv_out.bias", {4});
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const int64_t latent = argc > 2 ? std::atoi(argv[2]) : 64;
  hd::ops::Placement placement{hd::Device::parse(argc > 3 ? argv[3] : "cpu"), hd::DType::kF32};
  if (placement.device.is_gpu()) placement.dtype = argc > 4 ? hd::parse_dtype(argv[4]) : hd::DType::kF16;
  placement.validate();
  hd::ops::prepare_device(placement.device);
  const auto dir = std::filesystem::temp_directory_path() / "hd_bench_sd15_unet";
  std::filesystem::create_directories(dir / "unet");
  const auto path = dir / "unet" / "diffusion_pytorch_model.safetensors";
  if (!std::filesystem::exists(path)) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<hd::SafetensorsWriteItem> items;
    int64_t params = 0;
    for (const auto& [name, shape] : sd15_unet_shapes()) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      params += n;
      std::vector<uint8_t> bytes(size_t(n) * 2);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = hd::float_to_half(normal(rng)).bits;
        bytes[size_t(2 * i)] = uint8_t(h);
        bytes[size_t(2 * i + 1)] = uint8_t(h >> 8);
      }
      items.push_back({name, "F16", shape, std::move(bytes)});
    }
    const auto file = hd::serialize_safetensors(std::move(items));
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
    std::printf("wrote random SD1.5 UNet weights (%.1f M parameters) to %s\n", double(params) / 1e6, path.c_str());
  }
  const hd::ModelSource model = hd::ModelSource::open(dir.string());
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
#if defined(HD_WITH_GPU)
  if (placement.device.is_gpu())
    std::printf("peak GPU memory held by activations and weights: %.2f GiB\n",
                double(hd::gpu::memory_stats(placement.device).peak_in_use) / double(1 << 30));
#endif
  return 0;
}
