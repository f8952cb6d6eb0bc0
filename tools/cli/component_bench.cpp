#include "tools/cli/component_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_source.h"
#include "models/unet.h"
#include "models/unet_graphs.h"
#include "models/vae.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#include "ops/tuning/autotuner.h"
#include "pipeline/tiled_decode.h"
#include "tools/cli/commands.h"

namespace hd::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Host f32 standard normal values of `shape`, placed.
OwnedTensor random_input(const Shape& shape, const ops::Placement& placement, std::mt19937& rng) {
  OwnedTensor host(shape, DType::kF32);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float* values = host.ptr<float>();
  for (int64_t i = 0, n = host.view().numel(); i < n; ++i) values[i] = normal(rng);
  return ops::place(host, placement);
}

}  // namespace

bool needs_component_bench(const std::string& path) {
  const ModelSource source = ModelSource::open(path);
  const ModelComponent* unet = source.component("unet");
  return unet != nullptr && unet->find("add_embedding.linear_1.weight") != nullptr &&
         source.component("text_encoder_2") == nullptr;
}

int run_component_bench(const ComponentBench& b, const Flags& flags) {
  ops::prepare_device(b.placement.device);
  const ModelSource source = ModelSource::open(b.model);
  const ModelComponent* unet_weights = source.component("unet");
  const ModelComponent* vae_weights = source.component("vae");
  HD_CHECK(unet_weights != nullptr && vae_weights != nullptr, b.model, ": needs unet/ and vae/");
  const Unet unet = Unet::load(*unet_weights, b.placement);
  const Vae vae = Vae::load(*vae_weights, b.placement);
  const UnetConfig& uc = unet.config();
  const int64_t scale = int64_t(1) << (vae.config().block_out_channels.size() - 1);
  const auto size_flag = [&](const char* flag) {
    return flags.get(flag) ? parse_number<int>(flag, *flags.get(flag)) : int(uc.sample_size * scale);
  };
  const int width = size_flag("--width"), height = size_flag("--height");
  const int64_t factor = scale << (uc.block_out_channels.size() - 1);  // the UNet halves its input levels-1 times
  HD_CHECK(width > 0 && height > 0 && width % factor == 0 && height % factor == 0 && width <= 8192 && height <= 8192,
           "--width and --height must be multiples of ", factor, " up to 8192 for this model, got ", width, "x",
           height);
  const bool guided = b.cfg_scale > 1.0f;
  const int64_t n = guided ? 2 : 1, h = height / scale, w = width / scale;
  std::fprintf(stderr,
               "%s: UNet and VAE only (the model has no text encoders), %dx%d, UNet batch %lld, %s, kernels: %s: 1 "
               "warm-up + %d timed runs of %d steps\n",
               b.description.c_str(), width, height, (long long)n, b.placement.to_string().c_str(),
               ops::kernel_choice_name(ops::kernel_choice()), b.repeats, b.steps);

  // The UNet's inputs as a generation gives them: latents, prompt embeddings of 77 tokens and, for a
  // text-time UNet, the pooled embedding and SDXL's size ids (original size, crop origin 0, target size).
  std::mt19937 rng(7);
  const OwnedTensor sample = random_input(Shape{n, h, w, uc.in_channels}, b.placement, rng);
  const OwnedTensor context = random_input(Shape{n, 77, uc.context_dim}, b.placement, rng);
  OwnedTensor text_embeds, time_ids;
  std::optional<TextTimeConditioning> added;
  if (uc.text_time()) {
    const int64_t ids = 6, pooled = uc.addition_embed_input_dim - ids * uc.addition_time_embed_dim;
    HD_CHECK(pooled > 0, b.model, ": add_embedding's input (", uc.addition_embed_input_dim, ") has no room for ", ids,
             " size ids of width ", uc.addition_time_embed_dim);
    text_embeds = random_input(Shape{n, pooled}, b.placement, rng);
    OwnedTensor host_ids(Shape{n, ids}, DType::kF32);
    for (int64_t i = 0; i < n; ++i) {
      const float row[6] = {float(height), float(width), 0.0f, 0.0f, float(height), float(width)};
      std::copy(row, row + 6, host_ids.ptr<float>() + i * ids);
    }
    time_ids = ops::place(host_ids, ops::Placement{b.placement.device, DType::kF32});
    added = TextTimeConditioning{text_embeds.view(), time_ids.view()};
  }
  const TextTimeConditioning* cond = added ? &*added : nullptr;
  UnetGraphs graphs;
  const Device& device = b.placement.device;
  const auto step = [&](int i) {
    // Timesteps as a 1000-step schedule walks them; the values do not change the work.
    return graphs.forward(unet, sample, float(999 - (i * 997) / std::max(1, b.steps - 1)), context, cond);
  };
  const OwnedTensor latents =
      random_input(Shape{1, h, w, vae.config().latent_channels}, ops::Placement{Device::cpu(), DType::kF32}, rng);
  const VaeTiling tiling = vae_tiling_of(flags);
  const auto decode = [&] {
    const auto whole = [&](const Tensor& l) { return ops::to_host_f32(vae.decode(ops::place(l, b.placement))); };
    if (tiling == VaeTiling::kAuto) return whole(latents);
    const int64_t tile = std::max<int64_t>(2, vae.config().sample_size / scale);
    if (tiling == VaeTiling::kBlended) return decode_in_tiles(latents, scale, VaeTiles{tile}, whole);
    return vae.decode_tiled_exact(latents, tile);
  };

  // Warm-up: the first step tunes every kernel choice, the second captures the graph the others replay.
  const auto warm_start = Clock::now();
  for (int i = 0; i < 3; ++i) step(i);
  decode();
  ops::synchronize(device);
  const double warm_up_ms = ms_since(warm_start);

  std::vector<double> steps, loops, decodes;
  size_t decode_extra = 0;
  bool finite = true;
  for (int r = 0; r < b.repeats; ++r) {
    for (int i = 0; i < b.steps; ++i) {  // each step waited for
      const auto t0 = Clock::now();
      step(i);
      ops::synchronize(device);
      steps.push_back(ms_since(t0));
    }
    const auto loop_start = Clock::now();  // back to back, as a denoising loop runs them
    for (int i = 0; i < b.steps; ++i) step(i);
    ops::synchronize(device);
    loops.push_back(ms_since(loop_start));
    const size_t held = ops::mark_device_memory(device);
    const auto d0 = Clock::now();
    const OwnedTensor image = decode();
    decodes.push_back(ms_since(d0));
    const size_t peak = ops::peak_device_memory(device, /*since_mark=*/true);
    decode_extra = std::max(decode_extra, peak > held ? peak - held : 0);
    const float* px = image.ptr<float>();
    finite = finite && std::all_of(px, px + image.view().numel(), [](float x) { return std::isfinite(x); });
    std::fprintf(stderr, "run %d/%d: step %.2f ms, decode %.1f ms\n", r + 1, b.repeats, median(steps), decodes.back());
  }
  const size_t peak = ops::peak_device_memory(device);

  // --profile: one plain UNet step and one decode op by op (each op waited for).
  std::vector<ops::OpTotal> profile;
  double profiled_ms = 0;
  if (flags.has("--profile")) {
    ops::set_profiling(true);
    try {
      const auto t0 = Clock::now();
      step(0);
      decode();
      profiled_ms = ms_since(t0);
    } catch (...) {
      ops::set_profiling(false);
      throw;
    }
    profile = ops::profile_totals();
    ops::set_profiling(false);
  }

  if (flags.has("--json")) {
    nlohmann::json ops_json = nlohmann::json::array();
    for (const ops::OpTotal& t : profile) ops_json.push_back({{"op", t.op}, {"calls", t.calls}, {"ms", t.ms}});
    nlohmann::json j = {{"model", b.description},
                        {"architecture", uc.text_time() ? "SDXL UNet + VAE" : "UNet + VAE"},
                        {"components_only", true},
                        {"parameters", b.parameters},
                        {"device", b.placement.to_string()},
                        {"kernels", ops::kernel_choice_name(ops::kernel_choice())},
                        {"width", width},
                        {"height", height},
                        {"steps", b.steps},
                        {"unet_batch", n},
                        {"repeats", b.repeats},
                        {"text_encoding_ms", nullptr},
                        {"unet_step_ms", median(steps)},
                        {"unet_steps_back_to_back_ms", median(loops)},
                        {"vae_decode_ms", median(decodes)},
                        {"image_ms", nullptr},
                        {"png_encode_ms", nullptr},
                        {"image_with_png_ms", nullptr},
                        {"warm_up_ms", warm_up_ms},
                        {"vae_tiled", tiling != VaeTiling::kAuto},
                        {"vae_output_finite", finite},
                        {"peak_device_memory_bytes", peak},
                        {"vae_decode_extra_device_memory_bytes", decode_extra}};
    if (flags.has("--profile")) j["profile"] = {{"ms", profiled_ms}, {"ops", ops_json}};
    std::printf("%s\n", j.dump(1).c_str());
    return kExitOk;
  }
  std::printf("%s: UNet and VAE only; text encoding and whole images need text encoders the model lacks\n",
              b.description.c_str());
  std::printf("%-40s %10s\n", "stage (median)", "ms");
  std::printf("%-40s %10.2f\n", str_cat("UNet step (batch ", n, ")").c_str(), median(steps));
  std::printf("%-40s %10.2f\n", str_cat(b.steps, " UNet steps back to back").c_str(), median(loops));
  std::printf("%-40s %10.2f\n", tiling != VaeTiling::kAuto ? "VAE decode in tiles (to host)" : "VAE decode (to host)",
              median(decodes));
  std::printf("%-40s %10.2f\n", "warm-up (autotuning, capture)", warm_up_ms);
  if (device.is_gpu()) {
    std::printf("peak device memory: %.2f GiB; the VAE decode's own (above what was held before it): %.2f GiB\n",
                double(peak) / double(1 << 30), double(decode_extra) / double(1 << 30));
  }
  if (!finite) std::printf("note: the VAE's output held NaN or infinity (f16 overflow)\n");
  if (flags.has("--profile")) {
    double ops_ms = 0;
    for (const ops::OpTotal& t : profile) ops_ms += t.ms;
    std::printf("\nop by op, one more UNet step (plain, not a graph) and VAE decode, every op waited for: %.1f ms\n",
                profiled_ms);
    std::printf("%-22s %8s %10s %7s\n", "op", "calls", "ms", "share");
    for (const ops::OpTotal& t : profile)
      std::printf("%-22s %8lld %10.2f %6.1f%%\n", t.op.c_str(), (long long)t.calls, t.ms, 100.0 * t.ms / ops_ms);
  }
  return kExitOk;
}

}  // namespace hd::cli
