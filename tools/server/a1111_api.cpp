#include "tools/server/a1111_api.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "pipeline/expert_ensemble.h"
#include "pipeline/infotext.h"
#include "pipeline/init_image.h"
#include "tools/server/base64.h"
#include "tools/server/extra_networks.h"

namespace hd::server {

namespace {

using nlohmann::json;

// ---- the fields: how each of A1111's request fields is taken here ----

enum class Use {
  kUsed,     // read into the job
  kIgnored,  // cannot change the picture here (saving flags, fields of features that are off)
  kNeutral,  // accepted only at the value that leaves its feature off
};

enum Where { kBoth, kTxt2ImgOnly, kImg2ImgOnly };

struct Field {
  const char* name;
  Use use;
  Where where;
  std::function<bool(const json&)> neutral;  // kNeutral: whether the value leaves the feature off
  const char* feature;                       // kNeutral: what a non-neutral value asks for
};

bool off(const json& v) {
  return v.is_null() || v == false;
}
bool empty(const json& v) {  // (json::empty() is false for every string, "" included)
  return v.is_null() || ((v.is_array() || v.is_object()) && v.empty()) ||
         (v.is_string() && v.get_ref<const std::string&>().empty());
}
std::function<bool(const json&)> equals(double x) {
  return [x](const json& v) { return v.is_null() || (v.is_number() && v.get<double>() == x); };
}
bool not_positive(const json& v) {
  return v.is_null() || (v.is_number() && v.get<double>() <= 0);
}

const std::vector<Field>& fields() {
  static const std::vector<Field> all = {
      // used
      {"prompt", Use::kUsed, kBoth, {}, ""},
      {"negative_prompt", Use::kUsed, kBoth, {}, ""},
      {"seed", Use::kUsed, kBoth, {}, ""},
      {"sampler_name", Use::kUsed, kBoth, {}, ""},
      {"sampler_index", Use::kUsed, kBoth, {}, ""},
      {"scheduler", Use::kUsed, kBoth, {}, ""},
      {"batch_size", Use::kUsed, kBoth, {}, ""},
      {"n_iter", Use::kUsed, kBoth, {}, ""},
      {"steps", Use::kUsed, kBoth, {}, ""},
      {"cfg_scale", Use::kUsed, kBoth, {}, ""},
      {"width", Use::kUsed, kBoth, {}, ""},
      {"height", Use::kUsed, kBoth, {}, ""},
      {"eta", Use::kUsed, kBoth, {}, ""},
      {"override_settings", Use::kUsed, kBoth, {}, ""},
      {"send_images", Use::kUsed, kBoth, {}, ""},
      {"init_images", Use::kUsed, kImg2ImgOnly, {}, ""},
      {"refiner_checkpoint", Use::kUsed, kBoth, {}, ""},
      {"refiner_switch_at", Use::kUsed, kBoth, {}, ""},       // read only with a refiner
      {"disable_extra_networks", Use::kUsed, kBoth, {}, ""},  // the tags still leave the prompt, unapplied
      {"denoising_strength", Use::kUsed, kImg2ImgOnly, {}, ""},
      // ignored: nothing is saved on the server; settings are never changed by a request here
      {"do_not_save_samples", Use::kIgnored, kBoth, {}, ""},
      {"do_not_save_grid", Use::kIgnored, kBoth, {}, ""},
      {"override_settings_restore_afterwards", Use::kIgnored, kBoth, {}, ""},
      {"subseed", Use::kIgnored, kBoth, {}, ""},  // only read with subseed_strength, which must be 0
      {"s_tmin", Use::kIgnored, kBoth, {}, ""},   // only read with s_churn, which must be 0
      {"s_tmax", Use::kIgnored, kBoth, {}, ""},
      {"comments", Use::kIgnored, kBoth, {}, ""},
      {"force_task_id", Use::kIgnored, kBoth, {}, ""},
      {"user", Use::kIgnored, kBoth, {}, ""},
      // txt2img's hires fix: its fields are read only with enable_hr, which must be off
      {"hr_scale", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_upscaler", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_second_pass_steps", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_resize_x", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_resize_y", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_checkpoint_name", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_sampler_name", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_scheduler", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_prompt", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_negative_prompt", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"hr_additional_modules", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"firstphase_width", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"firstphase_height", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      {"denoising_strength", Use::kIgnored, kTxt2ImgOnly, {}, ""},
      // img2img's inpainting and resizing: read only with a mask, which must be absent, or for an image
      // of another size than the request's, which is refused
      {"resize_mode", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"image_cfg_scale", Use::kIgnored, kImg2ImgOnly, {}, ""},  // instruct-pix2pix models only
      {"mask_blur", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"mask_blur_x", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"mask_blur_y", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"mask_round", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"inpainting_fill", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"inpaint_full_res", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"inpaint_full_res_padding", Use::kIgnored, kImg2ImgOnly, {}, ""},
      {"inpainting_mask_invert", Use::kIgnored, kImg2ImgOnly, {}, ""},
      // neutral only
      {"styles", Use::kNeutral, kBoth, empty, "styles (a server has none)"},
      {"subseed_strength", Use::kNeutral, kBoth, equals(0), "variation seeds (subseed_strength)"},
      {"seed_resize_from_h", Use::kNeutral, kBoth, not_positive, "seed resizing"},
      {"seed_resize_from_w", Use::kNeutral, kBoth, not_positive, "seed resizing"},
      {"restore_faces", Use::kNeutral, kBoth, off, "face restoration"},
      {"tiling", Use::kNeutral, kBoth, off, "tiling"},
      {"s_churn", Use::kNeutral, kBoth, equals(0), "sampler churn (s_churn)"},
      {"s_noise", Use::kNeutral, kBoth, equals(1), "sampler noise scaling (s_noise)"},
      {"s_min_uncond", Use::kNeutral, kBoth, equals(0), "negative guidance minimum sigma (s_min_uncond)"},
      {"script_name", Use::kNeutral, kBoth, empty, "scripts"},
      {"script_args", Use::kNeutral, kBoth, empty, "scripts"},
      {"alwayson_scripts", Use::kNeutral, kBoth, empty, "extension scripts (alwayson_scripts)"},
      {"save_images", Use::kNeutral, kBoth, off, "saving images on the server"},
      {"infotext", Use::kNeutral, kBoth, empty, "parameters read from an infotext"},
      {"enable_hr", Use::kNeutral, kTxt2ImgOnly, off, "hires fix (enable_hr)"},
      {"firstpass_image", Use::kNeutral, kTxt2ImgOnly, empty, "a first-pass image"},
      {"mask", Use::kNeutral, kImg2ImgOnly, empty, "inpainting (a mask)"},
      {"latent_mask", Use::kNeutral, kImg2ImgOnly, empty, "inpainting (a latent mask)"},
      {"initial_noise_multiplier", Use::kNeutral, kImg2ImgOnly, equals(1), "an initial noise multiplier"},
      {"include_init_images", Use::kNeutral, kImg2ImgOnly, off, "init images in the response"},
  };
  return all;
}

const Field* field(const std::string& name, Endpoint endpoint) {
  for (const Field& f : fields()) {
    if (name != f.name) continue;
    if (f.where == kBoth || (f.where == kTxt2ImgOnly) == (endpoint == Endpoint::kTxt2Img)) return &f;
  }
  return nullptr;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& x : names) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Every field of the body is known, and the neutral-only ones are neutral: one 422 naming all that are not.
void check_fields(const json& body, Endpoint endpoint) {
  std::vector<std::string> unknown, refused;
  for (const auto& [name, value] : body.items()) {
    const Field* f = field(name, endpoint);
    if (f == nullptr) {
      unknown.push_back(name);
    } else if (f->use == Use::kNeutral && !f->neutral(value)) {
      refused.push_back(str_cat(name, " (", f->feature, ")"));
    }
  }
  std::string message;
  if (!unknown.empty()) message += "unknown fields: " + joined(unknown);
  if (!refused.empty())
    message += std::string(message.empty() ? "" : "; ") + "not supported by this server: " + joined(refused);
  HD_CHECK(message.empty(), message);
}

// ---- typed reads, each error naming the field ----

const json* get(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string text(const json& body, const char* name, const std::string& fallback) {
  const json* v = get(body, name);
  if (v == nullptr) return fallback;
  HD_CHECK(v->is_string(), name, " must be a string, got ", v->type_name());
  return v->get<std::string>();
}

int64_t integer(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = get(body, name);
  if (v == nullptr) return fallback;
  HD_CHECK(v->is_number() && !v->is_boolean(), name, " must be a number, got ", v->type_name());
  const double d = v->get<double>();
  HD_CHECK(std::isfinite(d) && d == std::floor(d), name, " must be a whole number, got ", v->dump());
  HD_CHECK(d >= double(lo) && d <= double(hi), name, " must be between ", lo, " and ", hi, ", got ",
           v->dump());
  return v->is_number_unsigned() ? int64_t(v->get<uint64_t>()) : v->get<int64_t>();
}

double number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = get(body, name);
  if (v == nullptr) return fallback;
  HD_CHECK(v->is_number() && !v->is_boolean(), name, " must be a number, got ", v->type_name());
  const double d = v->get<double>();
  HD_CHECK(std::isfinite(d) && d >= lo && d <= hi, name, " must be between ", lo, " and ", hi, ", got ",
           v->dump());
  return d;
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = get(body, name);
  if (v == nullptr) return fallback;
  HD_CHECK(v->is_boolean(), name, " must be true or false, got ", v->type_name());
  return v->get<bool>();
}

// override_settings: the model may be chosen per request; any other setting is refused.
std::string model_of(const json& body) {
  const json* o = get(body, "override_settings");
  if (o == nullptr) return "";
  HD_CHECK(o->is_object(), "override_settings must be an object, got ", o->type_name());
  std::vector<std::string> others;
  for (const auto& [key, value] : o->items())
    if (key != "sd_model_checkpoint") others.push_back(key);
  HD_CHECK(others.empty(), "override_settings: only sd_model_checkpoint can be set per request here, not ",
           joined(others));
  return text(*o, "sd_model_checkpoint", "");
}

// A1111's eta: the ancestral samplers' noise weight (1 here), DDIM's (0 here); unused by the others.
void check_eta(const json& body, SamplerKind sampler) {
  const json* v = get(body, "eta");
  if (v == nullptr) return;
  const double eta = number(body, "eta", 0, 0, 1);
  if (sampler == SamplerKind::kEulerAncestral)
    HD_CHECK(eta == 1.0, "eta ", eta, " with Euler a: this engine's ancestral sampler has eta 1");
  if (sampler == SamplerKind::kDdim)
    HD_CHECK(eta == 0.0, "eta ", eta, " with DDIM: this engine's DDIM has eta 0");
}

// SDXL's refiner: refiner_checkpoint a catalogue name ("" or A1111's "None": none), and refiner_switch_at
// the model's share of the schedule, which a refiner needs (A1111 switches by the step's timestep by
// default, as the engine does: JobRequest).
void read_refiner(const json& body, GenerationRequest& r) {
  // Its type and range checked with or without a refiner, as the OpenAPI document states them.
  const double switch_at = number(body, "refiner_switch_at", 0.8, 0.0, 1.0);
  const std::string name = text(body, "refiner_checkpoint", "");
  if (name.empty() || name == "None" || name == "none") return;
  HD_CHECK(get(body, "refiner_switch_at") != nullptr,
           "refiner_switch_at (the base model's share of the schedule, between 0 and 1) must be given with a "
           "refiner_checkpoint");
  with_context([&] { check_refiner_switch(switch_at); }, [] { return "refiner_switch_at"; });
  r.refiner = name;
  r.refiner_switch_at = switch_at;
}

OwnedTensor init_image(const json& body, const GenerationParams& p) {
  const json* images = get(body, "init_images");
  HD_CHECK(images != nullptr && images->is_array() && images->size() == 1,
           "init_images must be a list of one base64 PNG");
  HD_CHECK((*images)[0].is_string(), "init_images[0] must be a base64 string");
  std::string_view data = (*images)[0].get_ref<const std::string&>();
  if (data.starts_with("data:")) {  // a data URL: "data:image/png;base64,...."
    const size_t comma = data.find(',');
    HD_CHECK(comma != std::string_view::npos, "init_images[0] is a data URL without data");
    data.remove_prefix(comma + 1);
  }
  // The PNG's header says its size before any pixel is decoded: a small file of a huge picture stops there.
  const RgbImage png =
      decode_png(base64_decode(data, "init_images[0]"), "init_images[0]", int64_t(p.width) * p.height);
  HD_CHECK(png.width == p.width && png.height == p.height, "init_images[0] is ", png.width, "x", png.height,
           " but the request asks for ", p.width, "x", p.height,
           "; this server does not resize: send the image's size");
  return init_image_of(png);
}

}  // namespace

std::vector<FieldDescription> request_fields(Endpoint endpoint) {
  std::vector<FieldDescription> out;
  for (const Field& f : fields()) {
    if (field(f.name, endpoint) != &f) continue;
    out.push_back({f.name,
                   f.use == Use::kUsed      ? "used"
                   : f.use == Use::kIgnored ? "ignored"
                                            : "neutral",
                   f.feature});
  }
  return out;
}

GenerationRequest read_generation(const json& body, Endpoint endpoint, const RequestLimits& limits,
                                  uint64_t (*random_seed)()) {
  HD_CHECK(body.is_object(), "the request must be a JSON object, got ", body.type_name());
  check_fields(body, endpoint);
  GenerationRequest r;
  r.model = model_of(body);
  read_refiner(body, r);
  r.send_images = boolean(body, "send_images", true);
  GenerationParams p;
  p.prompt = text(body, "prompt", "");
  p.negative_prompt = text(body, "negative_prompt", "");
  // LoRA tags leave the prompt's text and ask for their LoRAs (A1111's extra networks); A1111 reads none
  // from the negative prompt, and read as text there they would draw another picture.
  // disable_extra_networks: A1111 still takes the tags out of the text, and applies none.
  PromptNetworks networks = take_extra_networks(p.prompt, "the prompt");
  p.prompt = std::move(networks.prompt);
  if (!boolean(body, "disable_extra_networks", false)) r.loras = std::move(networks.loras);
  HD_CHECK(
      p.negative_prompt.find("<lora:") == std::string::npos,
      "the negative prompt holds a <lora:...> tag, which A1111 does not apply there: put it in the prompt");
  // A1111's default of 20 steps, or the server's limit when that is lower.
  p.steps = int(integer(body, "steps", std::min(20, limits.max_steps), 1, limits.max_steps));
  p.cfg_scale = float(number(body, "cfg_scale", 7.0, 0.0, 100.0));
  p.width = int(integer(body, "width", 512, 8, 8192));
  p.height = int(integer(body, "height", 512, 8, 8192));
  HD_CHECK(int64_t(p.width) * p.height <= limits.max_pixels, "width x height is ",
           int64_t(p.width) * p.height, " pixels; this server allows ", limits.max_pixels);
  std::string sampler = text(body, "sampler_name", "");  // A1111: sampler_name or sampler_index
  if (sampler.empty()) sampler = text(body, "sampler_index", "");
  if (sampler.empty()) sampler = "Euler";
  const A1111Sampler s = parse_a1111_sampler(sampler);
  p.sampler = s.kind;
  p.schedule = s.schedule.value_or(parse_a1111_schedule(text(body, "scheduler", "Automatic")));
  check_sampler_schedule(p.sampler, p.schedule);
  check_eta(body, p.sampler);
  const int64_t batch_size = integer(body, "batch_size", 1, 1, limits.max_images);
  const int64_t n_iter = integer(body, "n_iter", 1, 1, limits.max_images);
  HD_CHECK(batch_size * n_iter <= limits.max_images, "batch_size x n_iter is ", batch_size * n_iter,
           " pictures; this server allows ", limits.max_images, " a request");
  r.batch_size = int(batch_size);
  const int64_t seed = integer(body, "seed", -1, -1, INT64_MAX);
  if (endpoint == Endpoint::kImg2Img) p.strength = float(number(body, "denoising_strength", 0.75, 0.0, 1.0));
  validate(p, 8);
  if (get(body, "subseed") != nullptr) r.notes.push_back("subseed is ignored (variation seeds are off)");
  // A1111's seeds: seed, seed + 1, ... for the pictures in order (all_seeds).
  const uint64_t first = seed == -1 ? random_seed() : uint64_t(seed);
  if (endpoint == Endpoint::kImg2Img) r.init_image = init_image(body, p);
  for (int64_t i = 0; i < batch_size * n_iter; ++i) {
    r.pictures.push_back(p);
    r.pictures.back().seed = first + uint64_t(i);
  }
  return r;
}

serve::JobRequest GenerationRequest::job(size_t picture) const {
  serve::JobRequest job;
  job.model = model;
  job.params = pictures.at(picture);
  if (init_image) job.init_image = OwnedTensor::copy_of(init_image->view());
  job.refiner = refiner;
  job.refiner_switch_at = refiner_switch_at;
  job.loras = loras;
  return job;
}

std::string generation_response(const json& body, const GenerationRequest& request,
                                const std::string& model_name, const std::vector<Delivered>& pictures,
                                bool interrupted) {
  // The prompts as A1111 reports them: with their LoRA tags (written after the text, as infotexts have them).
  std::string tags;
  for (const serve::LoraRequest& l : request.loras) tags += " " + lora_tag(l.name, l.scale, l.unet_scale);
  json seeds = json::array(), subseeds = json::array(), prompts = json::array(), negatives = json::array(),
       infotexts = json::array();
  for (const Delivered& d : pictures) {
    const GenerationParams& picture = request.pictures.at(d.index);
    seeds.push_back(picture.seed);
    subseeds.push_back(-1);
    prompts.push_back(picture.prompt + tags);
    negatives.push_back(picture.negative_prompt);
    infotexts.push_back(d.infotext);
  }
  const GenerationParams& p = request.pictures.at(pictures.empty() ? 0 : pictures.front().index);
  const json info = {
      {"prompt", p.prompt + tags},
      {"all_prompts", prompts},
      {"negative_prompt", p.negative_prompt},
      {"all_negative_prompts", negatives},
      {"seed", p.seed},
      {"all_seeds", seeds},
      {"subseed", -1},
      {"all_subseeds", subseeds},
      {"subseed_strength", 0},
      {"width", p.width},
      {"height", p.height},
      {"sampler_name", a1111_sampler_name(p.sampler)},
      {"scheduler", a1111_schedule_name(p.schedule)},
      {"cfg_scale", p.cfg_scale},
      {"steps", p.steps},
      {"batch_size", request.batch_size},
      {"restore_faces", false},
      {"sd_model_name", model_name},
      {"denoising_strength", p.strength < 1.0f ? json(p.strength) : json(nullptr)},
      {"infotexts", infotexts},
      {"index_of_first_image", 0},
      {"styles", json::array()},
      {"interrupted", interrupted},
      {"notes", request.notes},
      {"version", "hipDiffusion"},
  };
  // A1111 echoes the request, its images left out of img2img's echo (as A1111 1.10 does).
  json parameters = body;
  if (parameters.contains("init_images")) parameters["init_images"] = nullptr;
  const json rest = {{"images", json::array()},
                     {"parameters", parameters},
                     {"info", info.dump(-1, ' ', false, json::error_handler_t::replace)}};
  const std::string text = rest.dump(-1, ' ', false, json::error_handler_t::replace);
  // The images go into the text as they are: base64 needs no escaping, and dump() would check each of
  // its bytes as UTF-8 (3 ms for one 512x512 picture's 670 KB on the development machine, a fifth of
  // what the answer adds to a lone request's time). nlohmann's objects keep their keys sorted, so the
  // text starts with the empty list.
  constexpr std::string_view kHead = "{\"images\":[";
  HD_CHECK_KIND(text.starts_with(kHead) && text[kHead.size()] == ']', ErrorKind::kInternal,
                "the response's text starts unexpectedly");
  std::string out(kHead);
  for (size_t i = 0; request.send_images && i < pictures.size(); ++i)
    out += str_cat(i == 0 ? "\"" : ",\"", base64_encode(pictures[i].png), "\"");
  out.append(text, kHead.size());
  return out;
}

json parse_request(const std::string& body) {
  static constexpr int kMaxDepth = 32;
  try {
    return json::parse(body, [](int depth, json::parse_event_t, json&) {
      HD_CHECK(depth <= kMaxDepth, "the body's JSON is nested more than ", kMaxDepth, " deep");
      return true;
    });
  } catch (const json::parse_error& e) {
    throw Error(ErrorKind::kInvalidInput, str_cat("the body is not valid JSON: ", e.what()));
  }
}

json models_list(const serve::ModelCatalogue& catalogue) {
  json out = json::array();
  for (const serve::CatalogueEntry& e : catalogue.entries())
    out.push_back({{"title", e.name},
                   {"model_name", e.stem},
                   {"hash", nullptr},
                   {"sha256", nullptr},
                   {"filename", e.name},
                   {"config", nullptr}});
  return out;
}

namespace {

// A1111's: the file's __metadata__, a value that reads as a JSON object given as that object (kohya's
// trainer writes its tag frequencies and dataset folders so). Read at each listing: files that hold tag
// counts for every training picture are not kept in memory for the whole run. A file that cannot be read
// is listed without metadata (and said on stderr); a request that uses it gets the reader's error.
json lora_metadata(const std::string& path) {
  json out = json::object();
  try {
    const SafetensorsFile file = SafetensorsFile::open(path);
    for (const auto& [key, value] : file.metadata()) {
      // At most 32 deep, as request bodies (dump() recurses once a level); deeper stays the string.
      bool deep = false;
      const auto depth_of = [&deep](int depth, json::parse_event_t, json&) {
        deep = deep || depth > 32;
        return true;
      };
      json parsed = value.starts_with('{') ? json::parse(value, depth_of, false) : json();
      out[key] = parsed.is_object() && !deep ? std::move(parsed) : json(value);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "warning: the LoRA list shows no metadata for %s: %s\n", path.c_str(), e.what());
    return json::object();
  }
  return out;
}

}  // namespace

json loras_list(const serve::LoraCatalogue& loras) {
  json out = json::array();
  for (const serve::LoraEntry& e :
       loras.entries())  // the file's name only, as sd-models gives it: no server path
    out.push_back({{"name", e.name},
                   {"alias", e.name},
                   {"path", std::filesystem::path(e.path).filename().string()},
                   {"metadata", lora_metadata(e.path)}});
  return out;
}

json samplers_list() {
  json out = json::array();
  for (const std::string& name : a1111_sampler_names())
    out.push_back({{"name", name}, {"aliases", json::array()}, {"options", json::object()}});
  return out;
}

json schedulers_list() {
  return json::array({{{"name", "automatic"},
                       {"label", "Automatic"},
                       {"aliases", nullptr},
                       {"default_rho", -1},
                       {"need_inner_model", false}},
                      {{"name", "karras"},
                       {"label", "Karras"},
                       {"aliases", nullptr},
                       {"default_rho", 7.0},
                       {"need_inner_model", false}}});
}

json options_of(const std::string& current_model) {
  return {{"sd_model_checkpoint", current_model}, {"sd_checkpoint_hash", nullptr}, {"samples_format", "png"}};
}

std::optional<std::string> read_options(const json& body) {
  HD_CHECK(body.is_object(), "the options must be a JSON object, got ", body.type_name());
  std::vector<std::string> others;
  for (const auto& [key, value] : body.items())
    if (key != "sd_model_checkpoint") others.push_back(key);
  HD_CHECK(others.empty(), "options this server cannot set: ", joined(others),
           " (it sets sd_model_checkpoint only)");
  const std::string model = text(body, "sd_model_checkpoint", "");
  return model.empty() ? std::nullopt : std::optional(model);
}

json progress_of(const serve::Engine::Status& status) {
  int64_t done = 0, total = 0;
  double elapsed = 0;
  for (const auto& job : status.running) {
    const serve::JobProgress p = job->progress();
    done += p.steps_done;
    total += p.steps_total;
    elapsed = std::max(elapsed, p.seconds_running);
  }
  const double progress = total > 0 ? double(done) / double(total) : 0.0;
  const double eta = progress > 0 ? elapsed / progress - elapsed : 0.0;
  const serve::JobProgress first =
      status.running.empty() ? serve::JobProgress{} : status.running.front()->progress();
  return {{"progress", progress},
          {"eta_relative", eta},
          {"state",
           {{"skipped", false},
            {"interrupted", false},
            {"stopping_generation", false},
            {"job", status.running.empty() ? "" : "generating"},
            {"job_count", status.running.size() + status.queued},
            {"job_timestamp", "0"},
            {"job_no", 0},
            {"sampling_step", first.steps_done},
            {"sampling_steps", first.steps_total}}},
          {"current_image", nullptr},
          {"textinfo", nullptr}};
}

}  // namespace hd::server
