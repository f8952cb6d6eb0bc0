// `hipdiffusion serve`: AUTOMATIC1111's API over HTTP on one serving engine that keeps its models loaded
// and batches the requests' steps together (tools/server/, src/serve/).
#include <cstdio>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"

#if HD_WITH_SERVER
#include "pipeline/parallel_generation.h"
#include "serve/engine.h"
#include "tools/server/http_server.h"
#endif

namespace hd::cli {

int run_serve(std::span<const std::string_view> args) {
#if HD_WITH_SERVER
  const Flags flags("serve", args, {"--model",        "--models-dir",        "--host",        "--port",
                                    "--device",       "--devices",           "--dtype",       "--api-auth",
                                    "--max-queue",    "--max-batch-rows",    "--max-body-mb", "--max-pixels",
                                    "--max-steps",    "--max-images",        "--tune",        "--tune-cache",
                                    "--kernels",      "--max-device-memory", "--threads",     "--keep-models",
                                    "--model-memory", "--lora-dir"},
                    {"--no-batching"});
  serve::EngineOptions engine;
  std::vector<std::string> models;
  if (auto v = flags.get("--model")) models.push_back(*v);
  engine.catalogue = serve::ModelCatalogue::from(models, flags.get("--models-dir"));
  // A1111's --lora-dir: the LoRAs a prompt's <lora:NAME:SCALE> may ask for.
  engine.loras = serve::LoraCatalogue::from(flags.get("--lora-dir"));
  // One worker per device (--devices: each with its own copy of the model, taking requests from one queue).
  HD_CHECK(!flags.get("--device") || !flags.get("--devices"), "--device and --devices both say where to compute: give one");
  if (auto v = flags.get("--devices")) {
    engine.devices = parse_device_list(*v);
    engine.placement = ops::Placement::parse(engine.devices[0].to_string(), flags.get("--dtype").value_or(""));
  } else {
    engine.placement = placement_of(flags);
  }
  for (const Device& d : engine.devices.empty() ? std::vector<Device>{engine.placement.device} : engine.devices)
    apply_device_memory_limit(flags, ops::Placement{d, engine.placement.dtype});
  apply_kernel_choice(flags);
  apply_tuning(flags);
  if (auto v = flags.get("--max-queue")) engine.max_queue = size_t(parse_number<int64_t>("--max-queue", *v));
  HD_CHECK(engine.max_queue >= 1 && engine.max_queue <= 4096, "--max-queue must be between 1 and 4096, got ",
           engine.max_queue);
  if (auto v = flags.get("--max-batch-rows"))
    engine.max_batch_rows = parse_number<int>("--max-batch-rows", *v);
  engine.batch_across_jobs = !flags.has("--no-batching");
  if (auto v = flags.get("--keep-models")) engine.keep_models = parse_number<int>("--keep-models", *v);
  HD_CHECK(engine.keep_models >= 1 && engine.keep_models <= 64, "--keep-models must be between 1 and 64, got ",
           engine.keep_models);
  if (auto v = flags.get("--model-memory")) {
    const auto gib = parse_number<double>("--model-memory", *v);
    HD_CHECK(gib > 0.0 && gib <= 65536.0, "--model-memory must be a size in GiB above 0, got ", *v);
    engine.model_memory = size_t(gib * double(size_t(1) << 30));
  }
  if (auto v = flags.get("--threads")) ThreadPool::set_global_threads(parse_number<int>("--threads", *v));

  server::ServerOptions http;
  http.host = flags.get("--host").value_or("127.0.0.1");
  if (auto v = flags.get("--port")) http.port = parse_number<int>("--port", *v);
  HD_CHECK(http.port >= 0 && http.port <= 65535, "--port must be between 0 and 65535, got ", http.port);
  if (auto v = flags.get("--api-auth")) http.credentials = server::parse_credentials(*v);
  if (auto v = flags.get("--max-body-mb")) {
    const int64_t mb = parse_number<int64_t>("--max-body-mb", *v);
    HD_CHECK(mb >= 1 && mb <= 4096, "--max-body-mb must be between 1 and 4096, got ", mb);
    http.max_body_bytes = size_t(mb) << 20;
  }
  if (auto v = flags.get("--max-pixels")) http.limits.max_pixels = parse_number<int64_t>("--max-pixels", *v);
  if (auto v = flags.get("--max-steps")) http.limits.max_steps = parse_number<int>("--max-steps", *v);
  if (auto v = flags.get("--max-images")) http.limits.max_images = parse_number<int>("--max-images", *v);
  HD_CHECK(
      http.limits.max_pixels >= 64 && http.limits.max_steps >= 1 && http.limits.max_steps <= 1000 &&
          http.limits.max_images >= 1 && http.limits.max_images <= 1024,
      "--max-pixels must be at least 64, --max-steps between 1 and 1000, --max-images between 1 and 1024");
  if (http.host != "127.0.0.1" && http.host != "localhost" && http.host != "::1" && http.credentials.empty())
    std::fprintf(stderr, "warning: listening on %s without --api-auth: anyone who reaches it can generate\n",
                 http.host.c_str());

  serve::Engine served(std::move(engine));
  std::fprintf(stderr, "models: ");
  for (const auto& e : served.catalogue().entries()) std::fprintf(stderr, "%s ", e.name.c_str());
  std::fprintf(stderr, "(on %s %s, a worker each; loaded at the first request)\n",
               device_list_name(served.devices()).c_str(),
               std::string(dtype_name(served.options().placement.dtype)).c_str());
  return server::serve_http(served, http);
#else
  (void)args;
  throw Error(
      ErrorKind::kUnsupported,
      "this build has no server: configure with -DHD_SERVER=ON (it needs libcpp-httplib-dev and libssl-dev)");
#endif
}

}  // namespace hd::cli
