#include "tools/server/openapi.h"

#include <string>

#include "core/error.h"
#include "pipeline/infotext.h"

namespace hd::server {

namespace {

using nlohmann::json;

json string_schema() {
  return {{"type", "string"}};
}
json nullable(json schema) {
  schema["nullable"] = true;
  if (schema.contains("enum")) schema["enum"].push_back(nullptr);  // an enum must list null to allow it
  return schema;
}

// The schema of each request field: what a1111_api.cpp accepts (neutral-only fields: their neutral values).
json field_schema(const std::string& name, const RequestLimits& limits) {
  std::vector<std::string> samplers = a1111_sampler_names();
  samplers.push_back("DPM++ 2M Karras");
  if (name == "prompt" || name == "negative_prompt") return nullable(string_schema());
  if (name == "seed") return json{{"type", "integer"}, {"minimum", -1}, {"description", "-1: a random seed"}};
  if (name == "sampler_name" || name == "sampler_index")
    return nullable(json{{"type", "string"}, {"enum", samplers}});
  if (name == "scheduler")
    return nullable(json{{"type", "string"}, {"enum", {"Automatic", "automatic", "Karras", "karras"}}});
  if (name == "batch_size" || name == "n_iter")
    return json{{"type", "integer"},
                {"minimum", 1},
                {"maximum", limits.max_images},
                {"description", "batch_size x n_iter pictures, at most the server's limit"}};
  if (name == "steps") return json{{"type", "integer"}, {"minimum", 1}, {"maximum", limits.max_steps}};
  if (name == "cfg_scale") return json{{"type", "number"}, {"minimum", 0}, {"maximum", 100}};
  if (name == "width" || name == "height")
    return json{{"type", "integer"},
                {"minimum", 8},
                {"maximum", 8192},
                {"multipleOf", 8},
                {"description", "width x height at most the server's pixel limit"}};
  if (name == "eta")
    return nullable(
        json{{"type", "number"},
             {"minimum", 0},
             {"maximum", 1},
             {"description", "Euler a takes 1 only, DDIM 0 only; the other samplers do not read it"}});
  if (name == "override_settings")
    return nullable(json{{"type", "object"},
                         {"properties", {{"sd_model_checkpoint", string_schema()}}},
                         {"additionalProperties", false},
                         {"description", "only the model can be set per request"}});
  if (name == "send_images") return nullable(json{{"type", "boolean"}});
  if (name == "disable_extra_networks")
    return nullable(json{{"type", "boolean"},
                         {"description", "true: the prompt's <lora:...> tags are removed, not applied"}});
  if (name == "init_images")
    return json{{"type", "array"},
                {"items", string_schema()},
                {"minItems", 1},
                {"maxItems", 1},
                {"description", "one base64 PNG of the request's width and height (no resizing)"}};
  if (name == "denoising_strength") return nullable(json{{"type", "number"}, {"minimum", 0}, {"maximum", 1}});
  if (name == "refiner_checkpoint")
    return nullable(
        json{{"type", "string"},
             {"description", "SDXL's refiner, a model of /sdapi/v1/sd-models (\"\", \"None\" or \"none\": none)"}});
  if (name == "refiner_switch_at")
    return nullable(json{{"type", "number"},
                         {"minimum", 0},
                         {"maximum", 1},
                         {"description",
                          "with a refiner (required then, exclusive of 0 and 1): the model's share of "
                          "the schedule by noise level, as A1111 switches by timestep"}});
  // neutral only: the value that leaves the feature off
  if (name == "styles" || name == "script_args") return nullable(json{{"type", "array"}, {"maxItems", 0}});
  if (name == "alwayson_scripts") return nullable(json{{"type", "object"}, {"maxProperties", 0}});
  if (name == "subseed_strength" || name == "s_churn" || name == "s_min_uncond")
    return nullable(json{{"type", "number"}, {"enum", {0}}});
  if (name == "s_noise" || name == "initial_noise_multiplier")
    return nullable(json{{"type", "number"}, {"enum", {1}}});
  if (name == "seed_resize_from_h" || name == "seed_resize_from_w")
    return nullable(json{{"type", "integer"}, {"maximum", 0}});
  if (name == "restore_faces" || name == "tiling" || name == "save_images" || name == "enable_hr" ||
      name == "include_init_images")
    return nullable(json{{"type", "boolean"}, {"enum", {false}}});
  if (name == "script_name" || name == "infotext" || name == "firstpass_image" || name == "mask" ||
      name == "latent_mask")
    return nullable(json{{"type", "string"}, {"maxLength", 0}});
  return json::object();  // ignored: any value
}

json request_schema(Endpoint endpoint, const RequestLimits& limits) {
  json properties = json::object();
  for (const FieldDescription& f : request_fields(endpoint)) {
    // An ignored field takes any value (txt2img's denoising_strength, which is img2img's in use, too).
    json schema = f.use == "ignored" ? json::object() : field_schema(f.name, limits);
    if (f.use == "ignored") schema["description"] = "accepted and ignored: it cannot change the picture here";
    if (f.use == "neutral") schema["description"] = "accepted only where it leaves " + f.feature + " off";
    properties[f.name] = schema;
  }
  json schema = {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
  if (endpoint == Endpoint::kImg2Img) schema["required"] = {"init_images"};
  return schema;
}

json error_schema() {
  return {{"type", "object"}, {"properties", {{"detail", string_schema()}}}, {"required", {"detail"}}};
}

json content(const json& schema) {
  return {{"application/json", {{"schema", schema}}}};
}

// The answers every route can give besides its own: authentication, a body too large, a bad request.
json responses(const json& ok, bool takes_body) {
  json r = {
      {"200", {{"description", "OK"}, {"content", content(ok)}}},
      {"401",
       {{"description", "authentication required (--api-auth)"}, {"content", content(error_schema())}}}};
  if (takes_body) {
    r["400"] = {{"description", "a malformed HTTP request"}, {"content", content(error_schema())}};
    r["413"] = {{"description", "a body above the server's limit"}, {"content", content(error_schema())}};
    r["422"] = {{"description", "a request the server cannot take: the detail names the fields"},
                {"content", content(error_schema())}};
    r["503"] = {
        {"description", "the queue is full, the server is stopping, or memory ran out: try again later"},
        {"content", content(error_schema())}};
  }
  return r;
}

// A route's operation; `body`: its request body's schema, if it takes one. (A json* rather than an
// optional<json>: GCC 16 finds optional<json>'s construction from a json ambiguous.)
json operation(const std::string& summary, const json& ok, const json* body = nullptr) {
  json op = {{"summary", summary}, {"responses", responses(ok, body != nullptr)}};
  if (body != nullptr) op["requestBody"] = {{"required", true}, {"content", content(*body)}};
  return op;
}

}  // namespace

json openapi_document(const RequestLimits& limits) {
  const json generation = {{"type", "object"},
                           {"properties",
                            {{"images", {{"type", "array"}, {"items", string_schema()}}},
                             {"parameters", {{"type", "object"}}},
                             {"info", string_schema()}}},
                           {"required", {"images", "parameters", "info"}}};
  const json models = {{"type", "array"},
                       {"items",
                        {{"type", "object"},
                         {"properties",
                          {{"title", string_schema()},
                           {"model_name", string_schema()},
                           {"filename", string_schema()},
                           {"hash", nullable(string_schema())},
                           {"sha256", nullable(string_schema())},
                           {"config", nullable(string_schema())}}},
                         {"required", {"title", "model_name", "filename"}}}}};
  const json loras = {{"type", "array"},
                      {"items",
                       {{"type", "object"},
                        {"properties",
                         {{"name", string_schema()},
                          {"alias", string_schema()},
                          {"path", string_schema()},
                          {"metadata", {{"type", "object"}}}}},
                        {"required", {"name", "alias", "path", "metadata"}}}}};
  const json named = {
      {"type", "array"},
      {"items", {{"type", "object"}, {"properties", {{"name", string_schema()}}}, {"required", {"name"}}}}};
  const json progress = {{"type", "object"},
                         {"properties",
                          {{"progress", {{"type", "number"}}},
                           {"eta_relative", {{"type", "number"}}},
                           {"state", {{"type", "object"}}},
                           {"current_image", nullable(string_schema())},
                           {"textinfo", nullable(string_schema())}}},
                         {"required", {"progress", "eta_relative", "state"}}};
  const json options = {{"type", "object"}, {"properties", {{"sd_model_checkpoint", string_schema()}}}};
  const json options_body = {{"type", "object"},
                             {"properties", {{"sd_model_checkpoint", nullable(string_schema())}}},
                             {"additionalProperties", false}};
  const json empty = {{"type", "object"}};
  const json txt2img = request_schema(Endpoint::kTxt2Img, limits),
             img2img = request_schema(Endpoint::kImg2Img, limits);
  json post_options =
      operation("Load a model for the requests that name none", nullable(empty), &options_body);
  post_options["responses"]["200"]["content"]["application/json"]["schema"] = {{"nullable", true}};
  return {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "hipDiffusion"},
        {"version", HD_VERSION},
        {"description", "AUTOMATIC1111's API (/sdapi/v1), served by hipDiffusion's engine"}}},
      {"paths",
       {{"/sdapi/v1/txt2img", {{"post", operation("Text to image", generation, &txt2img)}}},
        {"/sdapi/v1/img2img", {{"post", operation("Image to image", generation, &img2img)}}},
        {"/sdapi/v1/progress", {{"get", operation("Progress of the generations in progress", progress)}}},
        {"/sdapi/v1/interrupt", {{"post", operation("Stop the requests being made", empty)}}},
        {"/sdapi/v1/skip", {{"post", operation("Skip the picture being made", empty)}}},
        {"/sdapi/v1/sd-models", {{"get", operation("The models this server offers", models)}}},
        {"/sdapi/v1/loras",
         {{"get", operation("The LoRAs this server offers (<lora:NAME:SCALE> in a prompt)", loras)}}},
        {"/sdapi/v1/samplers", {{"get", operation("The samplers", named)}}},
        {"/sdapi/v1/schedulers", {{"get", operation("The schedules", named)}}},
        {"/sdapi/v1/options",
         {{"get", operation("The options this server has", options)}, {"post", post_options}}},
        {"/internal/ping", {{"get", operation("Whether the server answers", empty)}}}}},
  };
}

}  // namespace hd::server
