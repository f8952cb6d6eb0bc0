// Several GPUs against one, in the same run on the same machine: a guided picture on one GPU against CFG
// parallel on two and the exact and displaced image split over all of them (per guidance half on 4 or
// more; an unguided picture then splits over all), and a guided picture per pair of GPUs (CFG x data
// parallel, on 4 or more), latency; and a batch of pictures on one GPU against
// data parallel over all of them, throughput. Whole generations (prompt encoding, every
// step, the VAE decode, in strips over the GPUs where every GPU ends with the same latents), and the
// denoising loop alone, medians of --repeats after a warm-up, with what rank 0 exchanged per step and per
// decode.
//   hd_bench_parallel --arch sd15|sdxl | --model PATH  [--devices cuda:0,cuda:1] [--size 512] [--steps 20]
//                     [--repeats 5] [--per-gpu 4] [--displaced-warmup 4] [--json-out FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
#include "pipeline/parallel_generation.h"
#include "pipeline/random_model.h"

namespace hd {
namespace {

struct Args {
  std::string model, arch, devices = "all", json_out;
  int size = 0, steps = 20, repeats = 5, per_gpu = 4, displaced_warmup = kDisplacedWarmupSteps;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    HD_CHECK(i + 1 < argc, flag, " needs a value");
    const std::string v = argv[++i];
    if (flag == "--model") a.model = v;
    else if (flag == "--arch") a.arch = v;
    else if (flag == "--devices") a.devices = v;
    else if (flag == "--json-out") a.json_out = v;
    else if (flag == "--size") a.size = std::stoi(v);
    else if (flag == "--steps") a.steps = std::stoi(v);
    else if (flag == "--repeats") a.repeats = std::stoi(v);
    else if (flag == "--per-gpu") a.per_gpu = std::stoi(v);
    else if (flag == "--displaced-warmup") a.displaced_warmup = std::stoi(v);
    else throw Error(ErrorKind::kInvalidInput, "unknown flag " + flag);
  }
  HD_CHECK(a.model.empty() != a.arch.empty(), "give --model PATH or --arch sd15|sd21|sdxl");
  HD_CHECK(a.repeats >= 1 && a.steps >= 1 && a.per_gpu >= 1, "--repeats, --steps and --per-gpu must be at least 1");
  return a;
}

struct Timing {
  double total_s = 0, denoising_s = 0;  // medians
};

template <typename F>
Timing median_times(int repeats, const F& generate) {
  generate();  // warm-up: kernel choices, captured graphs
  std::vector<double> total, denoising;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const GenerationResult r = generate();
    total.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    denoising.push_back(r.times.denoising / 1000.0);
  }
  std::sort(total.begin(), total.end());
  std::sort(denoising.begin(), denoising.end());
  return {total[total.size() / 2], denoising[denoising.size() / 2]};
}

template <typename F>
double median_seconds(int repeats, const F& generate) {
  return median_times(repeats, generate).total_s;
}

struct Bench {
  const Args& args;
  ParallelStableDiffusion& one;
  nlohmann::json& report;
};

// What rank 0 of `group` sent since `before`, over `requests` requests of `steps` steps: per denoising
// step, the decodes' (each the same: decode_counts of the last) taken out, and per decode.
struct Exchanged {
  double bytes_per_step = 0, collectives_per_step = 0, decode_bytes = 0;
};
Exchanged exchanged_since(const comm::ExchangeCounts& before, const ParallelStableDiffusion& group, int requests,
                          int steps) {
  const comm::ExchangeCounts now = group.counts(), decode = group.decode_counts();
  const double denoising_bytes = double(now.bytes_sent - before.bytes_sent) - double(requests) * double(decode.bytes_sent);
  const double denoising_collectives =
      double(now.collectives - before.collectives) - double(requests) * double(decode.collectives);
  return {denoising_bytes / double(requests * steps), denoising_collectives / double(requests * steps),
          double(decode.bytes_sent)};
}

// One guided picture, CFG parallel on `pair` (two GPUs) against one GPU.
void cfg_row(const Bench& b, ParallelStableDiffusion& pair, const GenerationParams& p) {
  const double alone = median_seconds(b.args.repeats, [&] { return b.one.generate(p, ParallelMode::kData); });
  const comm::ExchangeCounts before = pair.counts();
  const double parallel = median_seconds(b.args.repeats, [&] { return pair.generate(p, ParallelMode::kCfg); });
  const Exchanged sent = exchanged_since(before, pair, b.args.repeats + 1, p.steps);
  const double per_step = sent.bytes_per_step / 1024.0, decode_mib = sent.decode_bytes / (1024.0 * 1024.0);
  std::printf("| one guided picture, CFG parallel on 2 GPUs (s) | %.3f | %.3f | %.2fx | %.0f KiB sent; decode %.1f MiB |\n",
              alone, parallel, alone / parallel, per_step, decode_mib);
  b.report["cfg"] = {{"devices", 2}, {"one_gpu_s", alone}, {"parallel_s", parallel}, {"speedup", alone / parallel},
                     {"kib_sent_per_step", per_step}, {"decode_mib_sent", decode_mib}};
}

// A guided picture for every pair of GPUs: CFG x data parallel (each pair one picture, each GPU one
// guidance half of it) against one GPU making the batch, latency. Only on 4 or more, an even number.
void cfg_pairs_row(const Bench& b, ParallelStableDiffusion& all, GenerationParams p) {
  const int n = all.size();
  if (n < 4 || n % 2 != 0) return;
  p.batch = n / 2;
  const double alone = median_seconds(b.args.repeats, [&] { return b.one.generate(p, ParallelMode::kData); });
  const comm::ExchangeCounts before = all.counts();
  const double parallel = median_seconds(b.args.repeats, [&] { return all.generate(p, ParallelMode::kCfg); });
  const Exchanged sent = exchanged_since(before, all, b.args.repeats + 1, p.steps);
  const double per_step = sent.bytes_per_step / 1024.0, decode_mib = sent.decode_bytes / (1024.0 * 1024.0);
  std::printf("| %d guided pictures, CFG x data parallel (%d pairs) (s) | %.3f | %.3f | %.2fx | %.0f KiB sent; "
              "decode %.1f MiB |\n",
              p.batch, n / 2, alone, parallel, alone / parallel, per_step, decode_mib);
  b.report["cfg_pairs"] = {{"devices", n}, {"batch", p.batch}, {"one_gpu_s", alone}, {"parallel_s", parallel},
                           {"speedup", alone / parallel}, {"kib_sent_per_step", per_step},
                           {"decode_mib_sent", decode_mib}};
}

// One picture, the exact and the displaced image split over every GPU of `all` (per guidance half where
// the picture is guided and the GPUs pair up) against one GPU; reported under `key`.
void split_rows(const Bench& b, ParallelStableDiffusion& all, const GenerationParams& p, const std::string& key) {
  const std::string what = str_cat(p.cfg_scale > 1.0f ? "one guided picture" : "one unguided picture (CFG 1)", ", ",
                                   all.strips(p), " strips", all.cfg_halves(p) ? " per guidance half" : "");
  if (!all.splits(p)) {
    std::printf("| %s | height %d does not split | | | |\n", what.c_str(), p.height);
    return;
  }
  const Timing alone = median_times(b.args.repeats, [&] { return b.one.generate(p, ParallelMode::kData); });
  const comm::ExchangeCounts before = all.counts();
  const Timing split = median_times(b.args.repeats, [&] { return all.generate(p, ParallelMode::kSplit); });
  const Exchanged sent = exchanged_since(before, all, b.args.repeats + 1, p.steps);
  const double mib = sent.bytes_per_step / (1024.0 * 1024.0), collectives = sent.collectives_per_step;
  const double decode_mib = sent.decode_bytes / (1024.0 * 1024.0);
  std::printf("| %s, exact image split (s) | %.3f | %.3f | %.2fx | %.1f MiB sent, %.0f collectives; decode %.1f MiB |\n",
              what.c_str(), alone.total_s, split.total_s, alone.total_s / split.total_s, mib, collectives, decode_mib);
  std::printf("| the same, denoising loop only (s) | %.3f | %.3f | %.2fx | |\n", alone.denoising_s, split.denoising_s,
              alone.denoising_s / split.denoising_s);
  nlohmann::json& r = b.report[key];
  r = {{"strips", all.strips(p)}, {"cfg_halves", all.cfg_halves(p)}, {"cfg_scale", p.cfg_scale},
       {"one_gpu_s", alone.total_s}, {"parallel_s", split.total_s}, {"speedup", alone.total_s / split.total_s},
       {"one_gpu_denoising_s", alone.denoising_s}, {"parallel_denoising_s", split.denoising_s},
       {"denoising_speedup", alone.denoising_s / split.denoising_s}, {"mib_sent_per_step", mib},
       {"decode_mib_sent", decode_mib},
       {"collectives_per_step", collectives}};
  // Displaced: the same exchanges after the warm-up's exact steps, overlapped with compute.
  const Timing displaced = median_times(b.args.repeats, [&] { return all.generate(p, ParallelMode::kDisplaced); });
  std::printf("| %s, displaced split (s) | %.3f | %.3f | %.2fx | %d exact steps first |\n", what.c_str(),
              alone.total_s, displaced.total_s, alone.total_s / displaced.total_s, all.displaced_warmup());
  std::printf("| the same, denoising loop only (s) | %.3f | %.3f | %.2fx | |\n", alone.denoising_s,
              displaced.denoising_s, alone.denoising_s / displaced.denoising_s);
  r["displaced"] = {{"parallel_s", displaced.total_s}, {"speedup", alone.total_s / displaced.total_s},
                    {"parallel_denoising_s", displaced.denoising_s},
                    {"denoising_speedup", alone.denoising_s / displaced.denoising_s},
                    {"warmup_steps", all.displaced_warmup()}};
}

// Throughput: a batch of one picture per GPU, and of --per-gpu pictures per GPU (where one GPU is busier
// with a larger batch).
void data_rows(const Bench& b, ParallelStableDiffusion& all, GenerationParams p) {
  const int n = all.size();
  b.report["data"] = nlohmann::json::array();
  for (int per_gpu : {1, b.args.per_gpu}) {
    if (per_gpu == 1 && b.args.per_gpu == 1 && !b.report["data"].empty()) break;
    p.batch = n * per_gpu;
    const double batch_one = median_seconds(b.args.repeats, [&] { return b.one.generate(p, ParallelMode::kData); });
    const double batch_all = median_seconds(b.args.repeats, [&] { return all.generate(p, ParallelMode::kData); });
    std::printf("| %d pictures, data parallel (images/s) | %.2f | %.2f | %.2fx | nothing |\n", p.batch,
                p.batch / batch_one, p.batch / batch_all, batch_one / batch_all);
    b.report["data"].push_back({{"batch", p.batch}, {"one_gpu_s", batch_one}, {"parallel_s", batch_all},
                                {"speedup", batch_one / batch_all}});
  }
}

int run(const Args& a) {
  std::string model = a.model;
  if (!a.arch.empty()) {
    const RandomModelSpec spec{parse_random_model_arch(a.arch)};
    model = random_model_folder(spec);
    write_random_model(spec, model);
  }
  const std::vector<Device> devices = parse_device_list(a.devices);
  const int n = int(devices.size());
  HD_CHECK(n >= 2, "the benchmark compares several GPUs with one: give at least 2 devices, not ", n);
  const auto load = [&](const std::vector<Device>& on) {
    return ParallelStableDiffusion::load(model, std::nullopt, std::nullopt, on, DType::kF16);
  };
  ParallelStableDiffusion one = load({devices[0]});
  ParallelStableDiffusion all = load(devices);
  all.set_displaced_warmup(a.displaced_warmup);
  // CFG parallel takes two GPUs: on more, its row uses the first two (a model of their own).
  std::optional<ParallelStableDiffusion> first_two;
  if (n > 2) first_two.emplace(load({devices[0], devices[1]}));

  GenerationParams p;
  p.prompt = "a photograph of an astronaut riding a horse";
  p.negative_prompt = "blurry";
  p.steps = a.steps;
  p.width = p.height = a.size > 0 ? a.size : one.model(0).default_image_size();
  p.seed = 1;
  std::printf("# %s, %dx%d, %d steps Euler, CFG 7.5, f16; %d devices (%s); medians of %d\n\n",
              one.model(0).description().c_str(), p.width, p.height, p.steps, n, all.exchange_name().c_str(),
              a.repeats);
  nlohmann::json report = {{"model", one.model(0).description()}, {"size", p.width}, {"steps", p.steps},
                           {"devices", n}, {"exchange", all.exchange_name()}};
  const Bench b{a, one, report};
  std::printf("| case | 1 GPU | %d GPUs | speed-up | per step exchanged (rank 0) |\n| --- | --- | --- | --- | --- |\n", n);
  cfg_row(b, first_two ? *first_two : all, p);
  first_two.reset();  // a third copy of the model on the first GPU, not needed past its row
  cfg_pairs_row(b, all, p);
  split_rows(b, all, p, "split");
  if (all.cfg_halves(p)) {
    // Guided pictures pair the GPUs up; an unguided one (CFG 1, as distilled models run) splits over all.
    GenerationParams unguided = p;
    unguided.cfg_scale = 1.0f;
    split_rows(b, all, unguided, "split_unguided");
  }
  data_rows(b, all, p);
  if (!a.json_out.empty()) std::ofstream(a.json_out) << report.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace hd

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each table row as it is measured, even into a pipe
  try {
    return hd::run(hd::parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hd_bench_parallel: error: %s\n", e.what());
    return 1;
  }
}
