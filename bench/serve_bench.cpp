// The serving engine under load: K clients, each submitting a generation and waiting for it before the
// next (closed loop), for K in --clients, with batching across requests on and off. Reports images/s,
// latency p50/p99, the UNet rows per call, and a lone request's latency against the pipeline's own
// in-process time (StableDiffusion::generate, the CLI's path) measured in the same run.
// With --devices (several GPUs, a worker each), the same loads run on the first of them alone and on all.
//   hd_bench_serve --arch sd15 | --model PATH  [--device cuda:0 | --devices cuda:0,cuda:1] [--size 512] [--steps 20]
//                  [--clients 1,4,16] [--images 32] [--max-batch-rows 16] [--json-out FILE]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "ops/placement.h"
#include "pipeline/parallel_generation.h"
#include "pipeline/random_model.h"
#include "serve/engine.h"

namespace hd {
namespace {

struct Args {
  std::string model, arch, device = "cuda:0", devices, json_out;
  int size = 512, steps = 20, images = 32, max_batch_rows = 16;
  std::vector<int> clients = {1, 4, 16};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    HD_CHECK(i + 1 < argc, flag, " needs a value");
    const std::string v = argv[++i];
    if (flag == "--model")
      a.model = v;
    else if (flag == "--arch")
      a.arch = v;
    else if (flag == "--device")
      a.device = v;
    else if (flag == "--devices")
      a.devices = v;
    else if (flag == "--json-out")
      a.json_out = v;
    else if (flag == "--size")
      a.size = std::stoi(v);
    else if (flag == "--steps")
      a.steps = std::stoi(v);
    else if (flag == "--images")
      a.images = std::stoi(v);
    else if (flag == "--max-batch-rows")
      a.max_batch_rows = std::stoi(v);
    else if (flag == "--clients") {
      a.clients.clear();
      for (const std::string_view item : split_list(v)) a.clients.push_back(std::stoi(std::string(item)));
    } else
      throw Error(ErrorKind::kInvalidInput, "unknown flag " + flag);
  }
  HD_CHECK(!a.model.empty() || !a.arch.empty(), "--model PATH or --arch sd15|sd21|sdxl");
  return a;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

GenerationParams params_of(const Args& a, uint64_t seed) {
  GenerationParams p;
  p.prompt = "a photograph of an astronaut riding a horse";
  p.negative_prompt = "blurry";
  p.steps = a.steps;
  p.width = p.height = a.size;
  p.seed = seed;
  return p;
}

struct Load {
  double seconds = 0, images_per_second = 0, p50 = 0, p99 = 0, rows_per_call = 0;
};

// `clients` threads, each submitting and waiting, until `images` generations have ended.
Load run_load(serve::Engine& engine, const Args& a, int clients, int images) {
  const serve::Engine::Status before = engine.status();
  std::atomic<int> next = 0;
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = next++; i < images; i = next++) {
        const auto submitted = std::chrono::steady_clock::now();
        serve::JobRequest request;
        request.params = params_of(a, uint64_t(i));
        engine.submit(std::move(request))->wait();
        latencies[size_t(c)].push_back(ms_since(submitted) / 1e3);
      }
    });
  }
  for (auto& t : threads) t.join();
  Load l;
  l.seconds = ms_since(start) / 1e3;
  l.images_per_second = images / l.seconds;
  std::vector<double> all;
  for (const auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  l.p50 = percentile(all, 0.5);
  l.p99 = percentile(all, 0.99);
  const serve::Engine::Status after = engine.status();
  l.rows_per_call = double(after.unet_rows - before.unet_rows) / double(after.unet_calls - before.unet_calls);
  return l;
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::string model = a.model;
  if (!a.arch.empty()) {
    const RandomModelSpec spec{parse_random_model_arch(a.arch)};
    model = random_model_folder(spec);
    write_random_model(spec, model);
  }
  const std::vector<Device> devices = parse_device_list(a.devices.empty() ? a.device : a.devices);
  const ops::Placement placement = ops::Placement::parse(devices[0].to_string());
  // The engine's device sets: the first device alone, then all of them (when several).
  std::vector<std::vector<Device>> device_sets = {{devices[0]}};
  if (devices.size() > 1) device_sets.push_back(devices);
  nlohmann::json out = {
      {"model", model}, {"device", placement.to_string()}, {"size", a.size}, {"steps", a.steps}};

  // The pipeline's own time for one image (the CLI's path), in this process, warm.
  double in_process = 0;
  {
    const StableDiffusion sd = StableDiffusion::load(model, std::nullopt, std::nullopt, placement);
    std::vector<double> times;
    for (int i = 0; i < 6; ++i) {
      const auto start = std::chrono::steady_clock::now();
      sd.generate(params_of(a, uint64_t(i)));
      if (i > 0) times.push_back(ms_since(start) / 1e3);
    }
    in_process = percentile(times, 0.5);
  }
  std::printf("in-process generate (the CLI's path): %.3f s an image\n\n", in_process);
  out["in_process_seconds"] = in_process;
  std::printf(
      "| devices | clients | batching | images/s | p50 s | p99 s | UNet rows a call |\n| --- | --- | --- | --- | --- | "
      "--- | --- |\n");
  for (const std::vector<Device>& set : device_sets)
  for (bool batching : {false, true}) {
    serve::EngineOptions o;
    o.catalogue = serve::ModelCatalogue::from({model}, std::nullopt);
    o.placement = placement;
    o.devices = set;
    o.batch_across_jobs = batching;
    o.max_batch_rows = a.max_batch_rows;
    o.max_queue = 1024;
    serve::Engine engine(std::move(o));
    for (int clients : a.clients) {
      run_load(engine, a, clients, std::max(clients, 2));  // warm: each batch shape captured and tuned
      const Load l = run_load(engine, a, clients, std::max(a.images, clients));
      std::printf("| %zu | %d | %s | %.3f | %.3f | %.3f | %.1f |\n", set.size(), clients, batching ? "on" : "off",
                  l.images_per_second, l.p50, l.p99, l.rows_per_call);
      std::fflush(stdout);
      out["runs"].push_back({{"devices", set.size()},
                             {"clients", clients},
                             {"batching", batching},
                             {"images_per_second", l.images_per_second},
                             {"p50_seconds", l.p50},
                             {"p99_seconds", l.p99},
                             {"rows_per_call", l.rows_per_call},
                             {"seconds", l.seconds}});
    }
  }
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace hd

int main(int argc, char** argv) {
  try {
    return hd::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hd_bench_serve: %s\n", e.what());
    return 1;
  }
}
