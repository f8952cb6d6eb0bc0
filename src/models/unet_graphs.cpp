#include "models/unet_graphs.h"

#include <algorithm>
#include <utility>

#include "comm/image_split.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/profiler.h"

namespace hd {

namespace {

// Unet::forward with timesteps from anywhere: copied to the model's device when they are elsewhere.
OwnedTensor plain_forward(const Unet& unet, const Tensor& sample, const Tensor& timesteps,
                          const Tensor& context, const TextTimeConditioning* added, comm::ImageSplit* split) {
  const Device& device = unet.placement().device;
  if (timesteps.device == device) return unet.forward(sample, timesteps, context, added, split);
  OwnedTensor on_device(timesteps.shape, timesteps.dtype, device);
  ops::copy(timesteps, on_device);
  return unet.forward(sample, on_device, context, added, split);
}

}  // namespace

OwnedTensor UnetGraphs::forward(const Unet& unet, const Tensor& sample, float timestep, const Tensor& context,
                                const TextTimeConditioning* added, comm::ImageSplit* split) {
  HD_CHECK(sample.rank() >= 1, "unet: sample ", sample.shape.to_string(), " has no batch dimension");
  OwnedTensor t(Shape{sample.dim(0)}, DType::kF32);
  for (int64_t i = 0; i < sample.dim(0); ++i) t.ptr<float>()[i] = timestep;
  return forward(unet, sample, t, context, added, split);
}

OwnedTensor UnetGraphs::forward(const Unet& unet, const Tensor& sample, const Tensor& timesteps,
                                const Tensor& context, const TextTimeConditioning* added,
                                comm::ImageSplit* split) {
  const Device& device = unet.placement().device;
  // Profiling times op by op, which a replayed graph cannot show: plain forwards then (as on the CPU).
  if (device.is_cpu() || sample.rank() != 4 || context.rank() != 3 || ops::profiling())
    return plain_forward(unet, sample, timesteps, context, added, split);
  // The text-time inputs' widths are the model's: their presence and the number of ids complete the key.
  const bool inputs_ok = (added == nullptr || added->joined() || added->time_ids.rank() == 2) &&
                         timesteps.shape == Shape{sample.dim(0)} && timesteps.dtype == DType::kF32;
  if (!inputs_ok)
    return plain_forward(unet, sample, timesteps, context, added, split);  // which reports the bad shape
  const int64_t ids = added == nullptr ? 0 : added->joined() ? -1 : added->time_ids.dim(1);
  // A split's graph differs with its sites kept (written at every exchange) and with displaced exchanges.
  const Key key{sample.dim(0), sample.dim(1), sample.dim(2), context.dim(1), ids,
                split ? 4 * split->strips() + (split->keeps_sites() ? 2 : 0) + (split->displaced() ? 1 : 0) : 0};
  const Tensor& t = timesteps;

  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // The first forward of a shape tunes its kernels (which cannot happen inside a capture); capturing
    // waits for the second, so that a one-off call (a single step, a test) costs no capture.
    if (forwards_[key]++ == 0) return plain_forward(unet, sample, timesteps, context, added, split);
    // Each graph keeps its activations (about 1 GiB for SD1.5 at 512x512): a process that sees many
    // shapes (a server), or a split that goes displaced, keeps the few it replayed last.
    constexpr size_t kMaxGraphs = 4;
    if (graphs_.size() >= kMaxGraphs)
      graphs_.erase(std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
        return a.second->last_use < b.second->last_use;
      }));
    auto c = std::make_unique<Captured>();
    c->sample = OwnedTensor::like(sample, sample.shape);
    c->context = OwnedTensor::like(context, context.shape);
    c->timesteps = OwnedTensor(t.shape, DType::kF32, device);
    if (added != nullptr) {
      c->text_embeds = OwnedTensor::like(added->text_embeds, added->text_embeds.shape);
      if (!added->joined()) c->time_ids = OwnedTensor::like(added->time_ids, added->time_ids.shape);
    }
    Captured& captured = *c;
    captured.split = split;
    const comm::ExchangeCounts before = split ? split->group().counts() : comm::ExchangeCounts{};
    captured.work = ops::CapturedWork::capture(device, [&] {
      const TextTimeConditioning inputs{captured.text_embeds, captured.time_ids};
      captured.output = unet.forward(captured.sample, captured.timesteps, captured.context,
                                     added != nullptr ? &inputs : nullptr, split);
    });
    if (split != nullptr) {
      const comm::ExchangeCounts& after = split->group().counts();
      captured.exchanged = {after.bytes_sent - before.bytes_sent, after.bytes_received - before.bytes_received,
                            after.collectives - before.collectives};
    }
    it = graphs_.emplace(key, std::move(c)).first;
  }
  Captured& c = *it->second;
  HD_CHECK(c.split == split, "unet: a graph captured with one image split replayed with another (the split's ",
           "buffers are in the graph: keep one split object per model and group)");
  HD_CHECK(sample.dtype == c.sample.view().dtype && context.dtype == c.context.view().dtype &&
               sample.device == device && context.device == device,
           "unet: inputs ", sample.describe(), " and ", context.describe(), " are not where the model computes (",
           unet.placement().to_string(), ")");
  ops::copy(sample, c.sample);
  ops::copy(context, c.context);
  ops::copy(t, c.timesteps);
  if (added != nullptr) {
    ops::copy(added->text_embeds, c.text_embeds);
    if (!added->joined()) ops::copy(added->time_ids, c.time_ids);
  }
  c.work.replay();
  c.last_use = ++uses_;
  if (split != nullptr && std::exchange(c.replayed, true)) split->group().count_replay(c.exchanged);
  OwnedTensor out = OwnedTensor::like(c.output, c.output.view().shape);
  ops::copy(c.output, out);
  return out;
}

}  // namespace hd
