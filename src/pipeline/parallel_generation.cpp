// ParallelStableDiffusion: a thread per device (comm::run_ranks), each driving its own model; the ranks'
// exchanges go through NCCL/RCCL between distinct GPUs, through an in-process group otherwise.
#include "pipeline/parallel_generation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>

#include "comm/rank_threads.h"
#include "core/error.h"
#include "core/text.h"
#include "ops/ops.h"

namespace hd {

namespace {

// Rows [first, first + rows) of a batch of `batch` for `rank` of `ranks`: as even as can be, the
// earlier ranks one more.
BatchShare share_of(int batch, int rank, int ranks) {
  const int base = batch / ranks, extra = batch % ranks;
  return BatchShare{rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

// Rows of several [n_i, ...] host tensors one after the other.
OwnedTensor concatenated(const std::vector<const Tensor*>& parts) {
  Shape shape = parts[0]->shape;
  shape[0] = 0;
  for (const Tensor* t : parts) shape[0] += t->dim(0);
  OwnedTensor out(shape, parts[0]->dtype);
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    ops::copy(*t, out.view().slice(0, offset, t->dim(0)));
    offset += t->dim(0);
  }
  return out;
}

// The pictures of the batch's shares, in order, as one result; its times the first share's, but for the
// total since `start`.
GenerationResult joined(std::vector<GenerationResult>& parts, std::chrono::steady_clock::time_point start) {
  std::vector<const Tensor*> latents, images;
  GenerationResult out;
  for (const GenerationResult& part : parts) {
    latents.push_back(&part.latents.view());
    images.push_back(&part.image.view());
    out.vae_retried_in_bf16 = out.vae_retried_in_bf16 || part.vae_retried_in_bf16;
    out.vae_tiled = out.vae_tiled || part.vae_tiled;
    out.decode_extra_device_memory = std::max(out.decode_extra_device_memory, part.decode_extra_device_memory);
  }
  out.latents = concatenated(latents);
  out.image = concatenated(images);
  out.times = std::move(parts[0].times);
  out.times.total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// While one lives, `model` computes its rank's part of every step in lockstep with the other ranks: half of
// each guided batch (`pair`: CFG parallel), its strip of the image (`split`: exact or displaced from
// `displaced_from`), or its strip of its half (both).
class Lockstep {
 public:
  Lockstep(StableDiffusion& model, comm::Communicator* pair, comm::ImageSplit* split, int displaced_from)
      : model_(model) {
    model_.split_guidance(pair);
    model_.split_image(split, displaced_from);
  }
  ~Lockstep() {
    model_.split_guidance(nullptr);
    model_.split_image(nullptr);
  }
  Lockstep(const Lockstep&) = delete;
  Lockstep& operator=(const Lockstep&) = delete;

 private:
  StableDiffusion& model_;
};

}  // namespace

ParallelMode parse_parallel_mode(std::string_view text) {
  if (text == "auto") return ParallelMode::kAuto;
  if (text == "data") return ParallelMode::kData;
  if (text == "cfg") return ParallelMode::kCfg;
  if (text == "split") return ParallelMode::kSplit;
  if (text == "displaced") return ParallelMode::kDisplaced;
  throw Error(ErrorKind::kInvalidInput,
              str_cat("unknown parallel mode '", text, "' (auto, data, cfg, split or displaced)"));
}

std::string_view parallel_mode_name(ParallelMode mode) {
  switch (mode) {
    case ParallelMode::kAuto: return "auto";
    case ParallelMode::kData: return "data";
    case ParallelMode::kCfg: return "cfg";
    case ParallelMode::kSplit: return "split";
    case ParallelMode::kDisplaced: return "displaced";
  }
  return "?";
}

std::vector<Device> parse_device_list(std::string_view text) {
  if (text == "all") {
    std::vector<Device> all = ops::gpu_devices();
    HD_CHECK_KIND(!all.empty(), ErrorKind::kUnsupported, "devices 'all': this build sees no GPU");
    return all;
  }
  std::vector<Device> out;
  for (const std::string_view item : split_list(text)) {
    HD_CHECK(!item.empty(), "the device list '", text, "' has an empty entry (devices are separated by commas)");
    out.push_back(Device::parse(item));
  }
  HD_CHECK(out.size() <= 64, "at most 64 devices, not ", out.size());
  return out;
}

std::string device_list_name(std::span<const Device> devices) {
  std::string out;
  for (const Device& d : devices) out += (out.empty() ? "" : ",") + d.to_string();
  return out;
}

ParallelStableDiffusion::ParallelStableDiffusion(ParallelStableDiffusion&&) noexcept = default;
ParallelStableDiffusion& ParallelStableDiffusion::operator=(ParallelStableDiffusion&&) noexcept = default;
ParallelStableDiffusion::~ParallelStableDiffusion() {
  // The models first (their graphs hold the splits' buffers), then the splits: their memory is freed while
  // the exchanges' libraries are still there.
  refiners_.clear();
  models_.clear();
  refiner_splits_.clear();
  splits_.clear();
}

ParallelStableDiffusion ParallelStableDiffusion::load(const std::string& model_path,
                                                      const std::optional<std::string>& vocab_dir,
                                                      const std::optional<std::string>& config_folder,
                                                      std::span<const Device> devices, DType dtype,
                                                      std::span<const LoraChoice> loras) {
  HD_CHECK(!devices.empty(), "no device to load the model on");
  for (const Device& d : devices)
    HD_CHECK(d.type == devices[0].type, "devices ", devices[0].to_string(), " and ", d.to_string(),
             " are of two kinds; a request's devices are all GPUs of one vendor or all the CPU");
  ParallelStableDiffusion out;
  const int ranks = int(devices.size());
  out.devices_.assign(devices.begin(), devices.end());
  out.exchange_timeout_ = comm::exchange_timeout();
  out.group_ = std::make_unique<comm::DeviceGroup>(devices);
  out.models_.resize(size_t(ranks));
  out.splits_.resize(size_t(ranks));
  const auto load_rank = [&](int rank) {
    const Device& d = devices[size_t(rank)];
    const ops::Placement placement{d, d.is_cpu() ? DType::kF32 : dtype};
    out.models_[size_t(rank)] = std::make_unique<StableDiffusion>(
        StableDiffusion::load(model_path, vocab_dir, config_folder, placement, loras));
  };
  out.run(load_rank, false);
  return out;
}

void ParallelStableDiffusion::run(const std::function<void(int rank)>& work, bool exchanges,
                                  const std::atomic<int>* exchanging) {
  HD_CHECK_KIND(broken_.empty(), ErrorKind::kRuntime, "these devices' group ended with an earlier failure (",
                broken_, "): load the model on them again");
  if (!exchanges) return comm::run_ranks(size(), work);  // a rank that fails leaves the others be
  // A rank that fails ends the others' exchanges, in every group, so that none waits for it; the groups
  // are done with. So does the watchdog (rank -1) when no rank exchanges for exchange_timeout_.
  const auto fail = [this](int rank, const std::string& why) {
    broken_ = rank < 0 ? why : str_cat("rank ", rank, ": ", why);
    group_->fail(rank, why);
    const int strips = size() / 2;
    for (size_t i = 0; i < half_groups_.size(); ++i)
      if (rank < 0 || rank / strips == int(i)) half_groups_[i]->fail(rank < 0 ? rank : rank % strips, why);
    for (size_t i = 0; i < pair_groups_.size(); ++i)
      if (rank < 0 || rank % strips == int(i)) pair_groups_[i]->fail(rank < 0 ? rank : rank / strips, why);
  };
  const auto activity = [this] {
    uint64_t sum = group_->activity();
    for (const auto* groups : {&half_groups_, &pair_groups_})
      for (const auto& g : *groups) sum += g->activity();
    return sum;
  };
  comm::Watchdog watchdog{activity, exchange_timeout_, {}};
  if (exchanging != nullptr) watchdog.exchanging = [exchanging] { return exchanging->load() > 0; };
  comm::run_ranks(size(), work, fail, watchdog);
}

void ParallelStableDiffusion::load_refiner(const std::string& path, const std::optional<std::string>& vocab_dir) {
  std::vector<std::unique_ptr<StableDiffusion>> loaded(static_cast<size_t>(size()));
  run([&](int rank) {
    const StableDiffusion& model = *models_[size_t(rank)];
    loaded[size_t(rank)] = std::make_unique<StableDiffusion>(
        StableDiffusion::load(path, vocab_dir, std::nullopt, model.placement()));
  }, false);
  refiners_ = std::move(loaded);  // the last refiner's graphs go before the splits they hold
  refiner_splits_.clear();
  refiner_splits_.resize(size_t(size()));
}

void ParallelStableDiffusion::use_vae(const std::string& path) {
  run([&](int rank) {
    models_[size_t(rank)]->use_vae(path);
    if (has_refiner()) refiners_[size_t(rank)]->use_vae(path);
  }, false);
}

std::string ParallelStableDiffusion::exchange_name() const {
  return group_->exchange_name();
}

comm::ExchangeCounts ParallelStableDiffusion::counts() const {
  // Rank 0's exchanges in every group it belongs to.
  comm::ExchangeCounts sum = group_->rank(0).counts();
  for (const auto* groups : {&half_groups_, &pair_groups_}) {
    if (groups->empty()) continue;
    const comm::ExchangeCounts& c = groups->front()->rank(0).counts();
    sum.bytes_sent += c.bytes_sent, sum.bytes_received += c.bytes_received, sum.collectives += c.collectives;
  }
  return sum;
}

void ParallelStableDiffusion::set_displaced_warmup(int steps) {
  HD_CHECK(steps >= 1 && steps <= 10000, "the displaced split's warm-up is 1 or more exact steps (its first displaced ",
           "step reads the values of the step before), not ", steps);
  displaced_warmup_ = steps;
}

bool ParallelStableDiffusion::cfg_halves(const GenerationParams& p) const {
  return guided(p) && size() >= 4 && size() % 2 == 0;
}

int ParallelStableDiffusion::strips(const GenerationParams& p) const {
  return cfg_halves(p) ? size() / 2 : size();
}

int64_t ParallelStableDiffusion::split_multiple(int strips, bool with_refiner) const {
  const int64_t model = models_[0]->split_height_multiple(strips);
  return with_refiner ? std::lcm(model, refiners_[0]->split_height_multiple(strips)) : model;
}

bool ParallelStableDiffusion::splits(const GenerationParams& p, bool with_refiner) const {
  return p.height % split_multiple(strips(p), with_refiner) == 0;
}

void ParallelStableDiffusion::make_cfg_halves() {
  if (!half_groups_.empty()) return;
  const int strips = size() / 2;
  for (int half = 0; half < 2; ++half) {
    const std::vector<Device> members(devices_.begin() + half * strips, devices_.begin() + (half + 1) * strips);
    half_groups_.push_back(std::make_unique<comm::DeviceGroup>(members));
  }
  for (int strip = 0; strip < strips; ++strip) {
    const std::vector<Device> pair = {devices_[size_t(strip)], devices_[size_t(strips + strip)]};
    pair_groups_.push_back(std::make_unique<comm::DeviceGroup>(pair));
  }
}

ParallelMode ParallelStableDiffusion::resolve(ParallelMode mode, const GenerationParams& p,
                                              bool with_refiner) const {
  HD_CHECK(!with_refiner || has_refiner(), "no refiner is loaded on these devices");
  const int devices = size();
  if (mode == ParallelMode::kAuto) {
    if (p.batch >= devices || devices == 1) return ParallelMode::kData;
    if (guided(p) && devices % 2 == 0 && p.batch >= devices / 2) return ParallelMode::kCfg;
    HD_CHECK(splits(p, with_refiner), "a batch of ", p.batch, " on ", devices,
             " devices: data parallel needs a picture per device, CFG parallel a guided request (cfg scale "
             "above 1) with a picture per pair of devices (an even number of them), the image split a height "
             "that is a multiple of ", split_multiple(strips(p), with_refiner), " pixels");
    return ParallelMode::kSplit;
  }
  if (mode == ParallelMode::kData) {
    HD_CHECK(p.batch >= devices, "data parallel over ", devices, " devices needs a batch of at least ", devices,
             ", not ", p.batch);
  } else if (mode == ParallelMode::kCfg) {
    HD_CHECK_KIND(devices % 2 == 0, ErrorKind::kUnsupported, "CFG parallel pairs the devices: an even number, not ",
                  devices);
    HD_CHECK(guided(p), "CFG parallel needs classifier-free guidance: a cfg scale above 1, not ", p.cfg_scale);
    HD_CHECK(p.batch >= devices / 2, "CFG parallel over ", devices, " devices makes ", devices / 2,
             " pairs, each with a share of the batch: a batch of at least ", devices / 2, ", not ", p.batch,
             " (the image split takes a guided picture on 4 or more)");
  } else {
    HD_CHECK(splits(p, with_refiner), "an image split into ", strips(p), " strips",
             cfg_halves(p) ? " per guidance half" : "", " needs a height that is a multiple of ",
             split_multiple(strips(p), with_refiner), " pixels", with_refiner ? " (the model's and the refiner's)" : "",
             ", not ", p.height);
  }
  return mode;
}

GenerationResult ParallelStableDiffusion::generate(const GenerationParams& p, ParallelMode mode,
                                                   const ProgressCallback& progress, const Tensor* init_image) {
  models_[0]->validate(p, init_image != nullptr);
  const ParallelMode resolved = resolve(mode, p);
  decode_counts_ = {};  // a data parallel request decodes on each device alone
  if (resolved == ParallelMode::kData) return generate_data(p, nullptr, progress, init_image);
  return generate_lockstep(p, nullptr, resolved, progress, init_image);
}

GenerationResult ParallelStableDiffusion::generate_with_refiner(const GenerationParams& p, double high_noise_frac,
                                                                ParallelMode mode, const ProgressCallback& progress,
                                                                const Tensor* init_image) {
  HD_CHECK(has_refiner(), "no refiner is loaded on these devices");
  // Every check of both shares before any work (the same on every rank: the models are the same).
  const RefinerShares shares =
      refiner_shares(*models_[0], *refiners_[0], p, high_noise_frac, init_image != nullptr);
  const ParallelMode resolved = resolve(mode, p, true);
  decode_counts_ = {};
  if (resolved == ParallelMode::kData) return generate_data(p, &shares, progress, init_image);
  return generate_lockstep(p, &shares, resolved, progress, init_image);
}

GenerationResult ParallelStableDiffusion::generate_data(const GenerationParams& p, const RefinerShares* shares,
                                                        const ProgressCallback& progress, const Tensor* init) {
  // Every rank a row at least (resolve's rule): a share of no rows would mean the whole batch.
  HD_ASSERT(p.batch >= size());
  const auto start = std::chrono::steady_clock::now();
  std::vector<GenerationResult> parts(static_cast<size_t>(size()));
  run([&](int rank) {
    const BatchShare share = share_of(p.batch, rank, size());
    const StableDiffusion& sd = *models_[size_t(rank)];
    TorchCpuGenerator generator(p.seed);
    StageTimes times;
    const ProgressCallback& heard = rank == 0 ? progress : ProgressCallback{};
    if (shares != nullptr) {  // the ensemble: the refiner's VAE decodes
      const StableDiffusion& refiner = *refiners_[size_t(rank)];
      OwnedTensor latents = denoise_with_refiner(sd, refiner, *shares, generator, &times, init, share, heard);
      parts[size_t(rank)] = refiner.finish(shares->refiner, std::move(latents), std::move(times), start);
      return;
    }
    OwnedTensor latents = sd.denoise(p, generator, &times, DenoiseStart{init, nullptr, share}, heard);
    parts[size_t(rank)] = sd.finish(p, std::move(latents), std::move(times), start);
  }, false);
  return joined(parts, start);
}

GenerationResult ParallelStableDiffusion::generate_lockstep(const GenerationParams& p, const RefinerShares* shares,
                                                            ParallelMode mode, const ProgressCallback& progress,
                                                            const Tensor* init) {
  const bool image = mode != ParallelMode::kCfg, halves = image && cfg_halves(p);
  // CFG parallel x data parallel: pair i (ranks i and i + size/2) makes share i of the batch.
  const bool pairs = mode == ParallelMode::kCfg && size() > 2;
  const bool displaced = mode == ParallelMode::kDisplaced;
  if (halves || pairs) make_cfg_halves();
  const int half_size = size() / 2;
  const auto start = std::chrono::steady_clock::now();
  GenerationResult out;
  std::vector<GenerationResult> pair_parts(pairs ? size_t(half_size) : 0);  // each pair's first rank's
  std::atomic<int> exchanging{size()};  // ranks not yet past their last exchange (the watchdog's view)
  // The ranks that end with the same latents (all of them, or a pair) decode a strip of them each, unless
  // the request asks for tiles or the latent's rows do not split evenly (then the first decodes alone).
  const int64_t latent_rows = p.height / models_[0]->vae_scale_factor();
  const int decoders = pairs ? 2 : size();
  const bool split_decode = p.vae_tiling == VaeTiling::kAuto && latent_rows % decoders == 0;
  run([&](int rank) {
    StableDiffusion& sd = *models_[size_t(rank)];
    StableDiffusion* refiner = shares != nullptr ? refiners_[size_t(rank)].get() : nullptr;
    const int strip = rank % std::max(half_size, 1), half = rank / std::max(half_size, 1);
    comm::Communicator* pair = mode == ParallelMode::kCfg ? &group_->rank(rank) : nullptr;
    if (halves || pairs) pair = &pair_groups_[size_t(strip)]->rank(half);
    const BatchShare share = pairs ? share_of(p.batch, strip, half_size) : BatchShare{};
    // Each model's own splits: made on first use and kept, since its captured graphs hold their buffers.
    const auto split_of = [&](std::vector<RankSplits>& all) -> comm::ImageSplit* {
      if (!image) return nullptr;
      comm::Communicator& strip_group = halves ? half_groups_[size_t(half)]->rank(strip) : group_->rank(rank);
      RankSplits& mine = all[size_t(rank)];
      std::unique_ptr<comm::ImageSplit>& kept =
          halves ? (displaced ? mine.half_displaced : mine.half_exact) : (displaced ? mine.displaced : mine.exact);
      if (!kept) kept = std::make_unique<comm::ImageSplit>(strip_group, /*keeps_sites=*/displaced);
      return kept.get();
    };
    const int displaced_from = displaced ? displaced_warmup_ : -1;
    const Lockstep lockstep(sd, pair, split_of(splits_), displaced_from);
    std::optional<Lockstep> refiner_lockstep;  // the refiner's run warms up afresh when displaced
    if (refiner != nullptr) refiner_lockstep.emplace(*refiner, pair, split_of(refiner_splits_), displaced_from);
    TorchCpuGenerator generator(p.seed);
    StageTimes times;
    const ProgressCallback& heard = rank == 0 ? progress : ProgressCallback{};
    OwnedTensor latents = refiner != nullptr
                              ? denoise_with_refiner(sd, *refiner, *shares, generator, &times, init, share, heard)
                              : sd.denoise(p, generator, &times, DenoiseStart{init, nullptr, share}, heard);
    // With a refiner, its VAE decodes (generate_with_refiner).
    StableDiffusion& decoder = refiner != nullptr ? *refiner : sd;
    const GenerationParams& decoded = refiner != nullptr ? shares->refiner : p;
    comm::ImageSplit* decode_split = nullptr;
    if (split_decode) {
      RankSplits& mine = (refiner != nullptr ? refiner_splits_ : splits_)[size_t(rank)];
      std::unique_ptr<comm::ImageSplit>& kept = pairs ? mine.pair_exact : mine.exact;
      if (!kept) kept = std::make_unique<comm::ImageSplit>(pairs ? *pair : group_->rank(rank));
      decode_split = kept.get();
    }
    const comm::ExchangeCounts before = rank == 0 ? counts() : comm::ExchangeCounts{};
    GenerationResult mine;
    if (decode_split) mine = decoder.finish(decoded, std::move(latents), std::move(times), start, decode_split);
    // The exchanges are over once the device has run them (a GPU's host queues ahead of it); a decode on
    // the first device alone, however long, is no business of the watchdog's.
    ops::synchronize(sd.placement().device);
    exchanging.fetch_sub(1);
    if (pairs ? half != 0 : rank != 0) return;
    if (!decode_split) mine = decoder.finish(decoded, std::move(latents), std::move(times), start);
    if (rank == 0) {
      const comm::ExchangeCounts after = counts();  // the same as before when the first decoded alone
      decode_counts_ = {after.bytes_sent - before.bytes_sent, after.bytes_received - before.bytes_received,
                        after.collectives - before.collectives};
    }
    if (pairs) {
      pair_parts[size_t(strip)] = std::move(mine);
    } else {
      out = std::move(mine);
    }
  }, true, &exchanging);
  return pairs ? joined(pair_parts, start) : std::move(out);
}

}  // namespace hd
