// `hipdiffusion tune`: fills the autotuner's cache ahead of time for the sizes a user will generate, with
// the exhaustive policy (every candidate kernel, timed fully), so that later `generate` runs find every
// choice made and tuned to the last percent. One one-step generation per size measures each shape the
// text encoders, the UNet (batch 2 under classifier-free guidance) and the VAE decoder compute.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "ops/tuning/autotuner.h"
#include "pipeline/stable_diffusion.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"

namespace hd::cli {

namespace {

struct Size {
  int width, height;
};

// "512x512,768x512": widths by heights, comma-separated.
std::vector<Size> parse_sizes(const std::string& text) {
  std::vector<Size> sizes;
  for (const std::string_view item : split_list(text)) {
    const size_t x = item.find('x');
    HD_CHECK(x != std::string::npos && x > 0 && x + 1 < item.size(), "--size must be WxH[,WxH...], got '", text, "'");
    sizes.push_back({parse_number<int>("--size", std::string(item.substr(0, x))),
                     parse_number<int>("--size", std::string(item.substr(x + 1)))});
  }
  return sizes;
}

}  // namespace

int run_tune(std::span<const std::string_view> args) {
  const Flags flags("tune", args,
                    {"--model", "--size", "--batch", "--cfg-scale", "--device", "--dtype", "--tune-cache", "--kernels",
                     "--vocab", "--config", "--max-device-memory"});
  if (!flags.get("--model")) throw UsageError{"tune: --model PATH is required"};
  const ops::Placement placement = placement_of(flags);
  HD_CHECK(placement.device.is_gpu(), "tune: the CPU runs one kernel per op, so there is nothing to tune; give "
                                      "--device cuda:N or hip:N");
  apply_device_memory_limit(flags, placement);
  apply_kernel_choice(flags);
  ops::set_tune_policy(ops::TunePolicy::kExhaustive);
  if (const auto v = flags.get("--tune-cache")) ops::set_tune_cache_path(*v);
  HD_CHECK(!ops::tune_cache_path().empty(), "tune: no tuning cache to fill: give --tune-cache PATH (or set "
                                            "HD_TUNE_CACHE, or HOME)");

  GenerationParams p;
  p.prompt = "a photograph";
  p.steps = 1;
  if (const auto v = flags.get("--batch")) p.batch = parse_number<int>("--batch", *v);
  if (const auto v = flags.get("--cfg-scale")) p.cfg_scale = parse_number<float>("--cfg-scale", *v);
  const StableDiffusion sd =
      StableDiffusion::load(*flags.get("--model"), flags.get("--vocab"), flags.get("--config"), placement);
  std::vector<Size> sizes;
  if (const auto v = flags.get("--size")) {
    sizes = parse_sizes(*v);
  } else {
    sizes.push_back({int(sd.default_image_size()), int(sd.default_image_size())});
  }
  for (const Size& size : sizes) {  // every request checked before the first is tuned
    p.width = size.width;
    p.height = size.height;
    sd.validate(p, false);
  }
  std::fprintf(stderr, "tuning %s (%s) on %s, every candidate kernel timed fully, into %s\n",
               flags.get("--model")->c_str(), sd.description().c_str(), placement.to_string().c_str(),
               ops::tune_cache_path().c_str());
  for (const Size& size : sizes) {
    p.width = size.width;
    p.height = size.height;
    const ops::TuningStats before = ops::tuning_stats();
    const auto start = std::chrono::steady_clock::now();
    sd.generate(p);
    std::printf("%dx%d, batch %d, CFG %g: %d shapes tuned in %.1f s\n", size.width, size.height, p.batch,
                double(p.cfg_scale), ops::tuning_since(before).keys_tuned,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace hd::cli
