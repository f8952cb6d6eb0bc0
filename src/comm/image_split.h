// One rank's strip of an image split over a group (issue 20): the latent's rows cut into equal strips in
// rank order, each rank running the model on its own strip. What crosses a strip's edge is exchanged:
// - a 3x3 convolution reads one row of each neighbour (an all-gather of every strip's edge rows; zeros at
//   the image's top and bottom);
// - a GroupNorm normalises with the whole image's statistics (each strip's all-gathered, combined on the
//   device);
// - self-attention attends to every strip's keys and values (gather_keys_values).
// Exact: every exchange at the current step, so the result is the whole image's up to rounding.
// Displaced (DistriFusion, CVPR 2024): after exact forwards that recorded them, each exchange takes the
// other strips' values from the previous forward (this strip's own are current) and sends this forward's
// for the next one, overlapped with the computation that follows: on a GPU the all-gathers run on a side
// stream that the device's stream joins at the forward's end. An exchange is known by its place in the
// forward's order (its site), so every forward of a displaced run must make the same exchanges.
// Everything is queued on the rank's device streams, so a GPU rank's forward can be captured into a graph.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace hd::comm {

class ImageSplit {
 public:
  // `group` must outlive this. `keeps_sites`: each exchange's result is kept for a later displaced
  // forward (needed by set_displaced; memory: a forward's exchanged bytes, from every strip).
  explicit ImageSplit(Communicator& group, bool keeps_sites = false) : group_(group), keeps_sites_(keeps_sites) {}

  bool keeps_sites() const { return keeps_sites_; }
  int strips() const { return group_.size(); }
  int index() const { return group_.rank(); }
  Communicator& group() const { return group_; }

  // From the next forward on, exchanges are displaced (true) or exact (false). Displaced needs
  // keeps_sites and an exact forward of the same shapes before it.
  void set_displaced(bool displaced);
  bool displaced() const { return displaced_; }
  // A forward's exchanges lie between these two: sites are counted from begin_forward (kept per shape of
  // the forward's input, for the life of the split: captured graphs hold their buffers), and end_forward
  // joins the side stream's exchanges to the device's stream.
  void begin_forward(const Shape& input);
  void end_forward();

  // out = conv(x) + bias (+ residual) of this strip x [N, h, W, Cin] with weight [Cout, k, k, Cin]: a 3x3
  // kernel (padding 1, stride 1 or 2) sees the neighbouring strips' edge rows; a 1x1 kernel needs none.
  // A stride-2 kernel needs strips of an even height (the split's rows then line up with the whole's).
  void conv(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, const Tensor* residual,
            const Tensor& out);
  // GroupNorm (+ SiLU) of this strip x [N, h, W, C] with the statistics of every strip together.
  void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps, bool fuse_silu,
                  const Tensor& out);
  // Self-attention's keys and values of this strip, kv [2N, L, C] (the N samples' keys, then their
  // values), -> [2N, strips · L, C]: every strip's tokens in image order.
  OwnedTensor gather_keys_values(const Tensor& kv);
  // x [N, r, ...] of this strip -> [N, strips · r, ...]: every strip's rows in image order, always exact
  // (the model's output, which every rank needs whole).
  OwnedTensor gather_strips(const Tensor& x) const;

 private:
  // One exchange of a forward: what this strip sent (kept while a displaced all-gather may read it) and
  // what every strip sent, in rank order.
  struct Site {
    OwnedTensor sent, gathered;
  };
  // The forward's next site for sending `fresh` (this strip's values): its buffers made on first use,
  // checked against it after; `fresh` is copied into `sent` when displaced.
  Site& site_for(const Tensor& fresh);
  // Displaced: site.gathered from every strip's `fresh`, for the next forward: after what the device's
  // stream has queued so far (this site's reads of the previous values), on the side stream of a GPU.
  void exchange(Site& site, const Tensor& fresh);
  // [strips · N, rows, ...] in rank order -> [N, strips · rows, ...] (each sample's strips side by side).
  OwnedTensor interleaved(const Tensor& gathered, int64_t n) const;

  Communicator& group_;
  bool keeps_sites_;
  bool displaced_ = false;
  std::map<std::vector<int64_t>, std::vector<Site>> sites_by_input_;
  std::vector<Site>* sites_ = nullptr;  // the current forward's
  size_t next_site_ = 0;
  bool in_flight_ = false;  // displaced exchanges queued on the side stream since begin_forward
};

}  // namespace hd::comm
