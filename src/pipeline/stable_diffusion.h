// Text-to-image with Stable Diffusion 1.x/2.x and SDXL on the CPU or a GPU, step for step as diffusers'
// StableDiffusionPipeline and StableDiffusionXLPipeline: prompt and negative prompt encoded (SDXL: by
// both text encoders, with the pooled embedding and the micro-conditioning ids), initial noise from
// torch's generator, classifier-free guidance ([unconditional, conditional] in one UNet batch, skipped
// at scale <= 1), the chosen sampler, and the VAE decode of latents / scaling_factor.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/image_split.h"
#include "core/tensor.h"
#include "io/model_source.h"
#include "models/architecture.h"
#include "models/unet.h"
#include "models/unet_graphs.h"
#include "models/vae.h"
#include "pipeline/denoising_run.h"
#include "pipeline/generation_params.h"
#include "pipeline/text_conditioning.h"
#include "pipeline/tiled_decode.h"
#include "sampling/noise_schedule.h"
#include "sampling/sampler.h"
#include "sampling/torch_rng.h"

namespace hd {

// What follows the pooled text embedding in the UNet's add_embedding (SDXL's micro-conditioning):
// nothing (SD1.x/2.x); the base's six size ids (original size, crop top-left, target size); or the
// refiner's five (original size, crop top-left, aesthetic score).
enum class MicroConditioning { kNone, kSizes, kAestheticScore };

struct GenerationResult {
  OwnedTensor latents;  // [N, h, w, 4], the final latents as diffusers returns them (before 1/scaling_factor)
  OwnedTensor image;    // [N, H, W, 3] in [0, 1]
  // The VAE overflowed in f16 (its output held NaN or infinity) and the image was decoded again in bf16.
  bool vae_retried_in_bf16 = false;
  bool vae_tiled = false;  // the image was decoded in tiles
  StageTimes times;
  // The most device memory the VAE decode needed on top of what was held before it (its activations and
  // scratch; a bf16 VAE when one is loaded for the retry): the decode's own peak. 0 on the CPU.
  size_t decode_extra_device_memory = 0;
};

struct DecodeReport {
  bool retried_in_bf16 = false;  // see GenerationResult
  bool tiled = false;
};

// Rows [first, first + rows) of a request's batch: what one GPU of several makes (data parallel). The
// noise is drawn for the whole batch and these rows taken, so the pictures are those of the whole batch.
struct BatchShare {
  int first = 0;
  int rows = 0;  // 0: the whole batch
};

// Where StableDiffusion::denoise starts: noise (neither), an init image, or latents an earlier expert
// handed over; and which rows of the batch it makes.
struct DenoiseStart {
  const Tensor* init_image = nullptr;
  const Tensor* handed = nullptr;
  BatchShare share;
};

class StableDiffusion {
 public:
  // A diffusers folder, or a single-file checkpoint (optionally described by a diffusers folder's
  // configs, `config_folder`, as diffusers' from_single_file(config=...)).
  // `placement`: where the models compute (the CPU in f32 by default; a GPU in f16 or bf16).
  // `loras`: LoRA files merged into the text encoders' and the UNet's weights as they load, in order
  // (ModelSource::add_lora), as diffusers' load_lora_weights + fuse_lora(lora_scale) would.
  static StableDiffusion load(const std::string& model_path, const std::optional<std::string>& vocab_dir,
                              const std::optional<std::string>& config_folder = std::nullopt,
                              const ops::Placement& placement = {}, std::span<const LoraChoice> loras = {});
  // The LoRAs merged into the weights, in order.
  const std::vector<LoraChoice>& loras() const { return source_->loras(); }
  const ops::Placement& placement() const { return unet_.placement(); }
  // Replaces the VAE with the one at `path` (ModelSource::open_vae: a VAE folder or file, e.g.
  // madebyollin/sdxl-vae-fp16-fix), as diffusers' vae=AutoencoderKL.from_pretrained(...). It must share
  // the model's latent space (channels, scale, scaling factor; a lone file takes the model's VAE config).
  void use_vae(const std::string& path);
  // The VAE computes in bf16 where the model computes in f16: an SDXL VAE whose config says force_upcast
  // (diffusers runs it in f32; bf16 has f32's range).
  bool vae_upcast() const { return vae_.placement().dtype != placement().dtype; }
  const VaeConfig& vae_config() const { return vae_.config(); }

  const SchedulerConfig& scheduler_config() const { return scheduler_config_; }
  int64_t vae_scale_factor() const { return int64_t(1) << (vae_.config().block_out_channels.size() - 1); }
  std::string description() const;  // "SD1.x (epsilon)", "SDXL refiner (epsilon)"
  ModelFamily family() const { return arch_.family; }
  // The text encoders' weights wait in host memory between generations (a GPU short of memory for the
  // whole model); each generation moves them to the device to encode, then back.
  bool text_encoders_off_device() const { return text_.kept_off_device(); }
  // CFG parallel: from now on this model computes one half of each guided step's UNet batch (rank 0 of
  // `pair` the unconditional rows, rank 1 the conditional) and gathers the other half from the other
  // rank, whose model (the same weights on its own device) does the same steps in lockstep. nullptr
  // ends it. The pair must outlive the setting. Batching runs together is not combined with it.
  void split_guidance(comm::Communicator* pair);
  // Image split: from now on each step of a lone run computes this rank's strip of the latent (strip
  // split->index() of split->strips(), rows in image order) for every row of the UNet batch, the strips
  // exchanging what crosses their edges inside the UNet (comm::ImageSplit), and gathers the other strips
  // of the prediction; every rank of the split runs the same steps in lockstep, each holding the whole
  // latents. With split_guidance's pair as well, the rows are this rank's half of each guided batch (CFG
  // parallel x image split). nullptr ends it. The split must outlive the setting. `displaced_from`: the
  // step of a run (counted from its first) from which the split is displaced (DistriFusion: the other
  // strips' values of the step before; the split must keep its sites); -1: exact throughout.
  void split_image(comm::ImageSplit* split, int displaced_from = -1);
  // The picture height an image split over `strips` ranks needs a multiple of, in pixels: each strip's
  // latent rows a multiple of the UNet's downsampling factor.
  int64_t split_height_multiple(int strips) const {
    return int64_t(strips) * unet_.split_row_multiple() * vae_scale_factor();
  }
  // The picture size the model was trained for, as diffusers picks it: the UNet's sample_size times the
  // VAE's scale factor (512 for SD1.x and the shapes model's 64).
  int default_image_size() const { return int(unet_.config().sample_size * vae_scale_factor()); }

  // The refiner's conditioning: diffusers' StableDiffusionXLImg2ImgPipeline with requires_aesthetics_score.
  MicroConditioning micro_conditioning() const { return micro_; }
  // `validate` and the model's own rules: size conditioning for SDXL only, aesthetic scores for a refiner
  // only, a refiner (which has no target size) given an image or latents to refine.
  void validate(const GenerationParams& p, bool refines) const;
  // Latents of this model and `other` live in the same space (an ensemble's base and refiner): the same
  // channels and scaling factor. Throws otherwise.
  void check_same_latent_space(const StableDiffusion& other) const;

  // txt2img, or img2img from `init_image` [1, H, W, 3] in [-1, 1] (H, W = params.height, width) as
  // diffusers' StableDiffusionImg2ImgPipeline: the image's latent sampled from the VAE's moments with the
  // generator, noised to the step that `strength` starts at, denoised from there.
  GenerationResult generate(const GenerationParams& params, const ProgressCallback& progress = {},
                            const Tensor* init_image = nullptr) const;

  // What generate does before the decode, for one expert of an ensemble: the final latents [N, h, w, 4]
  // (host f32, before 1/scaling_factor) of the steps that `params` leaves this model (denoising_start,
  // denoising_end), drawing from `generator`, which goes on to the next expert. Starts from noise, from
  // `init_image` (img2img), or from `handed` latents [N, h, w, 4] (with params.denoising_start: not
  // noised again, as diffusers' add_noise=False). Adds its stages to *times; `progress` gets the steps
  // done and in all, both offset by `progress_offset` (the earlier experts' steps).
  OwnedTensor denoise(const GenerationParams& params, TorchCpuGenerator& generator, StageTimes* times,
                      const DenoiseStart& start = {}, const ProgressCallback& progress = {}) const;
  // The first half of `denoise`: the run checked, its prompt encoded and its starting latents made, ready
  // for `step`. `generator` must outlive the run (it draws the ancestral samplers' noise at each step).
  DenoisingRun start_denoising(const GenerationParams& params, TorchCpuGenerator& generator,
                               const DenoiseStart& start = {}, ProgressCallback progress = {}) const;
  // The next step of each of `runs` (runs of this model, not done, each batches_with the first) in one
  // UNet batch; each run's sampler then advances its latents and its progress callback is called.
  void step(std::span<DenoisingRun* const> runs) const;
  // The steps `denoise` would run for `params`.
  StepRange steps_of(const GenerationParams& params, bool img2img) const;
  // The same, empty rather than an error when the denoising start or end leaves no step.
  StepRange step_range(const GenerationParams& params, bool img2img) const;
  // The image of final latents (as denoise returns them): decoded, in [0, 1]; stage times completed.
  // With `decode_split` (every rank of its group holding the same latents), each rank decodes its strip
  // and every rank gets the whole picture (see decode).
  GenerationResult finish(const GenerationParams& params, OwnedTensor latents, StageTimes times,
                          std::chrono::steady_clock::time_point start, comm::ImageSplit* decode_split = nullptr) const;

  // The VAE decode of host f32 latents [N, h, w, 4] (already divided by scaling_factor) into a host f32
  // image [N, H, W, 3] in about [-1, 1]. On a GPU in f16, an output holding NaN or infinity (f16 overflow
  // inside the decoder) is decoded again with the VAE in bf16. In tiles of the VAE's sample_size (with a
  // quarter overlap) always, or when the whole decode runs out of device memory. *report says what happened.
  // With `split` (tiling kAuto only; the latent's height a multiple of its strips): this rank decodes its
  // strip of the latents' rows, exchanging with the others (Vae::decode), and the image's strips are
  // gathered: no tiles (each device holds a strip's activations; running out of memory is an error).
  OwnedTensor decode(const Tensor& latents, DecodeReport* report, VaeTiling tiling = VaeTiling::kAuto,
                     comm::ImageSplit* split = nullptr) const;

 private:
  // The UNet's conditioning for a batch of n ([unconditional; conditional] when guided).
  UnetConditioning condition(const GenerationParams& p, bool guided) const;
  // The sampler of `p` (the model's scheduler config, with p's spacing and prediction type).
  std::unique_ptr<Sampler> sampler_for(const GenerationParams& p) const;
  // One guided step of a lone run on a CFG-parallel pair: the UNet's prediction for both halves.
  OwnedTensor split_guidance_step(DenoisingRun& run) const;
  // One step of a lone run on an image split: the UNet's prediction for the whole latent.
  OwnedTensor split_image_step(DenoisingRun& run) const;
  // The micro-conditioning ids of one side (rows of the UNet's time_ids).
  std::vector<float> micro_ids(const GenerationParams& p, bool negative) const;

  ArchitectureInfo arch_;
  TextConditioning text_;
  bool force_zeros_for_empty_prompt_ = false;  // SDXL: an empty negative prompt is zeros, not encoded
  MicroConditioning micro_ = MicroConditioning::kNone;
  Unet unet_;
  Vae vae_;
  comm::Communicator* guidance_pair_ = nullptr;  // split_guidance's
  comm::ImageSplit* image_split_ = nullptr;  // split_image's
  int displaced_from_ = -1;
  mutable UnetGraphs unet_graphs_;        // on a GPU, the denoising loop replays a captured UNet
  mutable std::optional<Vae> vae_bf16_;   // loaded on the first f16 overflow
  std::shared_ptr<ModelSource> source_;
  std::shared_ptr<ModelSource> vae_source_;  // the VAE's (the model's, or --vae's), kept mapped for that reload
  SchedulerConfig scheduler_config_;
};

}  // namespace hd
