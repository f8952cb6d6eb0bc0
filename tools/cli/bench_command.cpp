// `hipdiffusion bench`: how long a whole txt2img generation and each of its stages take on a device,
// for a given model or, with --arch, a model of random weights (speed does not depend on the values)
// written once to a temporary folder and loaded through the same path as a real checkpoint. One warm-up
// generation (kernel autotuning, graph capture) is reported on its own; then the medians of --repeats;
// with --profile, one more generation op by op (ops/profiler.h). Each timed run's first picture is also
// encoded as the PNG that `generate` writes and the server sends, so that a server's answer can be set
// beside the CLI's whole job.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/png.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#include "ops/tuning/autotuner.h"
#include "pipeline/infotext.h"
#include "pipeline/init_image.h"
#include "pipeline/random_model.h"
#include "pipeline/stable_diffusion.h"
#include "sampling/sampler.h"
#include "tools/cli/commands.h"
#include "tools/cli/component_bench.h"
#include "tools/cli/flags.h"

namespace hd::cli {

namespace {

const std::vector<std::string> kValued = {"--model", "--arch",   "--device", "--dtype",     "--steps", "--repeats",
                                          "--width", "--height", "--sampler", "--cfg-scale", "--vocab", "--config",
                                          "--tune", "--tune-cache", "--max-device-memory", "--kernels", "--batch"};
const std::vector<std::string> kSwitches = {"--json", "--profile", "--vae-tiling", "--vae-tiling-blended"};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int run_bench(std::span<const std::string_view> args) {
  const Flags flags("bench", args, kValued, kSwitches);
  if (flags.has("--model") == flags.has("--arch"))
    throw UsageError{"bench: give --model PATH or --arch sd15|sd21|sdxl"};
  const ops::Placement placement = placement_of(flags);
  apply_device_memory_limit(flags, placement);
  const ops::KernelChoice kernels = apply_kernel_choice(flags);
  apply_tuning(flags);
  GenerationParams p;
  p.prompt = "a photograph of an astronaut riding a horse";
  p.steps = 30;
  p.time_each_step = true;
  p.vae_tiling = vae_tiling_of(flags);
  if (auto v = flags.get("--steps")) p.steps = parse_number<int>("--steps", *v);
  if (auto v = flags.get("--sampler")) p.sampler = parse_sampler(*v);
  if (auto v = flags.get("--cfg-scale")) p.cfg_scale = parse_number<float>("--cfg-scale", *v);
  if (auto v = flags.get("--batch")) p.batch = parse_number<int>("--batch", *v);
  const int repeats = flags.get("--repeats") ? parse_number<int>("--repeats", *flags.get("--repeats")) : 5;
  HD_CHECK(repeats >= 1 && repeats <= 1000, "--repeats must be between 1 and 1000, got ", repeats);
  validate(p, 8);  // bad --steps or --cfg-scale before any model is written or loaded; sizes once it is

  std::string model, description;
  int64_t parameters = 0;
  bool components_only = false;
  if (auto arch = flags.get("--arch")) {
    const RandomModelSpec spec{parse_random_model_arch(*arch)};
    model = random_model_folder(spec);
    std::fprintf(stderr, "writing (or reusing) random %s weights in %s\n", arch->c_str(), model.c_str());
    parameters = write_random_model(spec, model);
    description = str_cat("random ", *arch, " weights");
  } else {
    model = *flags.get("--model");
    description = model;
    components_only = needs_component_bench(model);
  }
  // A text-time UNet without its text encoders (an SDXL UNet and a VAE): its components are timed.
  if (components_only)
    return run_component_bench({model, description, parameters, placement, p.steps, repeats, p.cfg_scale}, flags);
  // Loading as a user's first command does it (the page cache holds the file after the first run).
  const auto load_start = std::chrono::steady_clock::now();
  const StableDiffusion sd = StableDiffusion::load(model, flags.get("--vocab"), flags.get("--config"), placement);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  p.width = flags.get("--width") ? parse_number<int>("--width", *flags.get("--width")) : sd.default_image_size();
  p.height = flags.get("--height") ? parse_number<int>("--height", *flags.get("--height")) : sd.default_image_size();
  validate(p, sd.vae_scale_factor());
  const bool guided = p.cfg_scale > 1.0f;
  const int unet_batch = (guided ? 2 : 1) * p.batch;
  std::fprintf(stderr, "%s (%s), %dx%d, %d steps of %s, CFG %g (UNet batch %d), %s, kernels: %s: 1 warm-up + %d "
               "timed runs\n", description.c_str(), sd.description().c_str(), p.width, p.height, p.steps,
               std::string(sampler_name(p.sampler)).c_str(), double(p.cfg_scale), unet_batch,
               placement.to_string().c_str(), ops::kernel_choice_name(kernels), repeats);

  const ops::TuningStats tuned_before = ops::tuning_stats();
  const GenerationResult warm_up = sd.generate(p);
  const ops::TuningStats tuned = ops::tuning_since(tuned_before);
  std::vector<double> text, steps, loops, decodes, totals, pngs, with_pngs;
  size_t decode_extra = 0;
  const std::string infotext_text = infotext(p, description);
  for (int r = 0; r < repeats; ++r) {
    const GenerationResult result = sd.generate(p);
    decode_extra = std::max(decode_extra, result.decode_extra_device_memory);
    HD_CHECK_KIND(!result.vae_retried_in_bf16 || warm_up.vae_retried_in_bf16, ErrorKind::kRuntime,
                  "bench: the VAE overflowed in f16 on one run but not another");
    const StageTimes& t = result.times;
    text.push_back(t.text_encoding);
    steps.insert(steps.end(), t.steps.begin(), t.steps.end());
    loops.push_back(t.denoising);
    decodes.push_back(t.decoding);
    totals.push_back(t.total);
    const auto png_start = std::chrono::steady_clock::now();
    const std::vector<uint8_t> png = encode_png(rgb8_of(result.image, 0), {{"parameters", infotext_text}});
    pngs.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - png_start).count());
    with_pngs.push_back(t.total + pngs.back());
    std::fprintf(stderr, "run %d/%d: %.1f ms (and its PNG, %zu bytes: %.1f ms)\n", r + 1, repeats, t.total,
                 png.size(), pngs.back());
  }
  const size_t peak = ops::peak_device_memory(placement.device);
  // --profile: one more generation, op by op (each op waited for; the UNet runs plain, not as a graph).
  std::vector<ops::OpTotal> profile;
  double profiled_ms = 0;
  if (flags.has("--profile")) {
    ops::set_profiling(true);
    try {
      profiled_ms = sd.generate(p).times.total;
    } catch (...) {
      ops::set_profiling(false);
      throw;
    }
    profile = ops::profile_totals();
    ops::set_profiling(false);
  }
  double ops_ms = 0;
  for (const ops::OpTotal& t : profile) ops_ms += t.ms;

  if (flags.has("--json")) {
    nlohmann::json ops_json = nlohmann::json::array();
    for (const ops::OpTotal& t : profile) ops_json.push_back({{"op", t.op}, {"calls", t.calls}, {"ms", t.ms}});
    nlohmann::json j = {{"model", description},
                        {"architecture", sd.description()},
                        {"parameters", parameters},
                        {"device", placement.to_string()},
                        {"kernels", ops::kernel_choice_name(kernels)},
                        {"width", p.width},
                        {"height", p.height},
                        {"steps", p.steps},
                        {"sampler", std::string(sampler_name(p.sampler))},
                        {"batch", p.batch},
                        {"unet_batch", unet_batch},
                        {"repeats", repeats},
                        {"text_encoding_ms", median(text)},
                        {"unet_step_ms", median(steps)},
                        {"denoising_ms", median(loops)},
                        {"vae_decode_ms", median(decodes)},
                        {"image_ms", median(totals)},
                        {"png_encode_ms", median(pngs)},
                        {"image_with_png_ms", median(with_pngs)},
                        {"load_ms", load_ms},
                        {"first_image_ms", warm_up.times.total},
                        {"tune_policy", ops::tune_policy_name(ops::tune_policy())},
                        {"first_image_shapes_tuned", tuned.keys_tuned},
                        {"first_image_shapes_from_near_sizes", tuned.keys_borrowed},
                        {"first_image_tuning_ms", tuned.milliseconds},
                        {"vae_retried_in_bf16", warm_up.vae_retried_in_bf16},
                        {"vae_tiled", warm_up.vae_tiled},
                        {"peak_device_memory_bytes", peak},
                        {"vae_decode_extra_device_memory_bytes", decode_extra}};
    if (flags.has("--profile")) j["profile"] = {{"image_ms", profiled_ms}, {"ops", ops_json}};
    std::printf("%s\n", j.dump(1).c_str());
    return kExitOk;
  }
  std::printf("%-34s %10s\n", "stage (median)", "ms");
  std::printf("%-34s %10.2f\n", "text encoding (both prompts)", median(text));
  std::printf("%-34s %10.2f\n", str_cat("UNet step (batch ", unet_batch, ", sampler incl.)").c_str(),
              median(steps));
  std::printf("%-34s %10.2f\n", str_cat("denoising loop (", p.steps, " steps)").c_str(), median(loops));
  std::printf("%-34s %10.2f\n", "VAE decode (to host)", median(decodes));
  std::printf("%-34s %10.2f\n", "whole image", median(totals));
  std::printf("%-34s %10.2f\n", "its PNG (generate's file)", median(pngs));
  std::printf("%-34s %10.2f\n", "whole image and its PNG", median(with_pngs));
  std::printf("%-34s %10.2f\n", "loading the model (to ready weights)", load_ms);
  std::printf("%-34s %10.2f\n", "first image (autotuning, capture)", warm_up.times.total);
  std::printf("%-34s %10.2f\n",
              str_cat("  of which tuning (", tuned.keys_tuned, " shapes, ", tuned.keys_borrowed, " from near sizes, ",
                      ops::tune_policy_name(ops::tune_policy()), ")").c_str(),
              tuned.milliseconds);
  if (placement.device.is_gpu()) {
    std::printf("peak device memory: %.2f GiB; the VAE decode's own (above what was held before it): %.2f GiB\n",
                double(peak) / double(1 << 30), double(decode_extra) / double(1 << 30));
  }
  if (warm_up.vae_retried_in_bf16) std::printf("note: the VAE overflowed in f16; every decode ran twice\n");
  if (warm_up.vae_tiled) std::printf("note: the VAE decoded in tiles\n");
  if (flags.has("--profile")) {
    std::printf("\nop by op, one more generation with every op waited for (UNet plain, not a graph): %.1f ms\n",
                profiled_ms);
    std::printf("%-22s %8s %10s %7s\n", "op", "calls", "ms", "share");
    for (const ops::OpTotal& t : profile)
      std::printf("%-22s %8lld %10.2f %6.1f%%\n", t.op.c_str(), (long long)t.calls, t.ms, 100.0 * t.ms / ops_ms);
    std::printf("%-22s %8s %10.2f (the rest of the %.1f ms is host work between ops)\n", "all ops", "", ops_ms,
                profiled_ms);
  }
  return kExitOk;
}

}  // namespace hd::cli
