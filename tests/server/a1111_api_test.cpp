// A1111's requests read as the server reads them: what is used, what is refused and why, seeds, limits,
// and the response's shape; base64 both ways.
#include "tools/server/a1111_api.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "test_util.h"
#include "tools/server/base64.h"
#include "tools/server/openapi.h"

namespace hd::server {
namespace {

using nlohmann::json;

uint64_t fixed_seed() {
  return 424242;
}

GenerationRequest read(const json& body, Endpoint endpoint = Endpoint::kTxt2Img, RequestLimits limits = {}) {
  return read_generation(body, endpoint, limits, fixed_seed);
}

// What webuiapi 0.9.17's txt2img sends with its defaults (its payload, field for field).
json webuiapi_defaults() {
  return {{"enable_hr", false},
          {"hr_scale", 2},
          {"hr_upscaler", "Latent"},
          {"hr_second_pass_steps", 0},
          {"hr_resize_x", 0},
          {"hr_resize_y", 0},
          {"hr_checkpoint_name", nullptr},
          {"hr_sampler_name", nullptr},
          {"hr_scheduler", nullptr},
          {"hr_prompt", ""},
          {"hr_negative_prompt", ""},
          {"denoising_strength", 0.7},
          {"firstphase_width", 0},
          {"firstphase_height", 0},
          {"prompt", "a red square"},
          {"styles", json::array()},
          {"seed", 7},
          {"subseed", -1},
          {"subseed_strength", 0.0},
          {"seed_resize_from_h", 0},
          {"seed_resize_from_w", 0},
          {"batch_size", 2},
          {"n_iter", 1},
          {"steps", 3},
          {"cfg_scale", 7.0},
          {"width", 64},
          {"height", 64},
          {"restore_faces", false},
          {"tiling", false},
          {"do_not_save_samples", false},
          {"do_not_save_grid", false},
          {"negative_prompt", "blurry"},
          {"eta", 1.0},
          {"s_churn", 0},
          {"s_tmax", 0},
          {"s_tmin", 0},
          {"s_noise", 1},
          {"override_settings", json::object()},
          {"override_settings_restore_afterwards", true},
          {"sampler_name", "Euler a"},
          {"scheduler", "Automatic"},
          {"sampler_index", "Euler a"},
          {"script_name", nullptr},
          {"script_args", json::array()},
          {"send_images", true},
          {"save_images", false},
          {"alwayson_scripts", json::object()}};
}

TEST(A1111Api, ReadsWebuiapisRequestIntoOneJobAPicture) {
  const GenerationRequest r = read(webuiapi_defaults());
  ASSERT_EQ(r.pictures.size(), 2u);
  const GenerationParams& p = r.pictures[0];
  EXPECT_EQ(p.prompt, "a red square");
  EXPECT_EQ(p.negative_prompt, "blurry");
  EXPECT_EQ(p.steps, 3);
  EXPECT_EQ(p.width, 64);
  EXPECT_EQ(p.sampler, SamplerKind::kEulerAncestral);
  EXPECT_EQ(p.schedule, SigmaSchedule::kDiscrete);
  EXPECT_FLOAT_EQ(p.cfg_scale, 7.0f);
  EXPECT_EQ(p.batch, 1);  // each picture its own job, A1111's seed + i
  EXPECT_EQ(r.pictures[0].seed, 7u);
  EXPECT_EQ(r.pictures[1].seed, 8u);
  EXPECT_FLOAT_EQ(p.strength, 1.0f);  // txt2img's denoising_strength is hires fix's, which is off
  EXPECT_TRUE(r.model.empty());
  EXPECT_EQ(r.notes, std::vector<std::string>{"subseed is ignored (variation seeds are off)"});
}

TEST(A1111Api, SeedMinusOneIsRandomAndModelsComeFromOverrideSettings) {
  json body = {{"prompt", "x"},
               {"seed", -1},
               {"n_iter", 3},
               {"override_settings", {{"sd_model_checkpoint", "m.safetensors [abc]"}}}};
  const GenerationRequest r = read(body);
  EXPECT_EQ(r.pictures[0].seed, 424242u);
  EXPECT_EQ(r.pictures[2].seed, 424244u);
  EXPECT_EQ(r.model, "m.safetensors [abc]");
  EXPECT_EQ(r.job(1).model, "m.safetensors [abc]");
  EXPECT_EQ(r.job(1).params.seed, 424243u);
}

TEST(A1111Api, SamplersSchedulesAndEtaAsA1111NamesThem) {
  GenerationRequest r = read({{"sampler_name", "DPM++ 2M Karras"}});
  EXPECT_EQ(r.pictures[0].sampler, SamplerKind::kDpmpp2m);
  EXPECT_EQ(r.pictures[0].schedule, SigmaSchedule::kKarras);
  r = read({{"sampler_index", "DDIM"}, {"eta", 0}});  // the old field, DDIM's eta 0
  EXPECT_EQ(r.pictures[0].sampler, SamplerKind::kDdim);
  r = read({{"sampler_name", "Euler"}, {"scheduler", "karras"}, {"eta", 0.3}});  // Euler does not read eta
  EXPECT_EQ(r.pictures[0].schedule, SigmaSchedule::kKarras);
  test::expect_error_containing([] { read({{"sampler_name", "DDIM"}, {"eta", 1.0}}); }, "eta 1 with DDIM");
  test::expect_error_containing(
      [] {
        read({{"sampler_name", "Euler a"}, {"eta", 0.5}});
      },
      "eta 0.5 with Euler a");
  test::expect_error_containing([] { read({{"sampler_name", "Heun"}}); }, "unknown sampler \"Heun\"");
  test::expect_error_containing([] { read({{"sampler_name", "DDIM"}, {"scheduler", "Karras"}}); }, "Karras");
}

TEST(A1111Api, FieldsItCannotHonourAreRefusedByName) {
  json body = webuiapi_defaults();
  body["restore_faces"] = true;
  body["enable_hr"] = true;
  body["mystery"] = 1;
  body["styles"] = {"cinematic"};
  test::expect_error_containing(
      [&] { read(body); },
      "unknown fields: mystery; not supported by this server: enable_hr (hires fix (enable_hr)), "
      "restore_faces (face restoration), styles (styles (a server has none))");
  test::expect_error_containing(
      [] {
        read({{"init_images", json::array()}});
      },
      "unknown fields: init_images");
  test::expect_error_containing([] { read({{"mask", "abc"}}, Endpoint::kImg2Img); }, "inpainting (a mask)");
  test::expect_error_containing(
      [] {
        read({{"negative_prompt", "<lora:detail:1> blurry"}});
      },
      "the negative prompt holds a <lora:...> tag");
  test::expect_error_containing(
      [] {
        read({{"override_settings", {{"CLIP_stop_at_last_layers", 2}}}});
      },
      "only sd_model_checkpoint can be set per request here, not CLIP_stop_at_last_layers");
  test::expect_error_containing([] { read({{"subseed_strength", 0.5}}); }, "variation seeds");
  EXPECT_EQ(read({{"refiner_checkpoint", ""}, {"script_name", ""}, {"infotext", nullptr}}).pictures.size(),
            1u);  // off
}

// A prompt's LoRA tags leave its text and reach every picture's job, which the engine resolves by name.
TEST(A1111Api, PromptLorasReachEveryJob) {
  json body = webuiapi_defaults();
  body["prompt"] = "<lora:detail:0.8> a red circle";
  body["batch_size"] = 2;
  const GenerationRequest r = read(body);
  ASSERT_EQ(r.pictures.size(), 2u);
  EXPECT_EQ(r.pictures[1].prompt, " a red circle");
  for (size_t i = 0; i < 2; ++i) {
    const serve::JobRequest job = r.job(i);
    ASSERT_EQ(job.loras.size(), 1u);
    EXPECT_EQ(job.loras[0].name, "detail");
    EXPECT_EQ(job.loras[0].scale, 0.8f);
  }
  // A1111's disable_extra_networks: the tags leave the text and none applies.
  body["disable_extra_networks"] = true;
  const GenerationRequest disabled = read(body);
  EXPECT_EQ(disabled.pictures[0].prompt, " a red circle");
  EXPECT_TRUE(disabled.job(0).loras.empty());
}

// SDXL's refiner: a model name and the switch, which a refiner needs; "None" (A1111's) or "" is none, and
// a switch without a refiner is checked but changes nothing. Each picture's job carries both.
TEST(A1111Api, ARefinerNeedsItsSwitchAndReachesEveryJob) {
  json body = webuiapi_defaults();
  body["refiner_checkpoint"] = "tiny_sdxl_refiner";
  body["refiner_switch_at"] = 0.75;
  const GenerationRequest r = read(body);
  EXPECT_EQ(r.refiner, "tiny_sdxl_refiner");
  EXPECT_EQ(r.refiner_switch_at, 0.75);
  ASSERT_EQ(r.pictures.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const serve::JobRequest job = r.job(i);
    EXPECT_EQ(job.refiner, "tiny_sdxl_refiner");
    EXPECT_EQ(job.refiner_switch_at, 0.75);
    EXPECT_EQ(job.params.seed, 7u + i);
  }
  for (const char* none : {"", "None"}) {
    body["refiner_checkpoint"] = none;
    EXPECT_TRUE(read(body).refiner.empty()) << none;
    EXPECT_TRUE(read(body).job(0).refiner.empty()) << none;
  }
  test::expect_error_containing(
      [] {
        read({{"refiner_checkpoint", "sdxl_refiner.safetensors"}});
      },
      "refiner_switch_at (the base model's share of the schedule, between 0 and 1) must be given");
  for (const double edge : {0.0, 1.0}) {
    test::expect_error_containing(
        [&] {
          read({{"refiner_checkpoint", "r"}, {"refiner_switch_at", edge}});
        },
        std::string("must be in (0, 1), leaving each model a share; got ") + (edge == 0.0 ? "0" : "1") +
            " (refiner_switch_at)");
  }
  for (const char* refiner : {"r", "None"}) {  // the range holds without a refiner too (the OpenAPI schema's)
    test::expect_error_containing(
        [&] {
          read({{"refiner_checkpoint", refiner}, {"refiner_switch_at", 1.5}});
        },
        "refiner_switch_at must be between 0 and 1, got 1.5");
  }
  EXPECT_TRUE(read({{"refiner_switch_at", 0.3}}).refiner.empty());  // read, and nothing to switch to
  test::expect_error_containing(
      [] {
        read({{"refiner_checkpoint", 3}, {"refiner_switch_at", 0.8}});
      },
      "refiner_checkpoint must be a string");
}

TEST(A1111Api, BadValuesAndLimitsAreClearErrors) {
  RequestLimits limits;
  limits.max_steps = 10;
  limits.max_pixels = 128 * 128;
  limits.max_images = 4;
  const auto refused = [&](json body, const std::string& text) {
    SCOPED_TRACE(body.dump());
    if (body.is_object() && !body.contains("width")) body["width"] = body["height"] = 64;  // within the limit
    test::expect_error_containing([&] { read(body, Endpoint::kTxt2Img, limits); }, text);
  };
  refused({{"steps", 11}}, "steps must be between 1 and 10, got 11");
  EXPECT_EQ(read({{"width", 64}, {"height", 64}}, Endpoint::kTxt2Img, limits).pictures[0].steps,
            10);  // A1111's 20, capped
  refused({{"steps", 2.5}}, "steps must be a whole number");
  refused({{"steps", "20"}}, "steps must be a number, got string");
  refused({{"steps", true}}, "steps must be a number, got boolean");
  refused({{"width", 256}, {"height", 256}}, "width x height is 65536 pixels; this server allows 16384");
  refused({{"width", 60}, {"height", 64}}, "the width must be a positive multiple of 8");
  refused({{"cfg_scale", 1e300}}, "cfg_scale must be between 0 and 100");
  refused({{"batch_size", 3}, {"n_iter", 2}}, "batch_size x n_iter is 6 pictures; this server allows 4");
  refused({{"seed", -2}}, "seed must be between -1 and");
  refused({{"prompt", 5}}, "prompt must be a string, got number");
  refused(json::array(), "the request must be a JSON object, got array");
  refused({{"send_images", "yes"}}, "send_images must be true or false");
}

TEST(A1111Api, Img2ImgTakesOneBase64PngOfTheRequestsSize) {
  RgbImage image{64, 64, std::vector<uint8_t>(64 * 64 * 3, 200)};
  const std::string png = base64_encode(encode_png(image));
  GenerationRequest r =
      read({{"init_images", {png}}, {"width", 64}, {"height", 64}, {"denoising_strength", 0.5}},
           Endpoint::kImg2Img);
  ASSERT_TRUE(r.init_image.has_value());
  EXPECT_EQ(r.init_image->view().shape, (Shape{1, 64, 64, 3}));
  EXPECT_NEAR(r.init_image->ptr<float>()[0], 2.0f * 200.0f / 255.0f - 1.0f, 1e-6);
  EXPECT_FLOAT_EQ(r.pictures[0].strength, 0.5f);
  r = read({{"init_images", {"data:image/png;base64," + png}}, {"width", 64}, {"height", 64}},
           Endpoint::kImg2Img);
  EXPECT_FLOAT_EQ(r.pictures[0].strength, 0.75f);  // A1111's default
  test::expect_error_containing(
      [&] {
        read({{"init_images", {png}}, {"width", 128}, {"height", 64}}, Endpoint::kImg2Img);
      },
      "init_images[0] is 64x64 but the request asks for 128x64; this server does not resize");
  test::expect_error_containing(
      [&] {
        read({{"init_images", {"@@@not base64"}}}, Endpoint::kImg2Img);
      },
      "init_images[0] is not valid base64");
  test::expect_error_containing(
      [&] {
        read({{"init_images", {base64_encode(std::vector<uint8_t>{1, 2, 3})}}}, Endpoint::kImg2Img);
      },
      "init_images[0] is not a PNG");
  test::expect_error_containing(
      [&] {
        read({{"width", 64}}, Endpoint::kImg2Img);
      },
      "init_images must be a list of one");
}

TEST(A1111Api, ResponseCarriesImagesSeedsAndInfotexts) {
  json body = webuiapi_defaults();
  body["batch_size"] = 2;
  body["n_iter"] = 2;
  const GenerationRequest r = read(body);
  // Pictures 0, 1 and 3 made, picture 2 skipped: every list holds the pictures made, in step.
  const std::vector<Delivered> pictures = {
      {0, {1, 2, 3}, "text 0"}, {1, {4, 5}, "text 1"}, {3, {6}, "text 3"}};
  const json response = json::parse(generation_response(body, r, "tiny_sd1", pictures, true));
  ASSERT_EQ(response["images"].size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(base64_decode(response["images"][i].get<std::string>(), "image"), pictures[i].png) << i;
  EXPECT_EQ(response["parameters"], body);
  const json info = json::parse(response["info"].get<std::string>());
  EXPECT_EQ(info["all_seeds"], json({7, 8, 10}));
  EXPECT_EQ(info["all_subseeds"], json({-1, -1, -1}));
  EXPECT_EQ(info["seed"], 7);
  EXPECT_EQ(info["batch_size"], 2);  // A1111's: the pictures of one iteration
  EXPECT_EQ(info["infotexts"], json({"text 0", "text 1", "text 3"}));
  EXPECT_EQ(info["all_prompts"].size(), 3u);
  EXPECT_EQ(info["interrupted"], true);
  EXPECT_EQ(info["sampler_name"], "Euler a");
  EXPECT_EQ(info["sd_model_name"], "tiny_sd1");
  json quiet = webuiapi_defaults();
  quiet["send_images"] = false;
  const std::vector<Delivered> two(pictures.begin(), pictures.begin() + 2);
  EXPECT_TRUE(json::parse(generation_response(quiet, read(quiet), "m", two, false))["images"].empty());
  // A model name that is not UTF-8 is replaced, never a failure.
  EXPECT_NO_THROW((void)json::parse(generation_response(body, r, std::string("m\xff"), pictures, false)));
}

TEST(A1111Api, LorasAreListedWithTheirFilesMetadata) {
  const test::TempDir dir;
  const SafetensorsWriteItem weight{"lora_unet_x.lora_down.weight", "F32", {1, 1}, {0, 0, 0, 0}};
  dir.write("detail.safetensors",
            serialize_safetensors(
                {weight}, {{"ss_network_dim", "8"},
                           {"ss_tag_frequency", R"({"pictures": {"a cat": 3}})"},
                           {"ss_note", "{not json"},
                           {"ss_deep", "{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}"}}));
  dir.write("plain.safetensors", serialize_safetensors({weight}));
  dir.write("broken.safetensors", std::string("not a safetensors file"));
  const json list = loras_list(serve::LoraCatalogue::from(dir.path().string()));
  ASSERT_EQ(list.size(), 3u);  // sorted by name
  EXPECT_EQ(list[0]["name"], "broken");
  EXPECT_EQ(list[0]["metadata"], json::object());
  EXPECT_EQ(list[1]["name"], "detail");
  EXPECT_EQ(list[1]["path"], "detail.safetensors");
  // As A1111 gives it: strings, and a string that reads as a JSON object as that object.
  // Nested deeper than a request body may be (32): kept as the string it is.
  const json metadata = list[1]["metadata"];
  EXPECT_EQ(metadata["ss_deep"], "{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}");
  EXPECT_EQ(metadata, json::parse(R"({"ss_network_dim": "8", "ss_tag_frequency": {"pictures": {"a cat": 3}},
                                      "ss_note": "{not json", "ss_deep": )" +
                                  metadata["ss_deep"].dump() + "}"));
  EXPECT_EQ(list[2]["metadata"], json::object());
}

TEST(A1111Api, DeepOrMalformedBodiesAndPngBombsAreRefusedEarly) {
  std::string deep = "{\"comments\": " + std::string(1000, '[') + std::string(1000, ']') + "}";
  test::expect_error_containing([&] { parse_request(deep); }, "nested more than 32 deep");
  EXPECT_EQ(parse_request("{\"a\": [[1]]}")["a"][0][0], 1);
  test::expect_error_containing([] { parse_request("{\"prompt\": "); }, "not valid JSON");
  // A 4096x4096 PNG of zeros compresses to a few kB; its header alone refuses it for a 64x64 request.
  RgbImage big{4096, 4096, std::vector<uint8_t>(size_t(4096) * 4096 * 3, 0)};
  const std::string png = base64_encode(encode_png(big));
  test::expect_error_containing(
      [&] {
        read({{"init_images", {png}}, {"width", 64}, {"height", 64}}, Endpoint::kImg2Img);
      },
      "init_images[0] is 4096x4096, more than the 4096 pixels allowed");
  EXPECT_NE(read({{"sampler_name", ""}, {"sampler_index", "DDIM"}}).pictures[0].sampler, SamplerKind::kEuler);
}

TEST(A1111Api, OptionsSetTheModelOnly) {
  EXPECT_EQ(read_options({{"sd_model_checkpoint", "b.safetensors"}}), "b.safetensors");
  EXPECT_FALSE(read_options(json::object()).has_value());
  test::expect_error_containing(
      [] {
        read_options({{"sd_model_checkpoint", "b"}, {"CLIP_stop_at_last_layers", 2}});
      },
      "options this server cannot set: CLIP_stop_at_last_layers");
}

TEST(A1111Api, TheOpenApiDocumentDescribesEveryField) {
  const json doc = openapi_document(RequestLimits{});
  for (const auto& [endpoint, path] :
       {std::pair{Endpoint::kTxt2Img, "/sdapi/v1/txt2img"}, {Endpoint::kImg2Img, "/sdapi/v1/img2img"}}) {
    const json& schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"];
    for (const FieldDescription& f : request_fields(endpoint))
      EXPECT_TRUE(schema["properties"].contains(f.name)) << f.name;
    EXPECT_EQ(schema["properties"].size(), request_fields(endpoint).size());
    EXPECT_TRUE(doc["paths"][path]["post"]["responses"].contains("422"));
  }
  EXPECT_EQ(doc["paths"]["/sdapi/v1/txt2img"]["post"]["requestBody"]["content"]["application/json"]["schema"]
               ["properties"]["steps"]["maximum"],
            150);
}

TEST(Base64, RoundTripsAndRefusesWhatIsNot) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (size_t n : {0, 1, 2, 3, 4, 100}) {
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i < n; ++i) bytes.push_back(uint8_t(rng.integer(0, 255)));
    const std::string text = base64_encode(bytes);
    EXPECT_EQ(text.size(), 4 * ((n + 2) / 3));
    EXPECT_EQ(base64_decode(text, "x"), bytes);
  }
  EXPECT_EQ(base64_encode(std::vector<uint8_t>{'h', 'i', '!', '?'}), "aGkhPw==");
  EXPECT_EQ(base64_decode("aGkh\nPw==", "x"), (std::vector<uint8_t>{'h', 'i', '!', '?'}));
  test::expect_error_containing([] { base64_decode("a*b=", "the picture"); },
                                "the picture is not valid base64");
}

}  // namespace
}  // namespace hd::server
