// The C API (include/hipdiffusion/hipdiffusion.h) over the serving engine: every call catches what the
// engine throws and turns it into a status and this thread's message; nothing C++ leaves this file.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/error.h"
#include "hipdiffusion/hipdiffusion.h"
#include "io/png.h"
#include "pipeline/init_image.h"
#include "pipeline/parallel_generation.h"
#include "serve/engine.h"

struct hd_engine {
  std::unique_ptr<hd::serve::Engine> engine;
};

struct hd_result {
  std::vector<hd::RgbImage> images;
  uint64_t seed = 0;
  double seconds = 0;
};

namespace {

thread_local std::string last_error;

hd_status status_of(hd::ErrorKind kind) {
  switch (kind) {
    case hd::ErrorKind::kInvalidInput:
      return HD_ERROR_INVALID_ARGUMENT;
    case hd::ErrorKind::kUnsupported:
      return HD_ERROR_UNSUPPORTED;
    case hd::ErrorKind::kOutOfMemory:
      return HD_ERROR_OUT_OF_MEMORY;
    case hd::ErrorKind::kRuntime:
      return HD_ERROR_RUNTIME;
    case hd::ErrorKind::kInternal:
      return HD_ERROR_INTERNAL;
    case hd::ErrorKind::kBusy:
      return HD_ERROR_BUSY;
    case hd::ErrorKind::kCancelled:
      return HD_ERROR_CANCELLED;
  }
  return HD_ERROR_INTERNAL;
}

// Runs `body`, turning any exception into a status and this thread's message.
template <typename Body>
hd_status guarded(Body&& body) {
  try {
    body();
    last_error.clear();
    return HD_OK;
  } catch (const hd::Error& e) {
    last_error = e.what();
    return status_of(e.kind());
  } catch (const std::bad_alloc&) {
    last_error = "out of host memory";
    return HD_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
    return HD_ERROR_INTERNAL;
  } catch (...) {
    last_error = "internal error: an unknown exception";
    return HD_ERROR_INTERNAL;
  }
}

// The sizes of the structs as HD_API_VERSION 1 defines them. A later version appends fields, keeps these
// as the least a caller's struct_size may say, and reads a new field only when struct_size covers it.
constexpr size_t kEngineOptionsV1 = offsetof(hd_engine_options, keep_models);  // versions 1 and 2
constexpr size_t kEngineOptionsV3 = offsetof(hd_engine_options, model_memory_bytes);  // + keep_models
constexpr size_t kEngineOptionsV4 = offsetof(hd_engine_options, lora_dir);            // + model_memory_bytes
constexpr size_t kEngineOptionsV5 = sizeof(hd_engine_options);                        // + lora_dir
constexpr size_t kGenerationParamsV1 = offsetof(hd_generation_params, refiner);
constexpr size_t kGenerationParamsV2 =
    offsetof(hd_generation_params, lora_names);                       // + refiner, refiner_switch_at
constexpr size_t kGenerationParamsV3 = sizeof(hd_generation_params);  // + the LoRAs

template <typename Struct>
void check_struct(const Struct* s, size_t version1_size, const char* what) {
  HD_CHECK(s != nullptr, what, " is NULL");
  HD_CHECK(s->struct_size >= version1_size, what, "'s struct_size ", s->struct_size, " is below version 1's ",
           version1_size, ": set it with its _init function");
}

// An _init_sized function's common part: the fields both the caller's struct (`size` bytes) and this
// library's have, zeroed, and struct_size set. Returns that size, or 0 (nothing written) when `size` is
// below version 1's.
template <typename Struct>
size_t zero_known_fields(Struct* s, size_t size, size_t version1_size) {
  if (s == nullptr || size < version1_size) return 0;
  size = std::min(size, sizeof *s);  // a later version's struct: the fields this library knows
  std::memset(s, 0, size);
  s->struct_size = uint32_t(size);
  return size;
}

std::string text_or(const char* s, const char* fallback = "") {
  return s != nullptr ? s : fallback;
}

hd::serve::JobRequest request_of(const hd_generation_params& c) {
  HD_CHECK(c.prompt != nullptr, "the prompt is NULL (an empty prompt is \"\")");
  hd::serve::JobRequest r;
  r.model = text_or(c.model);
  hd::GenerationParams& p = r.params;
  p.prompt = c.prompt;
  p.negative_prompt = text_or(c.negative_prompt);
  p.steps = c.steps;
  p.cfg_scale = c.cfg_scale;
  p.sampler = hd::parse_sampler(text_or(c.sampler, "euler"));
  p.schedule = hd::parse_sigma_schedule(text_or(c.schedule, "discrete"));
  hd::check_sampler_schedule(p.sampler, p.schedule);
  p.seed = c.seed;
  p.batch = c.batch;
  HD_CHECK(c.width > 0 && c.height > 0,
           "the width and height must be given (e.g. 512x512 for SD1.x, 1024x1024 "
           "for SDXL), got ",
           c.width, "x", c.height);
  p.width = c.width;
  p.height = c.height;
  if (c.init_image != nullptr) {
    p.strength = c.strength;
    hd::validate(p, 8);  // the size, before reading width x height x 3 bytes of the caller's
    hd::RgbImage image{c.width, c.height,
                       std::vector<uint8_t>(c.init_image, c.init_image + size_t(c.width) * c.height * 3)};
    r.init_image = hd::init_image_of(image);
  }
  if (c.struct_size >= kGenerationParamsV2 && c.refiner != nullptr) {
    r.refiner = c.refiner;
    r.refiner_switch_at = c.refiner_switch_at;
  }
  if (c.struct_size >= kGenerationParamsV3 && c.lora_count > 0) {
    HD_CHECK(c.lora_names != nullptr, "lora_count is ", c.lora_count, " but lora_names is NULL");
    for (size_t i = 0; i < c.lora_count; ++i) {
      HD_CHECK(c.lora_names[i] != nullptr, "LoRA name ", i, " is NULL");
      r.loras.push_back({c.lora_names[i], c.lora_scales != nullptr ? c.lora_scales[i] : 1.0f});
    }
  }
  return r;
}

}  // namespace

extern "C" {

const char* hd_status_name(hd_status status) {
  switch (status) {
    case HD_OK:
      return "ok";
    case HD_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case HD_ERROR_UNSUPPORTED:
      return "unsupported";
    case HD_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case HD_ERROR_RUNTIME:
      return "runtime error";
    case HD_ERROR_INTERNAL:
      return "internal error";
    case HD_ERROR_BUSY:
      return "busy";
    case HD_ERROR_CANCELLED:
      return "cancelled";
  }
  return "unknown status";
}

const char* hd_last_error(void) {
  return last_error.c_str();
}

const char* hd_version(void) {
  return HD_VERSION;
}

void hd_engine_options_init_sized(hd_engine_options* options, size_t size) {
  size = zero_known_fields(options, size, kEngineOptionsV1);
  if (size == 0) return;
  options->max_queue = 64;
  options->max_batch_rows = 16;
  options->batch_across_generations = 1;
  if (size >= kEngineOptionsV3) options->keep_models = 1;
}

// Versions 1 and 2's, for programs built against them (this file's header makes the name a macro).
#undef hd_engine_options_init
void hd_engine_options_init(hd_engine_options* options) {
  hd_engine_options_init_sized(options, kEngineOptionsV1);
}

hd_status hd_engine_create(const hd_engine_options* options, hd_engine** engine) {
  return guarded([&] {
    HD_CHECK(engine != nullptr, "the engine pointer is NULL");
    *engine = nullptr;
    check_struct(options, kEngineOptionsV1, "the engine options");
    std::vector<std::string> models;
    HD_CHECK(options->model_count == 0 || options->model_paths != nullptr, "model_count is ",
             options->model_count, " but model_paths is NULL");
    for (size_t i = 0; i < options->model_count; ++i) {
      HD_CHECK(options->model_paths[i] != nullptr, "model path ", i, " is NULL");
      models.emplace_back(options->model_paths[i]);
    }
    hd::serve::EngineOptions o;
    o.catalogue = hd::serve::ModelCatalogue::from(
        models, options->models_dir ? std::optional<std::string>(options->models_dir) : std::nullopt);
    // A list ("cuda:0,cuda:1") or "all": a worker per device, each with its own copy of the model.
    const std::string device = text_or(options->device, "cpu");
    if (device == "all" || device.find(',') != std::string::npos) o.devices = hd::parse_device_list(device);
    o.placement = hd::ops::Placement::parse(o.devices.empty() ? device : o.devices[0].to_string(),
                                            text_or(options->dtype));
    o.max_queue = options->max_queue;
    o.max_batch_rows = int(options->max_batch_rows);
    o.batch_across_jobs = options->batch_across_generations != 0;
    if (options->struct_size >= kEngineOptionsV3 && options->keep_models != 0) {
      HD_CHECK(options->keep_models <= 64, "keep_models must be between 1 and 64, got ", options->keep_models);
      o.keep_models = int(options->keep_models);
    }
    if (options->struct_size >= kEngineOptionsV4) o.model_memory = size_t(options->model_memory_bytes);
    if (options->struct_size >= kEngineOptionsV5 && options->lora_dir != nullptr)
      o.loras = hd::serve::LoraCatalogue::from(std::string(options->lora_dir));
    auto made = std::make_unique<hd_engine>();
    made->engine = std::make_unique<hd::serve::Engine>(std::move(o));
    *engine = made.release();
  });
}

void hd_engine_free(hd_engine* engine) {
  delete engine;
}

size_t hd_engine_model_count(const hd_engine* engine) {
  return engine != nullptr ? engine->engine->catalogue().entries().size() : 0;
}

const char* hd_engine_model_name(const hd_engine* engine, size_t index) {
  if (engine == nullptr || index >= hd_engine_model_count(engine)) return nullptr;
  return engine->engine->catalogue().entries()[index].name.c_str();
}

hd_status hd_engine_select_model(hd_engine* engine, const char* name) {
  return guarded([&] {
    HD_CHECK(engine != nullptr && name != nullptr, "the engine or the model name is NULL");
    engine->engine->select_model(name);
  });
}

int32_t hd_api_version(void) {
  return HD_API_VERSION;
}

void hd_generation_params_init_sized(hd_generation_params* params, size_t size) {
  size = zero_known_fields(params, size, kGenerationParamsV1);
  if (size == 0) return;
  params->steps = 20;
  params->cfg_scale = 7.5f;
  params->batch = 1;
  params->strength = 0.75f;
  if (size >= kGenerationParamsV2) params->refiner_switch_at = 0.8;
}

// Version 1's, for programs built against it (this file's header makes the name a macro).
#undef hd_generation_params_init
void hd_generation_params_init(hd_generation_params* params) {
  hd_generation_params_init_sized(params, kGenerationParamsV1);
}

hd_status hd_generate(hd_engine* engine, const hd_generation_params* params, hd_result** result) {
  return guarded([&] {
    HD_CHECK(engine != nullptr && result != nullptr, "the engine or the result pointer is NULL");
    *result = nullptr;
    check_struct(params, kGenerationParamsV1, "the generation parameters");
    const auto job = engine->engine->submit(request_of(*params));
    // Progress on the caller's thread: the worker never calls into the caller's code.
    while (!job->wait_for(std::chrono::milliseconds(20))) {
      if (params->progress == nullptr) continue;
      const hd::serve::JobProgress p = job->progress();
      if (params->progress(p.steps_done, p.steps_total, params->progress_user_data) != 0) job->cancel();
    }
    const hd::GenerationResult& generated = job->wait();
    if (params->progress != nullptr) {
      const hd::serve::JobProgress p = job->progress();
      params->progress(p.steps_done, p.steps_total, params->progress_user_data);
    }
    auto made = std::make_unique<hd_result>();
    for (int64_t i = 0; i < generated.image.view().dim(0); ++i)
      made->images.push_back(hd::rgb8_of(generated.image, i));
    made->seed = params->seed;
    made->seconds = generated.times.total / 1e3;
    *result = made.release();
  });
}

int32_t hd_result_image_count(const hd_result* result) {
  return result != nullptr ? int32_t(result->images.size()) : 0;
}

hd_status hd_result_image(const hd_result* result, int32_t index, int32_t* width, int32_t* height,
                          const uint8_t** rgb) {
  return guarded([&] {
    HD_CHECK(result != nullptr && width != nullptr && height != nullptr && rgb != nullptr,
             "the result or an output pointer is NULL");
    HD_CHECK(index >= 0 && index < int32_t(result->images.size()), "image ", index, " of ",
             result->images.size());
    const hd::RgbImage& image = result->images[size_t(index)];
    *width = image.width;
    *height = image.height;
    *rgb = image.pixels.data();
  });
}

uint64_t hd_result_seed(const hd_result* result) {
  return result != nullptr ? result->seed : 0;
}
double hd_result_seconds(const hd_result* result) {
  return result != nullptr ? result->seconds : 0.0;
}
void hd_result_free(hd_result* result) {
  delete result;
}

}  // extern "C"
