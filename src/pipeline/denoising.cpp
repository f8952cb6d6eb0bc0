// StableDiffusion's denoising loop as runs and steps (denoising_run.h): start_denoising does what comes
// before the loop, step does one iteration for one run or for several in one UNet batch, denoise loops.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/layout.h"
#include "core/startup_trace.h"
#include "ops/ops.h"
#include "pipeline/denoising_run.h"
#include "pipeline/stable_diffusion.h"

namespace hd {

namespace {

// torch.randn([n, c, h, w]) from `generator`, stored NHWC: the draw order is diffusers' NCHW order.
OwnedTensor randn_nhwc(TorchCpuGenerator& generator, int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<float> nchw(size_t(n * c * h * w));
  generator.randn(nchw.data(), int64_t(nchw.size()));
  OwnedTensor out(Shape{n, h, w, c}, DType::kF32);
  nchw_to_nhwc(nchw.data(), out.ptr<float>(), n, c, h, w);
  return out;
}

// Rows [offset, offset + rows) of a batch tensor.
Tensor rows_of(const Tensor& t, int64_t offset, int64_t rows) {
  return t.slice(0, offset, rows);
}

// Noise [rows, h, w, c] for rows [first, first + rows) of a batch of `drawn`: the whole batch's draw, so
// that a share of the batch gets the numbers the whole batch would.
OwnedTensor randn_rows(TorchCpuGenerator& generator, int64_t drawn, int64_t first, int64_t rows, int64_t c,
                       int64_t h, int64_t w) {
  OwnedTensor all = randn_nhwc(generator, drawn, c, h, w);
  if (rows == drawn) return all;
  OwnedTensor share(Shape{rows, h, w, c}, DType::kF32);
  ops::copy(rows_of(all, first, rows), share);
  return share;
}

}  // namespace

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool DenoisingRun::batches_with(const DenoisingRun& other) const {
  return model_ == other.model_ && height_ == other.height_ && width_ == other.width_ &&
         conditioning_.context.view().dim(1) == other.conditioning_.context.view().dim(1) &&
         added_.has_value() == other.added_.has_value();
}

OwnedTensor DenoisingRun::take_latents(StageTimes* times) {
  HD_CHECK(done(), "the denoising run has ", steps_total() - steps_done(), " steps left");
  const auto start = std::chrono::steady_clock::now();
  OwnedTensor latents = ops::to_host_f32(sample_);
  times_.denoising += ms_since(start);
  times->text_encoding += times_.text_encoding;
  times->denoising += times_.denoising;
  times->steps.insert(times->steps.end(), times_.steps.begin(), times_.steps.end());
  return latents;
}

DenoisingRun StableDiffusion::start_denoising(const GenerationParams& p, TorchCpuGenerator& generator,
                                              const DenoiseStart& from, ProgressCallback progress) const {
  validate(p, from.init_image != nullptr || from.handed != nullptr);
  HD_CHECK(from.init_image == nullptr || from.handed == nullptr,
           "an init image and handed-over latents are two starts");
  HD_CHECK(p.denoising_start.has_value() == (from.handed != nullptr),
           p.denoising_start
               ? "a denoising start continues from the latents an earlier model handed over; none were given"
               : "latents handed over by an earlier model need the denoising start they were handed at");
  const auto start = std::chrono::steady_clock::now();
  DenoisingRun run;
  run.model_ = this;
  run.params_ = p;
  run.generator_ = &generator;
  run.progress_ = std::move(progress);
  run.sampler_ = sampler_for(p);
  run.range_ = denoising_steps(p, run.sampler_->timesteps(), scheduler_config_.num_train_timesteps,
                               from.init_image != nullptr);
  run.next_ = run.range_.first;
  run.guided_ = guided(p);
  const BatchShare& share = from.share;
  HD_CHECK(share.rows == 0 || (share.first >= 0 && share.rows > 0 && share.first + share.rows <= p.batch),
           "rows ", share.first, " to ", share.first + share.rows, " are not a share of a batch of ", p.batch);
  const int64_t n = share.rows == 0 ? p.batch : share.rows, c = unet_.config().in_channels;
  const int64_t h = p.height / vae_scale_factor(), w = p.width / vae_scale_factor();
  run.batch_ = n, run.height_ = h, run.width_ = w, run.channels_ = c;
  run.first_row_ = share.first, run.drawn_rows_ = p.batch;
  if (guidance_pair_ != nullptr && run.guided_)
    HD_CHECK_KIND(guidance_pair_->size() == 2, ErrorKind::kInternal, "CFG parallel takes a pair of ranks");
  if (image_split_ != nullptr) {
    const int strips = image_split_->strips();
    HD_CHECK(p.height % split_height_multiple(strips) == 0, "an image split into ", strips,
             " strips needs a height that is a multiple of ", split_height_multiple(strips), " pixels, not ",
             p.height);
  }
  if (from.init_image != nullptr) {
    const Tensor& image = *from.init_image;
    HD_CHECK(image.rank() == 4 && image.dim(0) == 1 && image.dim(1) == p.height && image.dim(2) == p.width &&
                 image.dim(3) == 3,
             "init image ", image.shape.to_string(), " must be [1, ", p.height, ", ", p.width, ", 3]");
  }
  if (from.handed != nullptr) {
    const Tensor& l = *from.handed;
    HD_CHECK(l.rank() == 4 && l.dim(0) == n && l.dim(1) == h && l.dim(2) == w && l.dim(3) == c &&
                 l.dtype == DType::kF32 && l.device.is_cpu(),
             "handed-over latents ", l.describe(), " must be host f32 [", n, ", ", h, ", ", w, ", ", c, "]");
  }

  GenerationParams rows_params = p;
  rows_params.batch = int(n);
  run.conditioning_ = condition(rows_params, run.guided_);
  if (micro_ != MicroConditioning::kNone)
    run.added_ = TextTimeConditioning{run.conditioning_.pooled, run.conditioning_.time_ids};
  const Device& device = placement().device;
  ops::synchronize(device);
  run.times_.text_encoding += ms_since(start);
  const auto denoising_start = std::chrono::steady_clock::now();

  OwnedTensor latents;
  if (from.handed != nullptr) {
    // Already at the noise level of the step it was handed over at (diffusers: add_noise=False).
    latents = OwnedTensor(from.handed->shape, DType::kF32);
    ops::copy(*from.handed, latents);
  } else if (from.init_image == nullptr) {
    latents = randn_rows(generator, p.batch, share.first, n, c, h, w);
    ops::scale(latents, run.sampler_->init_noise_sigma(), latents);
  } else {
    // The image's latent: a sample of the VAE's Gaussian, mean + exp(logvar / 2) * noise, scaled.
    // [1, h, w, 2c]: mean, then log-variance
    const OwnedTensor moments = ops::to_host_f32(vae_.encode(ops::place(*from.init_image, vae_.placement())));
    const OwnedTensor eps = randn_nhwc(generator, 1, c, h, w);
    const float* m = moments.ptr<float>();
    OwnedTensor init(Shape{n, h, w, c}, DType::kF32);
    for (int64_t pix = 0; pix < h * w; ++pix) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const float mean = m[pix * 2 * c + ch], logvar = std::clamp(m[pix * 2 * c + c + ch], -30.0f, 20.0f);
        const float sample = mean + std::exp(0.5f * logvar) * eps.ptr<float>()[pix * c + ch];
        for (int64_t b = 0; b < n; ++b)
          init.ptr<float>()[(b * h * w + pix) * c + ch] = vae_.config().scaling_factor * sample;
      }
    }
    const OwnedTensor noise = randn_rows(generator, p.batch, share.first, n, c, h, w);
    latents = OwnedTensor(init.view().shape, DType::kF32);
    run.sampler_->add_noise(run.range_.first, init.ptr<float>(), noise.ptr<float>(), latents.ptr<float>(),
                            init.view().numel());
  }
  // The denoising loop runs where the UNet computes: the latents stay there in f32 between steps, the
  // model's input and each sampler step (guidance included) are one op each (ops::sampler_input,
  // ops::sampler_step); only the ancestral samplers' noise comes from the host, from the same generator
  // as diffusers' CPU one.
  run.sample_ = ops::place(latents, ops::Placement{device, DType::kF32});
  run.times_.denoising += ms_since(denoising_start);
  return run;
}

void StableDiffusion::step(std::span<DenoisingRun* const> runs) const {
  HD_CHECK(!runs.empty(), "a denoising step needs at least one run");
  for (const DenoisingRun* run : runs) {
    HD_CHECK(run->model_ == this, "a denoising run steps with the model that started it");
    HD_CHECK(!run->done(), "a denoising run that is done has no step left");
    HD_CHECK(run->batches_with(*runs[0]), "denoising runs of ", run->params_.width, "x", run->params_.height,
             " and ", runs[0]->params_.width, "x", runs[0]->params_.height,
             " (or of other context lengths) do not share a UNet batch");
  }
  const auto step_start = std::chrono::steady_clock::now();
  const Device& device = placement().device;
  OwnedTensor prediction;
  HD_CHECK_KIND(runs.size() == 1 || (guidance_pair_ == nullptr && image_split_ == nullptr), ErrorKind::kUnsupported,
                "CFG parallel and the image split step one run at a time: runs are not batched together on them");
  if (runs.size() == 1 && image_split_ != nullptr) {
    prediction = split_image_step(*runs[0]);
  } else if (runs.size() == 1 && guidance_pair_ != nullptr && runs[0]->guided_) {
    prediction = split_guidance_step(*runs[0]);
  } else if (runs.size() == 1) {
    // Alone: its own input buffer and its one timestep, as the loop always ran.
    DenoisingRun& r = *runs[0];
    if (r.model_input_.view().data == nullptr)
      r.model_input_ =
          OwnedTensor(Shape{r.rows(), r.height_, r.width_, r.channels_}, placement().dtype, device);
    ops::sampler_input(r.sample_, r.sampler_->input_divisor(r.next_), r.model_input_);
    prediction = unet_graphs_.forward(unet_, r.model_input_, r.sampler_->timestep(r.next_),
                                      r.conditioning_.context, r.added_ ? &*r.added_ : nullptr);
  } else {
    // Together: every run's rows in one batch, each with its own timestep and conditioning.
    const DenoisingRun& first = *runs[0];
    int64_t rows = 0;
    for (const DenoisingRun* r : runs) rows += r->rows();
    const auto batch_of = [&](const OwnedTensor& t) {
      Shape shape = t.view().shape;
      shape[0] = rows;
      return OwnedTensor::like(t, shape);
    };
    OwnedTensor input(Shape{rows, first.height_, first.width_, first.channels_}, placement().dtype, device);
    OwnedTensor timesteps(Shape{rows}, DType::kF32);
    OwnedTensor context = batch_of(first.conditioning_.context), pooled, time_ids;
    if (first.added_)
      pooled = batch_of(first.conditioning_.pooled), time_ids = batch_of(first.conditioning_.time_ids);
    int64_t offset = 0;
    for (const DenoisingRun* r : runs) {
      const int64_t n = r->rows();
      ops::sampler_input(r->sample_, r->sampler_->input_divisor(r->next_), rows_of(input, offset, n));
      std::fill_n(timesteps.ptr<float>() + offset, n, r->sampler_->timestep(r->next_));
      ops::copy(r->conditioning_.context, rows_of(context, offset, n));
      if (r->added_) {
        ops::copy(r->conditioning_.pooled, rows_of(pooled, offset, n));
        ops::copy(r->conditioning_.time_ids, rows_of(time_ids, offset, n));
      }
      offset += n;
    }
    const TextTimeConditioning added{pooled.view(), time_ids.view()};
    prediction = unet_graphs_.forward(unet_, input, timesteps, context, first.added_ ? &added : nullptr);
  }

  int64_t offset = 0;
  for (DenoisingRun* run : runs) {
    DenoisingRun& r = *run;
    const int i = r.next_;
    ops::SamplerUpdate update = r.sampler_->update(i);
    if (r.guided_) update.guidance_scale = r.params_.cfg_scale;
    OwnedTensor noise;
    if (update.adds_noise())
        noise = ops::place(randn_rows(*r.generator_, r.drawn_rows_, r.first_row_, r.batch_, r.channels_, r.height_,
                                    r.width_),
                         ops::Placement{device, DType::kF32});
    if (update.writes_x0()) {
      if (r.x0_.view().data == nullptr) {
        r.x0_ = OwnedTensor(r.sample_.view().shape, DType::kF32, device);
        r.previous_x0_ = OwnedTensor(r.sample_.view().shape, DType::kF32, device);
      }
      std::swap(r.x0_, r.previous_x0_);  // this step's x0 is written over the one of two steps ago
    }
    const Tensor noise_view = noise.view(), previous_view = r.previous_x0_.view(), x0_view = r.x0_.view();
    ops::sampler_step(update, rows_of(prediction, offset, r.rows()), r.sample_, &noise_view, &previous_view,
                      &x0_view);
    offset += r.rows();
    ++r.next_;
    if (i < r.range_.first + 2) startup_mark(str_cat("step ", i + 1 - r.range_.first, " queued"));
  }
  const bool report = std::any_of(runs.begin(), runs.end(), [](const DenoisingRun* r) {
    return r->progress_ || r->params_.time_each_step;
  });
  if (report) ops::synchronize(device);  // report a step when it has run, not when it was queued
  const double step_ms = ms_since(step_start);
  for (DenoisingRun* r : runs) {
    r->times_.denoising += step_ms;
    if (!report) continue;
    r->times_.steps.push_back(step_ms);
    if (r->progress_) r->progress_(r->steps_done(), r->steps_total());
    if (r->steps_done() <= 2) startup_mark(str_cat("step ", r->steps_done(), " done"));
  }
}

void StableDiffusion::split_guidance(comm::Communicator* pair) {
  if (pair != nullptr) {
    HD_CHECK(pair->size() == 2, "CFG parallel splits a guided batch over 2 ranks, not ", pair->size());
    HD_CHECK(pair->device() == placement().device, "CFG parallel: the pair's rank ", pair->rank(), " is on ",
             pair->device().to_string(), ", the model on ", placement().device.to_string());
  }
  guidance_pair_ = pair;
}

OwnedTensor StableDiffusion::split_guidance_step(DenoisingRun& r) const {
  // This rank's half: rank 0 the unconditional rows, rank 1 the conditional, each the run's whole batch
  // with the same input; then both halves on both ranks, in diffusers' order, for the guidance formula.
  comm::Communicator& pair = *guidance_pair_;
  const Device& device = placement().device;
  const int64_t n = r.batch_, offset = pair.rank() * n;
  if (r.model_input_.view().data == nullptr)
    r.model_input_ = OwnedTensor(Shape{n, r.height_, r.width_, r.channels_}, placement().dtype, device);
  ops::sampler_input(r.sample_, r.sampler_->input_divisor(r.next_), r.model_input_);
  std::optional<TextTimeConditioning> added;
  if (r.added_)
    added = TextTimeConditioning{rows_of(r.conditioning_.pooled, offset, n), rows_of(r.conditioning_.time_ids, offset, n)};
  const OwnedTensor half = unet_graphs_.forward(unet_, r.model_input_, r.sampler_->timestep(r.next_),
                                                rows_of(r.conditioning_.context, offset, n), added ? &*added : nullptr);
  Shape both_shape = half.view().shape;
  both_shape[0] = 2 * n;
  OwnedTensor both = OwnedTensor::like(half, both_shape);
  pair.all_gather(half, both);
  return both;
}

void StableDiffusion::split_image(comm::ImageSplit* split, int displaced_from) {
  if (split != nullptr) {
    HD_CHECK(split->group().device() == placement().device, "image split: strip ", split->index(), " is on ",
             split->group().device().to_string(), ", the model on ", placement().device.to_string());
  }
  image_split_ = split;
  displaced_from_ = split != nullptr ? displaced_from : -1;
}

OwnedTensor StableDiffusion::split_image_step(DenoisingRun& r) const {
  // Every rank holds the whole latents and the whole model input; the UNet runs on this rank's rows of
  // it, and the prediction's strips are gathered for the sampler step, which every rank takes alike. With
  // a guidance pair too, the rows are this rank's half of the guided batch (as split_guidance_step), and
  // the pair gathers the halves after the strips.
  comm::ImageSplit& split = *image_split_;
  split.set_displaced(displaced_from_ >= 0 && r.steps_done() >= displaced_from_);
  const bool halves = guidance_pair_ != nullptr && r.guided_;
  const Device& device = placement().device;
  const int64_t n = r.batch_, rows = halves ? n : r.rows(), offset = halves ? guidance_pair_->rank() * n : 0;
  const int64_t h = r.height_ / split.strips();
  if (r.model_input_.view().data == nullptr)
    r.model_input_ = OwnedTensor(Shape{rows, r.height_, r.width_, r.channels_}, placement().dtype, device);
  ops::sampler_input(r.sample_, r.sampler_->input_divisor(r.next_), r.model_input_);
  OwnedTensor strip(Shape{rows, h, r.width_, r.channels_}, placement().dtype, device);
  ops::copy(r.model_input_.view().slice(1, split.index() * h, h), strip);
  std::optional<TextTimeConditioning> added;
  if (r.added_)
    added = halves ? TextTimeConditioning{rows_of(r.conditioning_.pooled, offset, n),
                                          rows_of(r.conditioning_.time_ids, offset, n)}
                   : *r.added_;
  const Tensor context = halves ? rows_of(r.conditioning_.context, offset, n) : r.conditioning_.context.view();
  const OwnedTensor part = unet_graphs_.forward(unet_, strip, r.sampler_->timestep(r.next_), context,
                                                added ? &*added : nullptr, &split);
  OwnedTensor whole = split.gather_strips(part);
  if (!halves) return whole;
  Shape both_shape = whole.view().shape;
  both_shape[0] = 2 * n;
  OwnedTensor both = OwnedTensor::like(whole, both_shape);
  guidance_pair_->all_gather(whole, both);
  return both;
}

OwnedTensor StableDiffusion::denoise(const GenerationParams& params, TorchCpuGenerator& generator,
                                     StageTimes* times, const DenoiseStart& start,
                                     const ProgressCallback& progress) const {
  DenoisingRun run = start_denoising(params, generator, start, progress);
  DenoisingRun* const alone[] = {&run};
  while (!run.done()) step(alone);
  return run.take_latents(times);
}

}  // namespace hd
