// The engine's whole models as PyTorch classes, torch.classes.hipdiffusion.Unet and .Vae, built on a
// diffusers model's own weights (held, not copied: src/io/model_source.h's held_component): what
// hipdiffusion.diffusers.optimize(pipe, mode="engine") puts in place of the UNet's forward and the VAE's
// decode and encode. On a GPU the UNet runs as the engine's captured graphs (models/unet_graphs.h) on
// the engine's own stream, joined to PyTorch's current stream at both ends (EngineStreamScope); its
// activations live in the engine's memory, not PyTorch's caching allocator.
//
// Tensors are in the engine's layout ([N, H, W, C] images and latents, [N, L, C] tokens); the Python
// side adapts diffusers' NCHW tensors to it.
#include <torch/custom_class.h>
#include <torch/library.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "models/unet.h"
#include "models/unet_graphs.h"
#include "models/vae.h"
#include "ops/ops.h"
#include "pipeline/tiled_decode.h"
#include "torch_bridge.h"

namespace hd::torch_ext {

namespace {

// One of a model's tensors as the engine reads it: a convolution kernel [Cout, Cin, kh, kw] must be in
// channels_last memory, which is [Cout, kh, kw, Cin] dense (optimize puts the models there).
Tensor held_view(const std::string& model, const std::string& name, const at::Tensor& t) {
  if (t.dim() == 4) {
    TORCH_CHECK_VALUE(
        t.is_contiguous(at::MemoryFormat::ChannelsLast), "hipdiffusion.", model, ": convolution kernel '",
        name, "' is not in channels_last memory; call model.to(memory_format=torch.channels_last) first");
    return view_of(t.permute({0, 2, 3, 1}));
  }
  TORCH_CHECK_VALUE(t.is_contiguous(), "hipdiffusion.", model, ": tensor '", name, "' is not contiguous");
  return view_of(t);
}

// The engine's result as a new PyTorch tensor of `options` (the input's dtype and device): the one copy
// that hands it over.
at::Tensor handed_over(const Tensor& result, const at::TensorOptions& options) {
  at::Tensor out = at::empty(std::vector<int64_t>(result.shape.begin(), result.shape.end()), options);
  ops::copy(result, view_of(out));
  return out;
}

// The weights a model class holds on to (the engine's model only views them) and the component over them.
struct HeldWeights {
  std::vector<at::Tensor> tensors;
  ModelComponent component;
  ops::Placement placement;

  HeldWeights(const char* model, std::vector<std::string> names, std::vector<at::Tensor> weights,
              std::string config_json, bool ldm_names)
      : tensors(std::move(weights)) {
    TORCH_CHECK_VALUE(names.size() == tensors.size() && !names.empty(), "hipdiffusion.", model, ": ",
                      names.size(), " names for ", tensors.size(), " tensors");
    std::vector<std::pair<std::string, Tensor>> views;
    views.reserve(names.size());
    for (size_t i = 0; i < names.size(); ++i)
      views.emplace_back(names[i], held_view(model, names[i], tensors[i]));
    // Every tensor must be in the model's one dtype on its one device: the first tensor's (WeightReader
    // names any other as it loads).
    placement = ops::Placement{views.front().second.device, views.front().second.dtype};
    run_translating_errors(model, [&] {
      placement.validate();
      component = held_component(model, std::move(views), std::move(config_json), ldm_names);
    });
  }
};

class UnetModule final : public torch::CustomClassHolder {
 public:
  // ldm_names: the tensors carry the original (LDM) names, as ComfyUI's models hold them.
  UnetModule(std::vector<std::string> names, std::vector<at::Tensor> tensors, std::string config_json,
             bool ldm_names)
      : held_("unet", std::move(names), std::move(tensors), std::move(config_json), ldm_names) {
    run_translating_errors("unet", [&] { unet_.emplace(Unet::load(held_.component, held_.placement)); });
  }

  // sample [N, h, w, in] and context [N, L, D] in the model's dtype, timesteps f32 [N], SDXL's pooled text
  // embedding [N, P] (model dtype) and time ids f32 [N, k], all on the model's device -> [N, h, w, out].
  // text_embeds without time_ids: add_embedding's whole input, already joined (ComfyUI's `y`).
  at::Tensor forward(const at::Tensor& sample, const at::Tensor& timesteps, const at::Tensor& context,
                     const c10::optional<at::Tensor>& text_embeds,
                     const c10::optional<at::Tensor>& time_ids) {
    TORCH_CHECK_VALUE(text_embeds.has_value() || !time_ids.has_value(),
                      "hipdiffusion.unet: time_ids come with the pooled text_embeds (SDXL)");
    const at::Tensor s = sample.contiguous(), t = timesteps.contiguous(), c = context.contiguous();
    const c10::optional<at::Tensor> te =
        text_embeds ? c10::optional<at::Tensor>(text_embeds->contiguous()) : text_embeds;
    const c10::optional<at::Tensor> ti =
        time_ids ? c10::optional<at::Tensor>(time_ids->contiguous()) : time_ids;
    const std::lock_guard lock(mutex_);  // the graphs are one model's state
    at::Tensor out;
    run_translating_errors("unet", [&] {
      const EngineStreamScope scope(s);
      std::optional<TextTimeConditioning> added;
      if (te) added = TextTimeConditioning{view_of(*te), ti ? view_of(*ti) : Tensor{}};
      out =
          handed_over(graphs_.forward(*unet_, view_of(s), view_of(t), view_of(c), added ? &*added : nullptr),
                      s.options());
    });
    return out;
  }

  // Captured graphs held (one per input shape after its second call; none on the CPU).
  int64_t captured_count() const { return int64_t(graphs_.captured_count()); }

 private:
  HeldWeights held_;  // first: destroyed after the model that views it
  std::optional<Unet> unet_;
  UnetGraphs graphs_;
  std::mutex mutex_;
};

class VaeModule final : public torch::CustomClassHolder {
 public:
  VaeModule(std::vector<std::string> names, std::vector<at::Tensor> tensors, std::string config_json,
            bool ldm_names)
      : held_("vae", std::move(names), std::move(tensors), std::move(config_json), ldm_names) {
    run_translating_errors("vae", [&] { vae_.emplace(Vae::load(held_.component, held_.placement)); });
  }

  // Unscaled latents [N, h, w, c] in the model's dtype on its device -> image [N, H, W, 3] in [-1, 1],
  // the same dtype and device. Whole, or in exact tiles (the same picture, one tile's activations on the
  // device at a time) when the whole decode runs out of device memory.
  at::Tensor decode(const at::Tensor& latents) {
    const at::Tensor l = latents.contiguous();
    at::Tensor out;
    run_translating_errors("vae.decode", [&] {
      const EngineStreamScope scope(l);
      const OwnedTensor image = decode_bounded(*vae_, view_of(l), VaeTiling::kAuto);
      // The tiled decode's picture is host f32: placed where the model computes first.
      out = image.view().dtype == held_.placement.dtype
                ? handed_over(image, l.options())
                : handed_over(ops::place(image, held_.placement), l.options());
    });
    return out;
  }

  // image [N, H, W, 3] in [-1, 1] -> moments [N, h, w, 2c]: the latent distribution's mean, then its
  // log-variance (diffusers' DiagonalGaussianDistribution parameters, channels last).
  at::Tensor encode(const at::Tensor& image) {
    const at::Tensor x = image.contiguous();
    at::Tensor out;
    run_translating_errors("vae.encode", [&] {
      const EngineStreamScope scope(x);
      out = handed_over(vae_->encode(view_of(x)), x.options());
    });
    return out;
  }

 private:
  HeldWeights held_;
  std::optional<Vae> vae_;
};

}  // namespace

}  // namespace hd::torch_ext

TORCH_LIBRARY_FRAGMENT(hipdiffusion, m) {
  using hd::torch_ext::UnetModule;
  using hd::torch_ext::VaeModule;
  m.class_<UnetModule>("Unet")
      .def(torch::init<std::vector<std::string>, std::vector<at::Tensor>, std::string, bool>())
      .def("forward", &UnetModule::forward)
      .def("captured_count", &UnetModule::captured_count);
  m.class_<VaeModule>("Vae")
      .def(torch::init<std::vector<std::string>, std::vector<at::Tensor>, std::string, bool>())
      .def("decode", &VaeModule::decode)
      .def("encode", &VaeModule::encode);
}
