// `hipdiffusion generate`: text to image on the CPU or a GPU, with a progress bar on stderr and the generation
// parameters written into the PNG (A1111's "parameters" text, which web UIs read back).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/layout.h"
#include "core/startup_trace.h"
#include "core/thread_pool.h"
#include "io/lora.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "ops/placement.h"
#include "ops/tuning/autotuner.h"
#include "pipeline/default_model.h"
#include "pipeline/expert_ensemble.h"
#include "pipeline/infotext.h"
#include "pipeline/init_image.h"
#include "pipeline/parallel_generation.h"
#include "pipeline/stable_diffusion.h"
#include "text/clip_tokenizer.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"

namespace hd::cli {

namespace {

std::vector<std::string> generate_flags() {
  std::vector<std::string> flags = {"--model",
                                    "--prompt",
                                    "--negative-prompt",
                                    "--steps",
                                    "--cfg-scale",
                                    "--sampler",
                                    "--schedule",
                                    "--seed",
                                    "--width",
                                    "--height",
                                    "--batch",
                                    "--init-image",
                                    "--strength",
                                    "--vocab",
                                    "--config",
                                    "--prediction",
                                    "--timestep-spacing",
                                    "--output",
                                    "--save-latents",
                                    "--device",
                                    "--dtype",
                                    "--tune",
                                    "--tune-cache",
                                    "--threads",
                                    "--max-device-memory",
                                    "--kernels",
                                    "--refiner",
                                    "--high-noise-frac",
                                    "--vae",
                                    "--devices",
                                    "--parallel",
                                    "--displaced-warmup",
                                    "--lora"};
  flags.insert(flags.end(), kMicroConditioningFlags.begin(), kMicroConditioningFlags.end());
  return flags;
}

// How the devices share a request, for the log.
std::string mode_description(ParallelMode mode, int devices, int displaced_warmup) {
  switch (mode) {
    case ParallelMode::kData: return "data parallel (the batch's pictures spread over them)";
    case ParallelMode::kCfg:
      if (devices > 2)
        return str_cat("CFG x data parallel (", devices / 2,
                       " pairs, each with a share of the batch, each device one half of its guided batch)");
      return "CFG parallel (each computes one half of the guided batch)";
    case ParallelMode::kSplit: return "image split (each computes a strip of the latent's rows)";
    case ParallelMode::kDisplaced:
      return str_cat("displaced image split (each computes a strip; after ", displaced_warmup,
                     " exact steps, with the other strips' values of the step before)");
    case ParallelMode::kAuto: break;
  }
  return "?";
}

std::string output_path(const std::string& base, int index, int batch) {
  if (batch == 1) return base;
  const size_t dot = base.rfind('.');
  const std::string stem = dot == std::string::npos ? base : base.substr(0, dot);
  const std::string ext = dot == std::string::npos ? ".png" : base.substr(dot);
  return stem + "-" + std::to_string(index + 1) + ext;
}

class ProgressBar {
 public:
  void operator()(int done, int total) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = done / std::max(seconds, 1e-9);
    const int width = 30, filled = done * width / total;
    std::fprintf(stderr, "\rstep %d/%d [%s%s] %.2f it/s, ETA %.0f s ", done, total, std::string(size_t(filled), '=').c_str(),
                 std::string(size_t(width - filled), ' ').c_str(), rate, (total - done) / std::max(rate, 1e-9));
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

int run_generate(std::span<const std::string_view> args) {
  const Flags flags("generate", args, generate_flags(), {"--vae-tiling", "--vae-tiling-blended"});
  const auto get = [&](const char* flag) { return flags.get(flag); };
  if (!get("--prompt")) throw UsageError{"generate: --prompt TEXT is required"};

  GenerationParams p;
  p.prompt = *get("--prompt");
  p.negative_prompt = get("--negative-prompt").value_or("");
  if (auto v = get("--steps")) p.steps = parse_number<int>("--steps", *v);
  if (auto v = get("--cfg-scale")) p.cfg_scale = parse_number<float>("--cfg-scale", *v);
  if (auto v = get("--sampler")) p.sampler = parse_sampler(*v);
  if (auto v = get("--schedule")) p.schedule = parse_sigma_schedule(*v);
  if (auto v = get("--seed")) p.seed = parse_number<uint64_t>("--seed", *v);
  if (auto v = get("--width")) p.width = parse_number<int>("--width", *v);
  if (auto v = get("--height")) p.height = parse_number<int>("--height", *v);
  if (auto v = get("--batch")) p.batch = parse_number<int>("--batch", *v);
  if (auto v = get("--prediction")) p.prediction = parse_prediction(*v);
  if (auto v = get("--timestep-spacing")) p.spacing = parse_timestep_spacing(*v);
  read_micro_conditioning(flags, p);
  p.vae_tiling = vae_tiling_of(flags);
  validate(p, 8);
  check_sampler_schedule(p.sampler, p.schedule);
  require_utf8(p.prompt, "the prompt");
  require_utf8(p.negative_prompt, "the negative prompt");
  // Where to compute: the CPU in f32, or a GPU in f16 (default) or bf16; or several devices (--devices),
  // each with the whole model.
  HD_CHECK(!get("--device") || !get("--devices"), "--device and --devices both say where to compute: give one");
  HD_CHECK(!get("--parallel") || get("--devices"), "--parallel applies to --devices only");
  std::vector<Device> devices;
  if (auto v = get("--devices")) devices = parse_device_list(*v);
  const ParallelMode parallel = get("--parallel") ? parse_parallel_mode(*get("--parallel")) : ParallelMode::kAuto;
  HD_CHECK(!get("--displaced-warmup") || parallel == ParallelMode::kDisplaced,
           "--displaced-warmup applies to --parallel displaced only");
  const ops::Placement placement = devices.empty() ? placement_of(flags)
                                                   : ops::Placement::parse(devices[0].to_string(), get("--dtype").value_or(""));
  if (devices.empty()) {
    apply_device_memory_limit(flags, placement);
  } else {
    for (const Device& d : devices) apply_device_memory_limit(flags, ops::Placement{d, placement.dtype});
  }
  apply_kernel_choice(flags);
  apply_tuning(flags);
  // img2img: the image sets the size unless --width/--height are given, which must then agree (no
  // resizing is done).
  std::optional<OwnedTensor> init_image;
  HD_CHECK(!get("--strength") || get("--init-image"), "--strength applies to --init-image only");
  if (auto path = get("--init-image")) {
    if (auto v = get("--strength")) p.strength = parse_number<float>("--strength", *v);
    validate(p, 8);  // the strength, before the image's size is compared
    const RgbImage png = read_png(*path);
    HD_CHECK(!get("--width") || p.width == png.width, "--width ", p.width, " differs from the init image's ",
             png.width, " (images are not resized)");
    HD_CHECK(!get("--height") || p.height == png.height, "--height ", p.height, " differs from the init image's ",
             png.height, " (images are not resized)");
    p.width = png.width;
    p.height = png.height;
    validate(p, 8);
    img2img_first_step(p);
    init_image = init_image_of(png);
  }
  if (auto v = get("--threads")) {
    const int threads = parse_number<int>("--threads", *v);
    HD_CHECK(threads >= 1 && threads <= 1024, "--threads must be between 1 and 1024, got ", threads);
    ThreadPool::set_global_threads(threads);
  }

  // SDXL's ensemble of expert denoisers: the base to the high-noise fraction (diffusers' example: 0.8),
  // then the refiner.
  std::optional<InfotextRefiner> refiner_choice;  // the refiner's path and high-noise fraction
  HD_CHECK(!get("--high-noise-frac") || get("--refiner"), "--high-noise-frac applies to --refiner only");
  if (auto path = get("--refiner")) {
    refiner_choice = InfotextRefiner{*path, 0.8};
    if (auto v = get("--high-noise-frac")) refiner_choice->switch_at = parse_number<double>("--high-noise-frac", *v);
    with_context([&] { check_refiner_switch(refiner_choice->switch_at); }, [] { return "--high-noise-frac"; });
  }

  const std::string model = get("--model") ? *get("--model") : default_model_folder();
  // LoRAs merge into the model's weights as they load (not the refiner's: a LoRA is made for one UNet).
  const std::vector<LoraChoice> loras =
      get("--lora") ? parse_lora_list(*get("--lora")) : std::vector<LoraChoice>{};
  startup_mark("arguments read");
  const auto load_start = std::chrono::steady_clock::now();
  std::optional<StableDiffusion> single;
  std::optional<ParallelStableDiffusion> several;
  if (devices.empty()) {
    single = StableDiffusion::load(model, get("--vocab"), get("--config"), placement, loras);
  } else {
    several = ParallelStableDiffusion::load(model, get("--vocab"), get("--config"), devices, placement.dtype,
                                            loras);
    if (auto v = get("--displaced-warmup")) several->set_displaced_warmup(parse_number<int>("--displaced-warmup", *v));
  }
  const StableDiffusion& sd = single ? *single : several->model(0);
  // The refiner beside the model (on every device with --devices).
  std::optional<StableDiffusion> single_refiner;
  if (refiner_choice && single)
    single_refiner = StableDiffusion::load(refiner_choice->path, get("--vocab"), std::nullopt, placement);
  if (refiner_choice && several) several->load_refiner(refiner_choice->path, get("--vocab"));
  const StableDiffusion* refiner = single_refiner ? &*single_refiner
                                   : refiner_choice ? &several->refiner(0)
                                                    : nullptr;
  // --vae replaces the VAE of both (the refiner's decodes an ensemble's image).
  if (auto path = get("--vae")) {
    if (single) single->use_vae(*path);
    else several->use_vae(*path);
    if (single_refiner) single_refiner->use_vae(*path);
  }
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  // Without --width/--height (and no init image), the size the model was trained for.
  if (!get("--width") && !init_image) p.width = sd.default_image_size();
  if (!get("--height") && !init_image) p.height = sd.default_image_size();
  // Every rule of the request before any work (the ensemble's: both models' shares).
  if (refiner) {
    (void)refiner_shares(sd, *refiner, p, refiner_choice->switch_at, init_image.has_value());
  } else {
    sd.validate(p, init_image.has_value());
  }
  const ParallelMode mode = several ? several->resolve(parallel, p, refiner != nullptr) : ParallelMode::kData;
  const std::string where =
      several ? str_cat(device_list_name(devices), " ", dtype_name(sd.placement().dtype)) : placement.to_string();
  std::fprintf(stderr, "model: %s, %s, loaded in %.2f s; %dx%d, %d steps of %s on %s\n", model.c_str(),
               sd.description().c_str(), load_seconds, p.width, p.height, p.steps,
               std::string(sampler_name(p.sampler)).c_str(), where.c_str());
  if (several && devices.size() > 1)
    std::fprintf(stderr, "devices: %zu, %s, exchanging through %s\n", devices.size(),
                 mode_description(mode, several->size(), several->displaced_warmup()).c_str(),
                 several->exchange_name().c_str());
  if (refiner)
    std::fprintf(stderr, "refiner: %s, %s, from %g of the schedule\n", refiner_choice->path.c_str(),
                 refiner->description().c_str(), refiner_choice->switch_at);
  if (sd.vae_upcast() || (refiner && refiner->vae_upcast()))
    std::fprintf(stderr, "note: the VAE computes in bf16: its config says force_upcast (SDXL's VAE overflows f16); "
                         "an f16-safe VAE given with --vae (force_upcast false) computes in f16\n");
  if (sd.text_encoders_off_device())
    std::fprintf(stderr, "note: device memory is short for the whole model; its text encoders wait in host memory "
                         "and visit the device only to encode\n");
  ProgressBar bar;
  const ops::TuningStats tuned_before = ops::tuning_stats();
  const Tensor* init = init_image ? &init_image->view() : nullptr;
  const GenerationResult result =
      several && refiner ? several->generate_with_refiner(p, refiner_choice->switch_at, mode, std::ref(bar), init)
      : refiner          ? generate_with_refiner(sd, *refiner, p, refiner_choice->switch_at, std::ref(bar), init)
      : several          ? several->generate(p, mode, std::ref(bar), init)
                         : sd.generate(p, std::ref(bar), init);
  startup_mark("generated");
  const StageTimes& t = result.times;
  const ops::TuningStats tuned = ops::tuning_since(tuned_before);
  std::fprintf(stderr, "generated in %.2f s: text encoding %.2f s, denoising %.2f s, decoding %.2f s", t.total / 1e3,
               t.text_encoding / 1e3, t.denoising / 1e3, t.decoding / 1e3);
  if (tuned.keys_tuned > 0)
    std::fprintf(stderr,
                 " (first use of %d kernel shapes, %d of them from a near size's choice, tuned in %.2f s: %s "
                 "policy)",
                 tuned.keys_tuned, tuned.keys_borrowed, tuned.milliseconds / 1e3,
                 ops::tune_policy_name(ops::tune_policy()));
  std::fprintf(stderr, "\n");
  if (result.vae_retried_in_bf16) std::fprintf(stderr, "note: the VAE overflowed in f16; decoded again in bf16\n");
  if (result.vae_tiled && p.vae_tiling == VaeTiling::kAuto)
    std::fprintf(stderr, "note: the image did not fit in device memory at once; the VAE decoded it in tiles\n");

  const std::string output = get("--output").value_or("out.png");
  // The images are compressed in parallel, one per thread (0.1 s each for 512x512 on the H100 machine).
  const std::string parameters = infotext(p, model, refiner_choice, loras);
  ThreadPool::global().parallel_for(p.batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      write_png(output_path(output, int(b), p.batch), rgb8_of(result.image, b), {{"parameters", parameters}});
  });
  for (int b = 0; b < p.batch; ++b) std::printf("%s\n", output_path(output, b, p.batch).c_str());
  if (auto path = get("--save-latents")) {
    // NCHW f32, as diffusers returns latents.
    const Tensor& l = result.latents.view();
    const int64_t n = l.dim(0), h = l.dim(1), w = l.dim(2), c = l.dim(3);
    std::vector<float> nchw(size_t(l.numel()));
    nhwc_to_nchw(l.ptr<float>(), nchw.data(), n, c, h, w);
    std::vector<uint8_t> bytes(nchw.size() * 4);
    std::memcpy(bytes.data(), nchw.data(), bytes.size());
    const auto file = serialize_safetensors({{"latents", "F32", {n, c, h, w}, std::move(bytes)}});
    FILE* f = std::fopen(path->c_str(), "wb");
    HD_CHECK_KIND(f != nullptr, ErrorKind::kRuntime, *path, ": cannot write: ", std::strerror(errno));
    const size_t written = std::fwrite(file.data(), 1, file.size(), f);
    const bool closed = std::fclose(f) == 0;
    HD_CHECK_KIND(written == file.size() && closed, ErrorKind::kRuntime, *path, ": write failed");
  }
  startup_mark("images written");
  return kExitOk;
}

}  // namespace hd::cli
