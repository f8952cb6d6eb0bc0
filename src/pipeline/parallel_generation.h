// One request on several devices, each holding its own copy of the model: data parallel (the batch's
// rows spread over the devices), CFG parallel (two devices, each computing one half of every guided
// UNet batch and gathering the other's: StableDiffusion::split_guidance; on 2N devices, N pairs, each
// with a share of the batch: CFG x data parallel), or an exact image split (each
// device a strip of the latent's rows, exchanging halos, GroupNorm statistics and attention's keys and
// values inside every UNet forward: StableDiffusion::split_image), or the displaced split (the same after
// a warm-up of exact steps, each exchange then taking the other strips' values of the step
// before, overlapped with compute: DistriFusion). The same seed gives the same pictures as one device, up
// to the order of sums inside kernels of other shapes; the displaced split's differ a little more. Modes
// that end with the same latents on every device decode in strips over all of them. With SDXL's refiner
// loaded beside the model on every device, the ensemble of expert denoisers runs in the same modes.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/device_group.h"
#include "comm/image_split.h"
#include "pipeline/expert_ensemble.h"
#include "pipeline/stable_diffusion.h"

namespace hd {


enum class ParallelMode { kAuto, kData, kCfg, kSplit, kDisplaced };
// "auto", "data", "cfg", "split", "displaced"; anything else is an error naming the choices.
ParallelMode parse_parallel_mode(std::string_view text);
std::string_view parallel_mode_name(ParallelMode mode);
// The displaced split's exact steps before it turns displaced (DistriFusion's warm-up), by default.
inline constexpr int kDisplacedWarmupSteps = 4;
// "cuda:0,cuda:1" (or "all": every GPU of this build's vendor) into devices; at least one.
std::vector<Device> parse_device_list(std::string_view text);
// The list as parse_device_list reads it: "cuda:0,cuda:1".
std::string device_list_name(std::span<const Device> devices);

class ParallelStableDiffusion {
 public:
  // The model loaded on each of `devices` (one thread each), computing in `dtype` on GPUs (f32 on the
  // CPU). GPUs, each named once, exchange through NCCL/RCCL; the CPU named several times makes ranks of
  // an in-process group (how the tests stand in for several GPUs). `loras` as StableDiffusion::load's.
  static ParallelStableDiffusion load(const std::string& model_path,
                                      const std::optional<std::string>& vocab_dir,
                                      const std::optional<std::string>& config_folder,
                                      std::span<const Device> devices, DType dtype,
                                      std::span<const LoraChoice> loras = {});
  ParallelStableDiffusion(ParallelStableDiffusion&&) noexcept;
  ParallelStableDiffusion& operator=(ParallelStableDiffusion&&) noexcept;
  ~ParallelStableDiffusion();

  int size() const { return int(models_.size()); }
  const StableDiffusion& model(int rank) const { return *models_[size_t(rank)]; }
  // SDXL's refiner beside the model on every device, for generate_with_refiner.
  void load_refiner(const std::string& path, const std::optional<std::string>& vocab_dir);
  bool has_refiner() const { return !refiners_.empty(); }
  const StableDiffusion& refiner(int rank) const { return *refiners_[size_t(rank)]; }
  void use_vae(const std::string& path);  // on every device, the refiner's too
  // How the exchanges travel: "NCCL 2.28.3", "in-process group".
  std::string exchange_name() const;

  // The mode a request runs in. kAuto: data parallel when the batch has a row for every device, else CFG
  // parallel for a guided request on an even number of devices with a picture for every pair (one on
  // two), else the image split where the height allows it. An
  // explicit mode the request cannot take is an error about the request. The split of a guided request
  // on an even number of devices, 4 or more, is combined with CFG parallel (cfg_halves). `with_refiner`:
  // the request is the ensemble's (an image split then suits both models' downsampling).
  ParallelMode resolve(ParallelMode mode, const GenerationParams& p, bool with_refiner = false) const;
  // Whether the image split of `p` runs on two halves of the devices, the first computing the
  // unconditional rows and the second the conditional, each half split into size() / 2 strips.
  bool cfg_halves(const GenerationParams& p) const;
  // The strips `p`'s image splits into, and whether its height allows them (for the refiner's UNet too).
  int strips(const GenerationParams& p) const;
  bool splits(const GenerationParams& p, bool with_refiner = false) const;
  // As StableDiffusion::generate, in `mode` (resolved first); `progress` hears rank 0's steps.
  GenerationResult generate(const GenerationParams& p, ParallelMode mode, const ProgressCallback& progress = {},
                            const Tensor* init_image = nullptr);
  // As hd::generate_with_refiner (load_refiner first), in `mode`: each rank runs the base's share and then
  // the refiner's, both models computing the rank's part (rows of the batch, a guidance half, a strip).
  GenerationResult generate_with_refiner(const GenerationParams& p, double high_noise_frac, ParallelMode mode,
                                         const ProgressCallback& progress = {}, const Tensor* init_image = nullptr);
  // What rank 0 has exchanged so far, in every group it belongs to.
  comm::ExchangeCounts counts() const;
  // Of that, what it exchanged decoding the last request: CFG parallel and the image split end with the
  // same latents on every rank (on each pair's two, with CFG x data parallel), and each decodes a strip
  // of them (zero where the first decoded alone: a tiled decode asked for, or a latent height that does
  // not split evenly over the ranks).
  const comm::ExchangeCounts& decode_counts() const { return decode_counts_; }
  // The displaced split's exact steps first: more keeps the picture nearer the exact split's, fewer
  // overlaps more of the exchanges. At least 1 (a displaced step reads the values of the step before).
  void set_displaced_warmup(int steps);
  int displaced_warmup() const { return displaced_warmup_; }

 private:
  ParallelStableDiffusion() = default;
  // The height an image split into `strips` needs a multiple of: the model's, and the refiner's with it.
  int64_t split_multiple(int strips, bool with_refiner) const;
  // `shares`: the ensemble's (generate_with_refiner), or nullptr for the model alone.
  GenerationResult generate_data(const GenerationParams& p, const RefinerShares* shares,
                                 const ProgressCallback& progress, const Tensor* init);
  // CFG parallel or the image split: every rank runs every step, holding the whole latents (with CFG x
  // data parallel, its pair's share of them); the ranks that hold the same latents decode them in strips.
  GenerationResult generate_lockstep(const GenerationParams& p, const RefinerShares* shares, ParallelMode mode,
                                     const ProgressCallback& progress, const Tensor* init);
  // CFG parallel x image split: made on first use.
  void make_cfg_halves();
  // work(rank) on a thread per rank. `exchanges`: the ranks exchange, so one that fails ends the others'
  // exchanges and the group (later calls are refused), and so does no exchange for exchange_timeout_
  // while `exchanging` (where given) counts ranks not yet past their last; else a failing rank leaves the
  // others be.
  void run(const std::function<void(int rank)>& work, bool exchanges, const std::atomic<int>* exchanging = nullptr);

  std::vector<Device> devices_;
  std::vector<std::unique_ptr<StableDiffusion>> models_;
  std::vector<std::unique_ptr<StableDiffusion>> refiners_;  // empty: none loaded
  std::unique_ptr<comm::DeviceGroup> group_;
  // CFG parallel x image split: the strips of each guidance half (devices [0, S) the unconditional half's,
  // [S, 2S) the conditional's) and, for each strip, the pair of its two halves.
  std::vector<std::unique_ptr<comm::DeviceGroup>> half_groups_, pair_groups_;
  // Each rank's image splits, over the whole group or over its half, exact or displaced (which keeps its
  // sites): made on first use and kept with the group, since the UNet's captured graphs hold their
  // buffers' addresses.
  struct RankSplits {
    std::unique_ptr<comm::ImageSplit> exact, displaced, half_exact, half_displaced;
    std::unique_ptr<comm::ImageSplit> pair_exact;  // CFG x data parallel: the pair's split decode
  };
  std::vector<RankSplits> splits_;
  std::vector<RankSplits> refiner_splits_;  // the refiner's own (its graphs hold their buffers too)
  int displaced_warmup_ = kDisplacedWarmupSteps;
  comm::ExchangeCounts decode_counts_;  // rank 0's, decoding the last lockstep request
  std::string broken_;  // why the group ended (a rank failed while exchanging); empty while usable
  // No exchange by any rank for this long ends a request's exchanges with an error (comm::Watchdog).
  std::chrono::milliseconds exchange_timeout_{0};
};

}  // namespace hd
