#include "pipeline/random_model.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "pipeline/default_model.h"

namespace hd {

namespace {

namespace fs = std::filesystem;

// A CLIP text encoder's numbers before the width divisor (the heads stay: their width shrinks).
struct TextEncoderNumbers {
  int64_t width, layers, intermediate, heads;
  bool quick_gelu;
  int64_t projection = 0;  // text_projection's width (CLIPTextModelWithProjection); 0: none
};

// CLIP ViT-L/14 (SD1.x, SDXL's first); OpenCLIP ViT-H/14 without its last layer (SD2.x, as transformers
// stores it); OpenCLIP ViT-bigG/14 with its projection (SDXL's second).
constexpr TextEncoderNumbers kClipL{768, 12, 3072, 12, true};
constexpr TextEncoderNumbers kOpenClipH{1024, 23, 4096, 16, false};
constexpr TextEncoderNumbers kOpenClipBigG{1280, 32, 5120, 20, false, 1280};

// The architectures' numbers before the width divisor.
struct ArchNumbers {
  std::vector<int64_t> channels;  // UNet levels
  std::vector<int> depth;         // transformer blocks per level's attentions (0: a level without attention)
  int64_t context;
  std::vector<int> unet_heads;  // per level (diffusers' attention_head_dim, which counts heads)
  bool linear_projection, v_prediction;
  int64_t sample_size;  // latent size of the default picture
  // SDXL's text-time conditioning: the size/crop ids and each one's embedding width (0: none); the
  // pooled text width is the last text encoder's projection (add_embedding_inputs).
  int64_t time_ids = 0, time_id_width = 0;
  float vae_scaling = 0.18215f;
  std::vector<TextEncoderNumbers> text{};  // text_encoder, then (SDXL) text_encoder_2
};

// add_embedding's input width before the divisor: the pooled text embedding, then the embedded ids.
int64_t add_embedding_inputs(const ArchNumbers& a) { return a.text.back().projection + a.time_ids * a.time_id_width; }

ArchNumbers numbers_of(RandomModelArch arch) {
  ArchNumbers a;
  if (arch == RandomModelArch::kSDXL) {
    a = {{320, 640, 1280}, {0, 2, 10}, 2048, {5, 10, 20}, true, false, 128};
    a.time_ids = 6, a.time_id_width = 256;
    a.vae_scaling = 0.13025f;
    a.text = {kClipL, kOpenClipBigG};
    return a;
  }
  if (arch == RandomModelArch::kSD15) {
    a = {{320, 640, 1280, 1280}, {1, 1, 1, 0}, 768, {8, 8, 8, 8}, false, false, 64};
    a.text = {kClipL};
    return a;
  }
  a = {{320, 640, 1280, 1280}, {1, 1, 1, 0}, 1024, {5, 10, 20, 20}, true, true, 64};
  a.text = {kOpenClipH};
  return a;
}

class ShapeList {
 public:
  void add(const std::string& name, std::vector<int64_t> shape) { shapes_.emplace_back(name, std::move(shape)); }
  void vector(const std::string& name, int64_t n) { add(name, {n}); }
  void norm(const std::string& name, int64_t n) {
    vector(name + ".weight", n);
    vector(name + ".bias", n);
  }
  void linear(const std::string& name, int64_t out, int64_t in, bool bias = true) {
    add(name + ".weight", {out, in});
    if (bias) vector(name + ".bias", out);
  }
  void conv(const std::string& name, int64_t out, int64_t in, int64_t k) {
    add(name + ".weight", {out, in, k, k});
    vector(name + ".bias", out);
  }
  void resnet(const std::string& p, int64_t in, int64_t out, int64_t time_dim) {
    norm(p + ".norm1", in);
    conv(p + ".conv1", out, in, 3);
    if (time_dim > 0) linear(p + ".time_emb_proj", out, time_dim);
    norm(p + ".norm2", out);
    conv(p + ".conv2", out, out, 3);
    if (in != out) conv(p + ".conv_shortcut", out, in, 1);
  }
  TensorShapes take() { return std::move(shapes_); }

 private:
  TensorShapes shapes_;
};

std::string at(const std::string& prefix, size_t i) { return prefix + "." + std::to_string(i); }

// Uniform values of standard deviation 0.02 as f16 bits: small enough that no activation overflows f16
// through a UNet or VAE of random weights. A xorshift generator: a billion values take seconds.
std::vector<uint8_t> random_f16_bytes(int64_t count, uint64_t& state) {
  std::vector<uint8_t> bytes(size_t(count) * 2);
  const float half_range = 0.02f * 1.7320508f;  // uniform on [-a, a] has standard deviation a / sqrt(3)
  for (int64_t i = 0; i < count; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    const float unit = float(state >> 40) * (1.0f / float(1 << 24));  // [0, 1)
    const uint16_t h = float_to_half((2.0f * unit - 1.0f) * half_range).bits;
    bytes[size_t(2 * i)] = uint8_t(h);
    bytes[size_t(2 * i + 1)] = uint8_t(h >> 8);
  }
  return bytes;
}

void write_file(const fs::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  out.close();
  HD_CHECK_KIND(out.good(), ErrorKind::kRuntime, path.string(), ": cannot write: ", std::strerror(errno));
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  const std::string text = j.dump(2) + "\n";
  write_file(path, text.data(), text.size());
}

int64_t write_weights(const TensorShapes& shapes, const fs::path& path, uint64_t seed) {
  std::vector<SafetensorsWriteItem> items;
  int64_t params = 0;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    params += n;
    items.push_back({name, "F16", shape, random_f16_bytes(n, seed)});
  }
  const std::vector<uint8_t> file = serialize_safetensors(std::move(items));
  write_file(path, file.data(), file.size());
  return params;
}

}  // namespace

RandomModelArch parse_random_model_arch(std::string_view name) {
  if (name == "sd15") return RandomModelArch::kSD15;
  if (name == "sd21") return RandomModelArch::kSD21;
  if (name == "sdxl") return RandomModelArch::kSDXL;
  throw Error(ErrorKind::kInvalidInput, str_cat("--arch must be sd15, sd21 or sdxl, got '", name, "'"));
}

std::string_view random_model_arch_name(RandomModelArch arch) {
  switch (arch) {
    case RandomModelArch::kSD15: return "sd15";
    case RandomModelArch::kSD21: return "sd21";
    case RandomModelArch::kSDXL: break;
  }
  return "sdxl";
}

TensorShapes random_unet_shapes(const RandomModelSpec& spec) {
  const ArchNumbers a = numbers_of(spec.arch);
  const int64_t d = spec.width_divisor, temb = 1280 / d, ctx = a.context / d;
  std::vector<int64_t> ch;
  for (int64_t c : a.channels) ch.push_back(c / d);
  const size_t levels = ch.size(), layers = 2;
  ShapeList s;
  const auto transformer = [&](const std::string& p, int64_t c, int depth) {
    s.norm(p + ".norm", c);
    const auto projection = [&](const std::string& name) {  // SD2.x, SDXL: linear; SD1.x: a 1x1 convolution
      if (a.linear_projection) {
        s.linear(name, c, c);
      } else {
        s.conv(name, c, c, 1);
      }
    };
    projection(p + ".proj_in");
    for (int block = 0; block < depth; ++block) {
      const std::string b = at(p + ".transformer_blocks", size_t(block)) + ".";
      for (const char* n : {"norm1", "norm2", "norm3"}) s.norm(b + n, c);
      for (const char* attn : {"attn1", "attn2"}) {
        const int64_t kv = std::string_view(attn) == "attn1" ? c : ctx;
        s.linear(b + attn + ".to_q", c, c, false);
        s.linear(b + attn + ".to_k", c, kv, false);
        s.linear(b + attn + ".to_v", c, kv, false);
        s.linear(b + attn + ".to_out.0", c, c);
      }
      s.linear(b + "ff.net.0.proj", 8 * c, c);
      s.linear(b + "ff.net.2", c, 4 * c);
    }
    projection(p + ".proj_out");
  };
  s.conv("conv_in", ch[0], 4, 3);
  s.linear("time_embedding.linear_1", temb, ch[0]);
  s.linear("time_embedding.linear_2", temb, temb);
  if (a.time_ids > 0) {
    s.linear("add_embedding.linear_1", temb, add_embedding_inputs(a) / d);
    s.linear("add_embedding.linear_2", temb, temb);
  }
  int64_t prev = ch[0];
  for (size_t i = 0; i < levels; ++i) {
    const std::string p = at("down_blocks", i);
    for (size_t j = 0; j < layers; ++j) {
      s.resnet(at(p + ".resnets", j), j == 0 ? prev : ch[i], ch[i], temb);
      if (a.depth[i] > 0) transformer(at(p + ".attentions", j), ch[i], a.depth[i]);
    }
    if (i + 1 < levels) s.conv(p + ".downsamplers.0.conv", ch[i], ch[i], 3);
    prev = ch[i];
  }
  // The mid block's attention is as deep as the deepest level's (SD: 1, SDXL: 10).
  s.resnet("mid_block.resnets.0", ch.back(), ch.back(), temb);
  transformer("mid_block.attentions.0", ch.back(), std::max(1, *std::max_element(a.depth.begin(), a.depth.end())));
  s.resnet("mid_block.resnets.1", ch.back(), ch.back(), temb);
  // Up level i mirrors down level levels-1-i; each of its layers + 1 resnets takes a skip connection.
  int64_t prev_out = ch.back();
  for (size_t i = 0; i < levels; ++i) {
    const size_t mirror = levels - 1 - i;
    const std::string p = at("up_blocks", i);
    const int64_t out = ch[mirror], below = ch[mirror == 0 ? 0 : mirror - 1];
    for (size_t j = 0; j <= layers; ++j) {
      const int64_t skip = j == layers ? below : out, in = j == 0 ? prev_out : out;
      s.resnet(at(p + ".resnets", j), in + skip, out, temb);
      if (a.depth[mirror] > 0) transformer(at(p + ".attentions", j), out, a.depth[mirror]);
    }
    if (i + 1 < levels) s.conv(p + ".upsamplers.0.conv", out, out, 3);
    prev_out = out;
  }
  s.norm("conv_norm_out", ch[0]);
  s.conv("conv_out", 4, ch[0], 3);
  return s.take();
}

TensorShapes random_vae_decoder_shapes(const RandomModelSpec& spec) {
  const int64_t d = spec.width_divisor;
  const std::vector<int64_t> ch = {128 / d, 256 / d, 512 / d, 512 / d};
  ShapeList s;
  s.conv("post_quant_conv", 4, 4, 1);
  s.conv("decoder.conv_in", ch.back(), 4, 3);
  s.resnet("decoder.mid_block.resnets.0", ch.back(), ch.back(), 0);
  const std::string attn = "decoder.mid_block.attentions.0";
  s.norm(attn + ".group_norm", ch.back());
  for (const char* n : {".to_q", ".to_k", ".to_v", ".to_out.0"}) s.linear(attn + n, ch.back(), ch.back());
  s.resnet("decoder.mid_block.resnets.1", ch.back(), ch.back(), 0);
  int64_t prev = ch.back();
  for (size_t i = 0; i < ch.size(); ++i) {
    const int64_t out = ch[ch.size() - 1 - i];
    const std::string p = at("decoder.up_blocks", i);
    for (size_t j = 0; j < 3; ++j) s.resnet(at(p + ".resnets", j), j == 0 ? prev : out, out, 0);
    if (i + 1 < ch.size()) s.conv(p + ".upsamplers.0.conv", out, out, 3);
    prev = out;
  }
  s.norm("decoder.conv_norm_out", ch[0]);
  s.conv("decoder.conv_out", 3, ch[0], 3);
  return s.take();
}

std::vector<RandomComponent> random_text_encoders(const RandomModelSpec& spec) {
  std::vector<RandomComponent> out;
  for (const TextEncoderNumbers& t : numbers_of(spec.arch).text) {
    const int64_t width = t.width / spec.width_divisor, inner = t.intermediate / spec.width_divisor;
    ShapeList s;
    s.add("text_model.embeddings.token_embedding.weight", {49408, width});
    s.add("text_model.embeddings.position_embedding.weight", {77, width});
    for (int64_t i = 0; i < t.layers; ++i) {
      const std::string p = "text_model.encoder.layers." + std::to_string(i) + ".";
      s.norm(p + "layer_norm1", width);
      for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) s.linear(p + "self_attn." + n, width, width);
      s.norm(p + "layer_norm2", width);
      s.linear(p + "mlp.fc1", inner, width);
      s.linear(p + "mlp.fc2", width, inner);
    }
    s.norm("text_model.final_layer_norm", width);
    if (t.projection > 0) s.linear("text_projection", t.projection / spec.width_divisor, width, false);
    const bool first = out.empty();
    out.push_back({first ? "text_encoder" : "text_encoder_2", first ? "tokenizer" : "tokenizer_2", s.take()});
  }
  return out;
}

std::string random_model_folder(const RandomModelSpec& spec) {
  return (fs::temp_directory_path() / str_cat("hipdiffusion-random-", random_model_arch_name(spec.arch),
                                             spec.width_divisor > 1 ? str_cat("-div", spec.width_divisor) : ""))
      .string();
}

int64_t write_random_model(const RandomModelSpec& spec, const std::string& folder_name) {
  HD_CHECK(spec.width_divisor >= 1 && 320 % spec.width_divisor == 0 && spec.norm_groups >= 1,
           "random model: width divisor ", spec.width_divisor, " must divide 320");
  const ArchNumbers a = numbers_of(spec.arch);
  const fs::path folder(folder_name);
  // The marker says which spec the folder holds; it is written last, so a partial folder is redone.
  // (The text encoders' count is in it: SDXL folders written before its encoders existed are redone.)
  const std::string marker_text = str_cat("hipdiffusion random model ", random_model_arch_name(spec.arch), " / ",
                                          spec.width_divisor, " groups ", spec.norm_groups, " text encoders ",
                                          a.text.size(), "\n");
  const fs::path marker = folder / "random_model.txt";
  {
    std::ifstream in(marker);
    std::string line;
    if (in && std::getline(in, line) && line + "\n" == marker_text) {
      std::ifstream count(folder / "parameters.txt");
      int64_t params = 0;
      if (count >> params) return params;
    }
  }
  std::error_code ec;
  fs::remove(marker, ec);
  const std::vector<RandomComponent> text_encoders = random_text_encoders(spec);
  std::vector<std::string> subfolders = {"unet", "vae", "scheduler"};
  for (const RandomComponent& t : text_encoders) subfolders.insert(subfolders.end(), {t.name, t.tokenizer});
  for (const std::string& sub : subfolders) {
    fs::create_directories(folder / sub, ec);
    HD_CHECK_KIND(!ec, ErrorKind::kRuntime, (folder / sub).string(), ": cannot create: ", ec.message());
  }
  const int64_t d = spec.width_divisor;
  std::vector<int64_t> channels;
  for (int64_t c : a.channels) channels.push_back(c / d);
  nlohmann::json unet = {{"_class_name", "UNet2DConditionModel"},
                         {"attention_head_dim", a.unet_heads},
                         {"block_out_channels", channels},
                         {"cross_attention_dim", a.context / d},
                         {"norm_num_groups", spec.norm_groups},
                         // 512x512 images by default for SD1.5/2.1, as the benchmarks compare them; SDXL's 1024
                         {"sample_size", a.sample_size},
                         {"use_linear_projection", a.linear_projection}};
  if (a.time_ids > 0) {
    std::vector<int> depth;
    for (int k : a.depth) depth.push_back(std::max(k, 1));  // diffusers lists one for levels without attention
    unet["addition_embed_type"] = "text_time";
    unet["addition_time_embed_dim"] = a.time_id_width / d;
    unet["projection_class_embeddings_input_dim"] = add_embedding_inputs(a) / d;
    unet["transformer_layers_per_block"] = depth;
    unet["down_block_types"] = {"DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"};
    unet["up_block_types"] = {"CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"};
  }
  write_json(folder / "unet" / "config.json", unet);
  write_json(folder / "vae" / "config.json", {{"_class_name", "AutoencoderKL"},
                                             {"block_out_channels", {128 / d, 256 / d, 512 / d, 512 / d}},
                                             {"norm_num_groups", spec.norm_groups},
                                             {"sample_size", 8 * a.sample_size},
                                             {"scaling_factor", a.vae_scaling}});
  for (size_t i = 0; i < text_encoders.size(); ++i) {
    const TextEncoderNumbers& t = a.text[i];
    nlohmann::json config = {{"architectures", {t.projection > 0 ? "CLIPTextModelWithProjection" : "CLIPTextModel"}},
                             {"hidden_act", t.quick_gelu ? "quick_gelu" : "gelu"},
                             {"hidden_size", t.width / d},
                             {"intermediate_size", t.intermediate / d},
                             {"num_attention_heads", t.heads},
                             {"num_hidden_layers", t.layers}};
    if (t.projection > 0) config["projection_dim"] = t.projection / d;
    write_json(folder / text_encoders[i].name / "config.json", config);
  }
  // SD's training schedule (SDXL's too); the samplers' spacing as diffusers' default scheduler for these models.
  write_json(folder / "scheduler" / "scheduler_config.json",
             {{"_class_name", "EulerDiscreteScheduler"}, {"beta_start", 0.00085}, {"beta_end", 0.012},
              {"beta_schedule", "scaled_linear"}, {"num_train_timesteps", 1000}, {"steps_offset", 1},
              {"timestep_spacing", "leading"}, {"prediction_type", a.v_prediction ? "v_prediction" : "epsilon"}});
  const bool xl = text_encoders.size() == 2;
  nlohmann::json index = {{"_class_name", xl ? "StableDiffusionXLPipeline" : "StableDiffusionPipeline"},
                          {"unet", {"diffusers", "UNet2DConditionModel"}},
                          {"vae", {"diffusers", "AutoencoderKL"}},
                          {"scheduler", {"diffusers", "EulerDiscreteScheduler"}}};
  if (xl) index["force_zeros_for_empty_prompt"] = true;
  for (size_t i = 0; i < text_encoders.size(); ++i) {
    const std::string& tokenizer_name = text_encoders[i].tokenizer;
    index[text_encoders[i].name] = {"transformers", a.text[i].projection > 0 ? "CLIPTextModelWithProjection" : "CLIPTextModel"};
    index[tokenizer_name] = {"transformers", "CLIPTokenizer"};
    // A real CLIP vocabulary is not needed to time a model: the built-in model's small one (its ids fit
    // the 49408-row embedding). SDXL's second tokenizer pads with "!", as OpenCLIP's does.
    const fs::path tokenizer = fs::path(default_model_folder()) / "tokenizer";
    for (const auto& entry : fs::directory_iterator(tokenizer)) {
      const fs::path to = folder / tokenizer_name / entry.path().filename();
      if (i > 0 && entry.path().filename() == "tokenizer_config.json") {
        std::ifstream in(entry.path());
        nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
        HD_CHECK_KIND(config.is_object(), ErrorKind::kRuntime, entry.path().string(), ": not a JSON object");
        config["pad_token"] = "!";
        write_json(to, config);
        continue;
      }
      fs::copy_file(entry.path(), to, fs::copy_options::overwrite_existing, ec);
      HD_CHECK_KIND(!ec, ErrorKind::kRuntime, entry.path().string(), ": cannot copy: ", ec.message());
    }
  }
  write_json(folder / "model_index.json", index);
  int64_t params = write_weights(random_unet_shapes(spec), folder / "unet" / "diffusion_pytorch_model.safetensors", 1);
  params += write_weights(random_vae_decoder_shapes(spec), folder / "vae" / "diffusion_pytorch_model.safetensors", 2);
  uint64_t seed = 3;
  for (const RandomComponent& t : text_encoders) params += write_weights(t.shapes, folder / t.name / "model.safetensors", seed++);
  const std::string count = std::to_string(params) + "\n";
  write_file(folder / "parameters.txt", count.data(), count.size());
  write_file(marker, marker_text.data(), marker_text.size());
  return params;
}

}  // namespace hd
