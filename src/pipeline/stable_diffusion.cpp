#include "pipeline/stable_diffusion.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/layout.h"
#include "core/startup_trace.h"
#include "ops/library_warm_up.h"
#include "ops/ops.h"
#include "ops/placement.h"
#include "pipeline/tiled_decode.h"

namespace hd {

namespace {

const ModelComponent& require(const ModelSource& m, const char* name) {
  const ModelComponent* c = m.component(name);
  HD_CHECK(c != nullptr, m.path(), ": the model has no ", name);
  return *c;
}

// SDXL's pipelines run a force_upcast VAE in f32 when the model is in f16 (the decoder overflows f16);
// a GPU here computes in f16 or bf16, and bf16 has f32's range.
ops::Placement vae_placement(const VaeConfig& vae, ModelFamily family, const ops::Placement& model) {
  ops::Placement p = model;
  if (family == ModelFamily::kSDXL && vae.force_upcast && model.dtype == DType::kF16) p.dtype = DType::kBF16;
  return p;
}

}  // namespace

void StableDiffusion::validate(const GenerationParams& p, bool refines) const {
  hd::validate(p, vae_scale_factor());
  HD_CHECK(micro_ != MicroConditioning::kNone || (p.sizes.empty() && p.negative_sizes.empty()),
           "size conditioning (original size, crop, target size) is SDXL's; this model's UNet does not take it");
  HD_CHECK(micro_ == MicroConditioning::kAestheticScore || (!p.aesthetic_score && !p.negative_aesthetic_score),
           "aesthetic scores condition an SDXL refiner; this model's UNet does not take them");
  const SizeConditioning& n = p.negative_sizes;
  if (micro_ == MicroConditioning::kSizes) {
    // diffusers uses the negative side's ids only when both its sizes are given, and ignores the rest.
    HD_CHECK(n.empty() || (n.original_size && n.target_size), "the negative size conditioning needs both the negative "
             "original size and the negative target size (with one alone, diffusers ignores the negative side)");
  }
  if (micro_ == MicroConditioning::kAestheticScore) {
    HD_CHECK(!p.sizes.target_size && !n.target_size, "an SDXL refiner is conditioned on the original size, the crop "
             "and an aesthetic score; it takes no target size");
    HD_CHECK(refines, "this model is an SDXL refiner (aesthetic-score conditioning): it refines an init image, or a "
             "base model's latents as the base's refiner; it does not start from noise");
  }
}

namespace {

// Latents of one VAE decode with the other: the same channels, scaling factor and scale.
bool same_latent_space(const VaeConfig& a, const VaeConfig& b) {
  return a.latent_channels == b.latent_channels && a.scaling_factor == b.scaling_factor &&
         a.block_out_channels.size() == b.block_out_channels.size();
}

}  // namespace

void StableDiffusion::use_vae(const std::string& path) {
  auto source = std::make_shared<ModelSource>(ModelSource::open_vae(path, require(*vae_source_, "vae").config_json));
  const ModelComponent& component = require(*source, "vae");
  const VaeConfig given = VaeConfig::detect(component), &own = vae_.config();
  HD_CHECK(same_latent_space(given, own), path, ": this VAE's latents (", given.latent_channels, " channels scaled by ", given.scaling_factor, " at 1/",
           int64_t(1) << (given.block_out_channels.size() - 1), " of the image) are not the model's (",
           own.latent_channels, " scaled by ", own.scaling_factor, " at 1/", vae_scale_factor(), ")");
  vae_ = Vae::load(component, vae_placement(given, arch_.family, placement()));
  vae_bf16_.reset();
  vae_source_ = std::move(source);
}

void StableDiffusion::check_same_latent_space(const StableDiffusion& other) const {
  const VaeConfig &a = vae_.config(), &b = other.vae_.config();
  HD_CHECK(unet_.config().in_channels == other.unet_.config().in_channels && same_latent_space(a, b),
           "the two models' latents live in different spaces (", a.latent_channels, " channels scaled by ",
           a.scaling_factor, " at 1/", vae_scale_factor(), " of the image, against ", b.latent_channels, " scaled by ",
           b.scaling_factor, " at 1/", other.vae_scale_factor(), "): one cannot take over the other's latents");
}

StableDiffusion StableDiffusion::load(const std::string& model_path,
                                      const std::optional<std::string>& vocab_dir,
                                      const std::optional<std::string>& config_folder,
                                      const ops::Placement& placement, std::span<const LoraChoice> loras) {
  placement.validate();
  StableDiffusion sd;
  sd.source_ = std::make_shared<ModelSource>(config_folder ? ModelSource::open(model_path, *config_folder)
                                                           : ModelSource::open(model_path));
  ModelSource& source = *sd.source_;
  for (const LoraChoice& lora : loras) source.add_lora(lora);
  {
    // A GPU's driver and context take 0.3 s to start (H100 machine); meanwhile a side thread maps the
    // checkpoint's pages in, until the device is ready, so that loading them takes no page faults. (Not
    // for the CPU: its loading releases each tensor's pages as it goes, keeping resident memory to the
    // f32 weights.)
    std::atomic<bool> device_ready = false;
    auto populated = std::async(std::launch::async, [&] {
      if (!placement.device.is_gpu()) return;
      for (const auto& file : source.files()) file->populate_pages([&] { return !device_ready.load(); });
    });
    try {
      ops::prepare_device(placement.device);
    } catch (...) {
      device_ready = true;  // the future's destructor waits for the thread
      throw;
    }
    device_ready = true;
    populated.get();
  }
  // cuDNN and cuBLASLt start while the weights load (this scope waits for them at its end).
  const ops::LibraryWarmUp libraries(placement.device);
  sd.arch_ = detect_architecture(source);
  if (sd.arch_.family == ModelFamily::kSDXL) {
    // A single file without configs gets SDXL's (as diffusers' from_single_file infers them), not the
    // SD1.x defaults: the VAE's scaling factor, and the sizes the default image size comes from.
    source.default_config("vae", R"({"scaling_factor": 0.13025, "sample_size": 1024})");
    source.default_config("unet", R"({"sample_size": 128})");
  }
  startup_mark("model opened");
  sd.text_ = TextConditioning::load(source, sd.arch_.family, vocab_dir, placement);
  startup_mark("text encoders loaded");
  sd.unet_ = Unet::load(require(source, "unet"), placement);
  startup_mark("UNet loaded");
  const ModelComponent& vae = require(source, "vae");
  sd.vae_ = Vae::load(vae, vae_placement(VaeConfig::detect(vae), sd.arch_.family, placement));
  startup_mark("VAE loaded");
  sd.vae_source_ = sd.source_;
  // A single file without a scheduler config gets SD's own schedule; its prediction type is what its
  // keys say (a v_pred key), else epsilon, unless the user says otherwise.
  if (source.scheduler_config()) {
    sd.scheduler_config_ = scheduler_config_from_json(*source.scheduler_config());
  } else if (sd.arch_.prediction == "v_prediction") {
    sd.scheduler_config_.prediction = Prediction::kVPrediction;
  }
  // A small GPU: when the weights take more than 60% of what the process may hold (the device's memory,
  // or --max-device-memory), the text encoders, needed only at each generation's start, wait in host
  // memory, leaving their room to the UNet's activations and the VAE decode (SDXL: 1.6 GB of 6.9).
  if (placement.device.is_gpu()) {
    const size_t held = ops::device_memory_in_use(placement.device), budget = ops::device_memory_budget(placement.device);
    if (budget > 0 && double(held) > 0.6 * double(budget)) sd.text_.keep_off_device(true);
  }
  const UnetConfig& u = sd.unet_.config();
  HD_CHECK(sd.text_.context_width() == u.context_dim, model_path, ": the text encoders' width ",
           sd.text_.context_width(), " does not match the UNet's context width ", u.context_dim);
  HD_CHECK(u.text_time() == (sd.text_.pooled_width() > 0), model_path,
           u.text_time() ? ": the UNet takes a pooled text embedding (SDXL's) that the text encoders do not give"
                         : ": the text encoders give a pooled embedding that the UNet does not take");
  if (u.text_time()) {
    // The ids after the pooled embedding, each addition_time_embed_dim wide: the base's six sizes, or
    // the refiner's five (sizes and the aesthetic score), as the weights say.
    const int64_t id_inputs = u.addition_embed_input_dim - sd.text_.pooled_width();
    const int64_t ids = id_inputs % u.addition_time_embed_dim == 0 ? id_inputs / u.addition_time_embed_dim : 0;
    HD_CHECK_KIND(ids == 5 || ids == 6, ErrorKind::kUnsupported, model_path, ": the UNet's add_embedding takes ",
                  u.addition_embed_input_dim, " inputs: the pooled embedding (", sd.text_.pooled_width(), ") and ",
                  id_inputs, " more, not the six size ids (SDXL base) or five ids with the aesthetic score (the ",
                  "refiner) of width ", u.addition_time_embed_dim);
    sd.micro_ = ids == 6 ? MicroConditioning::kSizes : MicroConditioning::kAestheticScore;
    // stabilityai's model_index.json files: true for the base (diffusers' default), false for the refiner.
    sd.force_zeros_for_empty_prompt_ = sd.micro_ == MicroConditioning::kSizes;
    if (const auto& index = source.model_index()) {
      const auto j = nlohmann::json::parse(*index, nullptr, false);
      HD_CHECK(!j.is_discarded() && j.is_object(), model_path, ": model_index.json is not a JSON object");
      const auto flag = [&](const char* key) -> std::optional<bool> {
        if (!j.contains(key)) return std::nullopt;
        HD_CHECK(j[key].is_boolean(), model_path, ": model_index.json's ", key, " is not true or false");
        return j[key].get<bool>();
      };
      sd.force_zeros_for_empty_prompt_ = flag("force_zeros_for_empty_prompt").value_or(sd.force_zeros_for_empty_prompt_);
      if (const auto aesthetic = flag("requires_aesthetics_score")) {
        HD_CHECK(*aesthetic == (sd.micro_ == MicroConditioning::kAestheticScore), model_path,
                 ": model_index.json says requires_aesthetics_score ", *aesthetic ? "true" : "false",
                 ", but the UNet's add_embedding takes ", ids, " ids (", *aesthetic ? "five" : "six", " expected)");
      }
    }
  }
  return sd;
}

std::string StableDiffusion::description() const {
  return family_name(arch_.family) + (micro_ == MicroConditioning::kAestheticScore ? " refiner" : "") +
         (scheduler_config_.prediction == Prediction::kVPrediction ? " (v_prediction)" : " (epsilon)");
}

UnetConditioning StableDiffusion::condition(const GenerationParams& p, bool guided) const {
  const int n = p.batch;
  PromptConditioning cond = text_.encode(p.prompt, n);
  UnetConditioning out;
  if (!guided) {
    out.context = std::move(cond.context);
    out.pooled = std::move(cond.pooled);
  } else {
    const PromptConditioning uncond = p.negative_prompt.empty() && force_zeros_for_empty_prompt_
                                          ? text_.zeros(n)
                                          : text_.encode(p.negative_prompt, n);
    // [unconditional; conditional], as diffusers concatenates them.
    const auto stacked = [&](const OwnedTensor& u, const OwnedTensor& c) {
      Shape shape = c.view().shape;
      shape[0] = 2 * n;
      OwnedTensor both = OwnedTensor::like(c, shape);
      ops::copy(u, both.view().slice(0, 0, n));
      ops::copy(c, both.view().slice(0, n, n));
      return both;
    };
    out.context = stacked(uncond.context, cond.context);
    if (text_.pooled_width() > 0) out.pooled = stacked(uncond.pooled, cond.pooled);
  }
  if (micro_ == MicroConditioning::kNone) return out;
  const std::vector<float> positive = micro_ids(p, false), negative = micro_ids(p, true);
  const int rows = guided ? 2 * n : n, width = int(positive.size());
  OwnedTensor ids(Shape{rows, width}, DType::kF32);
  for (int r = 0; r < rows; ++r) {
    const auto& row = guided && r < n ? negative : positive;
    std::copy(row.begin(), row.end(), ids.ptr<float>() + width * r);
  }
  out.time_ids = ops::place(ids, ops::Placement{placement().device, DType::kF32});
  return out;
}

std::vector<float> StableDiffusion::micro_ids(const GenerationParams& p, bool negative) const {
  // diffusers' defaults: the image's size, and (0, 0).
  const std::array<int, 2> image{p.height, p.width}, origin{0, 0};
  const SizeConditioning& s = p.sizes;
  if (micro_ == MicroConditioning::kAestheticScore) {
    // StableDiffusionXLImg2ImgPipeline with requires_aesthetics_score: original (h, w), crop (top, left),
    // score; the negative side's original size defaults to the positive one, its crop to (0, 0).
    const auto o = negative ? p.negative_sizes.original_size.value_or(s.original_size.value_or(image))
                            : s.original_size.value_or(image);
    const auto c = (negative ? p.negative_sizes.crop_top_left : s.crop_top_left).value_or(origin);
    const float score = negative ? p.negative_aesthetic_score.value_or(2.5f) : p.aesthetic_score.value_or(6.0f);
    return {float(o[0]), float(o[1]), float(c[0]), float(c[1]), score};
  }
  // The base: original (h, w), crop (top, left), target (h, w); the negative side has its own only when
  // both its sizes are given (StableDiffusionXLPipeline's rule, kept for img2img too, where diffusers'
  // StableDiffusionXLImg2ImgPipeline would pair the negative sizes with the positive crop).
  const SizeConditioning& side = negative && !p.negative_sizes.empty() ? p.negative_sizes : s;
  const auto o = side.original_size.value_or(image), c = side.crop_top_left.value_or(origin),
             t = side.target_size.value_or(image);
  return {float(o[0]), float(o[1]), float(c[0]), float(c[1]), float(t[0]), float(t[1])};
}

GenerationResult StableDiffusion::generate(const GenerationParams& p, const ProgressCallback& progress,
                                          const Tensor* init_image) const {
  const auto start = std::chrono::steady_clock::now();
  TorchCpuGenerator generator(p.seed);
  StageTimes times;
  OwnedTensor latents = denoise(p, generator, &times, DenoiseStart{init_image, nullptr, {}}, progress);
  return finish(p, std::move(latents), std::move(times), start);
}

std::unique_ptr<Sampler> StableDiffusion::sampler_for(const GenerationParams& p) const {
  SchedulerConfig config = scheduler_config_;
  if (p.spacing) config.spacing = *p.spacing;
  if (p.prediction) config.prediction = *p.prediction;
  return Sampler::create(p.sampler, p.schedule, config, p.steps);
}

StepRange StableDiffusion::steps_of(const GenerationParams& p, bool img2img) const {
  return denoising_steps(p, sampler_for(p)->timesteps(), scheduler_config_.num_train_timesteps, img2img);
}

StepRange StableDiffusion::step_range(const GenerationParams& p, bool img2img) const {
  return denoising_range(p, sampler_for(p)->timesteps(), scheduler_config_.num_train_timesteps, img2img);
}

GenerationResult StableDiffusion::finish(const GenerationParams& p, OwnedTensor latents, StageTimes times,
                                         std::chrono::steady_clock::time_point start,
                                         comm::ImageSplit* decode_split) const {
  const auto decoding_start = std::chrono::steady_clock::now();
  const Device& device = placement().device;
  const size_t held_before_decode = ops::mark_device_memory(device);

  OwnedTensor unscaled(latents.view().shape, DType::kF32);
  ops::scale(latents, 1.0f / vae_.config().scaling_factor, unscaled);
  DecodeReport report;
  startup_mark("decoding");
  OwnedTensor image = decode(unscaled, &report, p.vae_tiling, decode_split);
  startup_mark("decoded");
  // The count is read once: in the loop's condition it was recomputed for every value, which stores to
  // px could not be proven not to change (35 ms of a 1024x1024 decode's 62 on the H100 machine).
  float* px = image.ptr<float>();
  const int64_t values = image.view().numel();
  for (int64_t j = 0; j < values; ++j) px[j] = std::clamp(px[j] / 2.0f + 0.5f, 0.0f, 1.0f);
  times.decoding = ms_since(decoding_start);
  times.total = ms_since(start);
  const size_t decode_extra = ops::peak_device_memory(device, true) - held_before_decode;
  return GenerationResult{std::move(latents), std::move(image), report.retried_in_bf16, report.tiled, std::move(times),
                          decode_extra};
}

OwnedTensor StableDiffusion::decode(const Tensor& latents, DecodeReport* report, VaeTiling tiling,
                                    comm::ImageSplit* split) const {
  *report = {};
  if (split != nullptr) {
    HD_CHECK(tiling == VaeTiling::kAuto, "vae decode: an image split decodes whole strips, not tiles");
    HD_CHECK(latents.rank() == 4 && latents.dim(1) % split->strips() == 0, "vae decode: latents ",
             latents.shape.to_string(), " do not split into ", split->strips(), " strips of rows");
  }
  const auto decode_with = [&](const Vae& vae) {
    OwnedTensor picture;
    if (split != nullptr) {
      // Every rank holds the whole latents; the gathered strips are the whole picture on every rank, so
      // each sees the same overflow and all retry in bf16 together.
      const int64_t rows = latents.dim(1) / split->strips();
      OwnedTensor strip(Shape{latents.dim(0), rows, latents.dim(2), latents.dim(3)}, DType::kF32);
      ops::copy(latents.slice(1, split->index() * rows, rows), strip);
      picture = split->gather_strips(vae.decode(ops::place(strip, vae.placement()), split));
    } else {
      bool tiled = false;
      picture = decode_bounded(vae, latents, tiling, &tiled);
      report->tiled = report->tiled || tiled;
    }
    const bool on_host = picture.view().device.is_cpu() && picture.view().dtype == DType::kF32;
    return on_host ? std::move(picture) : ops::to_host_f32(picture);
  };
  OwnedTensor image = decode_with(vae_);
  const auto finite = [](const OwnedTensor& t) {
    const float* v = t.ptr<float>();
    return std::all_of(v, v + t.view().numel(), [](float x) { return std::isfinite(x); });
  };
  if (finite(image)) return image;
  // No picture of NaN leaves the engine: where nothing wider is left to try, it is an error.
  HD_CHECK_KIND(vae_.placement().dtype == DType::kF16, ErrorKind::kRuntime, "the VAE decode gave NaN or infinity in ",
                dtype_name(vae_.placement().dtype), " (are the latents finite?)");
  // f16 tops out at 65504; SDXL's VAE (and some fine-tunes) exceed it inside the decoder. bf16 has f32's
  // range: the same decode again, with the VAE's weights loaded a second time in bf16.
  if (!vae_bf16_) vae_bf16_ = Vae::load(require(*vae_source_, "vae"), ops::Placement{vae_.placement().device, DType::kBF16});
  report->retried_in_bf16 = true;
  image = decode_with(*vae_bf16_);
  HD_CHECK_KIND(finite(image), ErrorKind::kRuntime, "the VAE decode gave NaN or infinity in f16 and again in bf16 ",
                "(are the latents finite?)");
  return image;
}

}  // namespace hd
