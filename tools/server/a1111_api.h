// AUTOMATIC1111's API as this server speaks it (/sdapi/v1/*): its requests read into engine jobs, its
// responses written from the engine's results. No HTTP here (http_server.cpp), so that the rules are
// tested on their own: every field A1111 defines is either used, ignored because it cannot change the
// picture here, or accepted only at its neutral value; any other value, and any unknown field, is an
// Error (kInvalidInput, a 422) that names the fields.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/generation_params.h"
#include "serve/engine.h"

namespace hd::server {

// What the server allows one request (each a 4xx when exceeded).
struct RequestLimits {
  int64_t max_pixels = 2048 * 2048;  // width x height
  int max_steps = 150;
  int max_images = 16;  // batch_size x n_iter
};

enum class Endpoint { kTxt2Img, kImg2Img };

// One request read: a picture's parameters each (A1111's seeds: seed, seed + 1, ...), all of one model.
struct GenerationRequest {
  std::string model;                       // a catalogue name, or empty: the engine's current model
  std::string refiner;                     // SDXL's refiner, a catalogue name (empty: none)
  double refiner_switch_at = 0.8;          // the model's share of the schedule, with a refiner
  std::vector<serve::LoraRequest> loras;   // the prompt's <lora:NAME:SCALE> tags (taken out of its text)
  std::vector<GenerationParams> pictures;  // one an engine job
  std::optional<OwnedTensor> init_image;   // img2img's, shared by the pictures
  bool send_images = true;
  int batch_size = 1;              // A1111's (the pictures are batch_size x n_iter)
  std::vector<std::string> notes;  // fields taken but without effect here, for the response's info

  serve::JobRequest job(size_t picture) const;
};

// The fields an endpoint takes, for its OpenAPI schema: name, how it is taken ("used", "ignored",
// "neutral": accepted only where it leaves its feature off), and the feature a neutral field would ask for.
struct FieldDescription {
  std::string name, use, feature;
};
std::vector<FieldDescription> request_fields(Endpoint endpoint);

// Reads a txt2img / img2img body. `random_seed` is called for seed -1.
GenerationRequest read_generation(const nlohmann::json& body, Endpoint endpoint, const RequestLimits& limits,
                                  uint64_t (*random_seed)());

// One picture made: which of the request's, its PNG file and its infotext.
struct Delivered {
  size_t index;
  std::vector<uint8_t> png;  // empty when the request does not send its images
  std::string infotext;
};

// The response A1111 gives: images (base64 PNGs carrying their "parameters" text), the request's
// parameters echoed, and info (a JSON string: seeds, prompts, infotexts, ...), all of the pictures made,
// in order: fewer than the request's when some were skipped or interrupted, `images[i]` and
// `all_seeds[i]` always of the same picture. As the JSON text sent (see the .cpp for why not a json).
std::string generation_response(const nlohmann::json& body, const GenerationRequest& request,
                                const std::string& model_name, const std::vector<Delivered>& pictures,
                                bool interrupted);

// A request body: JSON nested at most 32 deep (deeper would only waste the stack of whoever walks it).
nlohmann::json parse_request(const std::string& body);

// GET /sdapi/v1/sd-models, /samplers, /schedulers.
nlohmann::json models_list(const serve::ModelCatalogue& catalogue);
// GET /sdapi/v1/loras: A1111's name, alias, path and metadata of each LoRA (--lora-dir).
nlohmann::json loras_list(const serve::LoraCatalogue& loras);
nlohmann::json samplers_list();
nlohmann::json schedulers_list();

// GET /sdapi/v1/options: what this server has of A1111's options. read_options: the model a POST asks for
// (sd_model_checkpoint), refusing every other option by name.
nlohmann::json options_of(const std::string& current_model);
std::optional<std::string> read_options(const nlohmann::json& body);

// GET /sdapi/v1/progress over the running jobs (A1111's fields; one job at a time in A1111, every running
// one here: progress is over all their steps).
nlohmann::json progress_of(const serve::Engine::Status& status);

}  // namespace hd::server
