// The UNet on a GPU as captured graphs: the first forward for an input shape (batch, height, width,
// context length) runs as usual (and tunes every kernel choice for it), the second captures the forward
// into a graph, and every later one copies its inputs into the graph's own input tensors and replays it:
// one launch instead of several hundred, the same kernels, the same numbers. On the CPU it is a plain
// forward.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>

#include "comm/communicator.h"
#include "core/tensor.h"
#include "models/unet.h"
#include "ops/captured_work.h"

namespace hd {

class UnetGraphs {
 public:
  // As Unet::forward; `unet` must be the same model on every call (the graphs hold its weights'
  // addresses).
  // With `split` (Unet::forward's), the graph holds the split's exchanges: the split must be the same
  // object, on the same group, at every call of its strip's shape.
  OwnedTensor forward(const Unet& unet, const Tensor& sample, float timestep, const Tensor& context,
                      const TextTimeConditioning* added = nullptr, comm::ImageSplit* split = nullptr);
  // The same with each sample's timestep in an f32 tensor [N], on the host or the model's device (a
  // caller whose timesteps are already on the GPU: diffusers' schedulers keep them there).
  OwnedTensor forward(const Unet& unet, const Tensor& sample, const Tensor& timesteps, const Tensor& context,
                      const TextTimeConditioning* added = nullptr, comm::ImageSplit* split = nullptr);

  size_t captured_count() const { return graphs_.size(); }

 private:
  struct Captured {  // members in this order: the graph goes first, then what it wrote, then its inputs
    OwnedTensor sample, timesteps, context, output;
    // SDXL's text-time conditioning, when the UNet takes it (time_ids empty: given joined)
    OwnedTensor text_embeds, time_ids;
    ops::CapturedWork work;
    // An image split's exchanges in the graph, as the capture counted them (counted again at each replay
    // after the first, which the capture's count stands for).
    comm::ExchangeCounts exchanged;
    bool replayed = false;
    const comm::ImageSplit* split = nullptr;  // the split whose buffers and group the graph holds
    uint64_t last_use = 0;                    // uses_ at its latest replay
  };
  // sample's batch, height, width; context's length; time ids (0: none, -1: given joined); the split's
  // strips times 4, plus 2 when it keeps its sites, plus 1 when displaced (0: none)
  using Key = std::array<int64_t, 6>;
  std::map<Key, int> forwards_;  // uncaptured forwards so far, per shape
  std::map<Key, std::unique_ptr<Captured>> graphs_;
  uint64_t uses_ = 0;  // replays so far, of every graph
};

}  // namespace hd
