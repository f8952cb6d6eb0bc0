#include "io/lora.h"

#include <cmath>
#include <map>
#include <optional>
#include <regex>

#include "core/error.h"
#include "io/ldm_names.h"

namespace hd {

namespace {

// The weights of one layer, found by the suffix of their names.
struct LayerParts {
  const SafetensorsEntry* up = nullptr;
  const SafetensorsEntry* down = nullptr;
  const SafetensorsEntry* alpha = nullptr;
};

enum class Part { kUp, kDown, kAlpha };

struct Suffix {
  std::string_view text;
  Part part;
};
constexpr Suffix kSuffixes[] = {{".lora_up.weight", Part::kUp},
                                {".lora_down.weight", Part::kDown},
                                {".lora_B.weight", Part::kUp},
                                {".lora_A.weight", Part::kDown},
                                {".alpha", Part::kAlpha}};

// Parts of names that mark a kind of layer the engine does not apply, and what to call it; `suffix`: only
// at the name's end (".diff" inside "model.diffusion_model." marks nothing).
struct OtherKind {
  std::string_view marker, kind;
  bool suffix = false;
};
constexpr OtherKind kOtherKinds[] = {{".hada_", "LoHa"},
                                     {".lokr_", "LoKr"},
                                     {".lora_mid.", "LoRA with a mid (Tucker) weight"},
                                     {".dora_scale", "DoRA"},
                                     {".lora_magnitude_vector", "DoRA"},
                                     {".diff", "whole-weight difference", true},
                                     {".diff_b", "whole-bias difference", true},
                                     {".lora_B.bias", "LoRA with a bias"},
                                     {".on_input", "IA3"},
                                     {".oft_", "OFT"},
                                     {".boft_", "BOFT"}};

// The component a layer's module name starts with, and whether the rest is in kohya's underscored form.
struct Prefix {
  std::string_view text;
  std::string_view component;
  bool underscored;
};
constexpr Prefix kPrefixes[] = {{"lora_unet_", "unet", true},
                                {"lora_te1_", "text_encoder", true},
                                {"lora_te2_", "text_encoder_2", true},
                                {"lora_te_", "text_encoder", true},
                                {"unet.", "unet", false},
                                {"text_encoder.", "text_encoder", false},
                                {"text_encoder_2.", "text_encoder_2", false}};

std::string underscored(std::string_view dotted) {
  std::string s(dotted);
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

// The module each weight of a component belongs to, in kohya's underscored form -> the weight's name.
// Two modules with one underscored form (none in SD's models) map to "" and are refused as ambiguous.
std::map<std::string, std::string> underscored_modules(const ModelComponent& c) {
  std::map<std::string, std::string> modules;
  const auto add = [&](const std::string& key, const std::string& tensor) {
    const auto [it, inserted] = modules.emplace(key, tensor);
    if (!inserted && it->second != tensor) it->second.clear();
  };
  constexpr std::string_view kWeight = ".weight";
  for (const TensorRef& t : c.tensors) {
    if (!t.name.ends_with(kWeight)) continue;
    const std::string module =
        underscored(std::string_view(t.name).substr(0, t.name.size() - kWeight.size()));
    add(module, t.name);
    // kohya names transformers' text encoders with their "text_model." root, which some files omit.
    if (c.name.starts_with("text_encoder") && !t.name.starts_with("text_model."))
      add("text_model_" + module, t.name);
  }
  return modules;
}

// kohya's underscored form of an original (LDM/SGM) UNet module, as SDXL's LoRAs name them
// ("input_blocks_4_1_transformer_blocks_0_attn1_to_q"), back in dotted form; nullopt when it is not one.
std::optional<std::string> ldm_unet_module(const std::string& u) {
  static const std::regex block(R"(^(input_blocks|output_blocks)_(\d+)_(\d+)_(.+)$)");
  static const std::regex middle(R"(^middle_block_(\d+)_(.+)$)");
  static const std::regex whole(R"(^(time_embed|out)_(\d+)$)");
  static const std::regex label(R"(^label_emb_0_(\d+)$)");
  static const std::regex numbered(R"(^(in_layers|out_layers|emb_layers)_(\d+)$)");
  static const std::regex projection(R"(^transformer_blocks_(\d+)_(attn\d)_(to_q|to_k|to_v|to_out_0)$)");
  static const std::regex feed_forward(R"(^transformer_blocks_(\d+)_ff_net_(0_proj|2)$)");
  static const std::regex plain(R"(^(skip_connection|proj_in|proj_out|op|conv)$)");
  std::smatch m;
  if (std::regex_match(u, m, whole)) return str_cat(m[1].str(), ".", m[2].str());
  if (std::regex_match(u, m, label)) return str_cat("label_emb.0.", m[1].str());
  if (u == "input_blocks_0_0") return "input_blocks.0.0";  // conv_in
  std::string head, rest;
  if (std::regex_match(u, m, block)) {
    head = str_cat(m[1].str(), ".", m[2].str(), ".", m[3].str());
    rest = m[4].str();
  } else if (std::regex_match(u, m, middle)) {
    head = str_cat("middle_block.", m[1].str());
    rest = m[2].str();
  } else {
    return std::nullopt;
  }
  std::smatch r;
  std::string tail;
  if (std::regex_match(rest, r, numbered)) {
    tail = str_cat(r[1].str(), ".", r[2].str());
  } else if (std::regex_match(rest, r, projection)) {
    tail = str_cat("transformer_blocks.", r[1].str(), ".", r[2].str(), ".",
                   r[3] == "to_out_0" ? "to_out.0" : r[3].str());
  } else if (std::regex_match(rest, r, feed_forward)) {
    tail = str_cat("transformer_blocks.", r[1].str(), ".ff.net.", r[2] == "2" ? "2" : "0.proj");
  } else if (std::regex_match(rest, r, plain)) {
    tail = rest;
  } else {
    return std::nullopt;
  }
  return head + "." + tail;
}

// The UNet's layers per block (diffusers' down_blocks.0.resnets count), which places the original
// names' downsamplers; 0 when the UNet has none.
int64_t layers_per_block(const ModelComponent& unet) {
  static const std::regex resnet(R"(^down_blocks\.0\.resnets\.(\d+)\..*$)");
  int64_t layers = 0;
  for (const TensorRef& t : unet.tensors) {
    std::smatch m;
    if (std::regex_match(t.name, m, resnet)) layers = std::max<int64_t>(layers, std::stoll(m[1]) + 1);
  }
  return layers;
}

// Finds the weights a file's modules change, building each component's tables once.
class ModuleFinder {
 public:
  explicit ModuleFinder(std::span<const ModelComponent> components) : components_(components) {}

  // The weight `module` (in `component`, underscored or dotted) changes; nullopt when the model has none.
  std::optional<std::string> weight_of(std::string_view component_name, const std::string& module,
                                       bool is_underscored) {
    const ModelComponent* c = component(component_name);
    if (c == nullptr) return std::nullopt;
    if (!is_underscored) {
      // Text encoders' modules with or without transformers' "text_model." root (transformers 5 dropped it).
      constexpr std::string_view kRoot = "text_model.";
      std::vector<std::string> names = {module + ".weight"};
      if (c->name.starts_with("text_encoder"))
        names.push_back(module.starts_with(kRoot) ? module.substr(kRoot.size()) + ".weight"
                                                  : str_cat(kRoot, module, ".weight"));
      for (const std::string& tensor : names)
        if (c->find(tensor)) return tensor;
      return std::nullopt;
    }
    auto [tables, fresh] = tables_.try_emplace(c->name);
    if (fresh) tables->second = underscored_modules(*c);
    if (const auto it = tables->second.find(module); it != tables->second.end()) {
      HD_CHECK(!it->second.empty(), "'", module, "' names more than one module of the ", c->name);
      return it->second;
    }
    if (c->name != "unet") return std::nullopt;
    const std::optional<std::string> ldm = ldm_unet_module(module);
    if (unet_layers_per_block_ < 0)
      unet_layers_per_block_ = layers_per_block(*c);  // once: a scan of the UNet
    const int64_t layers = unet_layers_per_block_;
    if (!ldm || layers == 0) return std::nullopt;
    // The name table finds the UNet's layout from its first downsampler's name; given with the module's.
    std::vector<TensorRef> names(2);
    names[0].name = str_cat("input_blocks.", layers + 1, ".0.op.weight");
    names[1].name = *ldm + ".weight";
    const std::string tensor = ldm_to_diffusers_names("unet", std::move(names))[1].name;
    return c->find(tensor) ? std::optional(tensor) : std::nullopt;
  }

  const ModelComponent* component(std::string_view name) const {
    for (const ModelComponent& c : components_)
      if (c.name == name) return &c;
    return nullptr;
  }

 private:
  std::span<const ModelComponent> components_;
  std::map<std::string, std::map<std::string, std::string>> tables_;
  int64_t unet_layers_per_block_ = -1;  // -1: not yet counted
};

// diffusers' older attention-processor names ("<attention>.processor.to_q_lora.down.weight") as the
// module they change and the part they are; nullopt for other names.
std::optional<std::pair<std::string, Part>> processor_lora(const std::string& name) {
  static const std::regex processor(R"(^(.*)\.processor\.(to_q|to_k|to_v|to_out)_lora\.(up|down)\.weight$)");
  std::smatch m;
  if (!std::regex_match(name, m, processor)) return std::nullopt;
  const std::string projection = m[2] == "to_out" ? "to_out.0" : m[2].str();
  return std::pair{m[1].str() + "." + projection, m[3] == "up" ? Part::kUp : Part::kDown};
}

std::vector<int64_t> trailing(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 1, shape.end());
}

// A weight's [in] or [in, kh, kw] as [in, kh, kw], so that a 1x1 convolution and a matrix compare equal.
std::vector<int64_t> as_kernel(std::vector<int64_t> in) {
  if (in.size() == 1) in.insert(in.end(), {1, 1});
  return in;
}

void check_floating(const SafetensorsFile& file, const SafetensorsEntry& e) {
  HD_CHECK_KIND(e.dtype.has_value() && is_floating(*e.dtype), ErrorKind::kUnsupported, file.name(), ": '",
                e.name, "' has dtype ", e.dtype_name, "; only F32, F16 and BF16 LoRA weights load");
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += str_cat(i ? ", " : "", s[i]);
  return t + "]";
}

// `text` without its last ":NUMBER", and the number; nullopt when it does not end so.
std::optional<std::pair<std::string_view, float>> split_trailing_number(std::string_view text,
                                                                        std::string_view whole) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) return std::nullopt;
  const std::string number(text.substr(colon + 1));
  char* end = nullptr;
  const float value = std::strtof(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return std::nullopt;
  HD_CHECK(std::isfinite(value), "LoRA '", whole, "': the scale must be a finite number");
  return std::pair{text.substr(0, colon), value};
}

}  // namespace

LoraChoice parse_lora_choice(std::string_view text) {
  LoraChoice choice{std::string(text), 1.0f};
  if (const auto last = split_trailing_number(text, text)) {
    choice = {std::string(last->first), last->second};
    // FILE:TE:UNET, as A1111's <lora:NAME:TE:UNET>.
    if (const auto first = split_trailing_number(last->first, text))
      choice = {std::string(first->first), first->second, last->second};
  }
  HD_CHECK(!choice.path.empty(), "LoRA '", text, "': no file named");
  return choice;
}

std::vector<LoraChoice> parse_lora_list(std::string_view text) {
  std::vector<LoraChoice> loras;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    loras.push_back(parse_lora_choice(text.substr(begin, comma - begin)));
    if (comma == std::string_view::npos) return loras;
    begin = comma + 1;
  }
}

std::vector<LoraLayer> lora_layers(const SafetensorsFile& file, std::span<const ModelComponent> components) {
  // Group the file's tensors by module.
  std::map<std::string, LayerParts> modules;
  for (const SafetensorsEntry& e : file.entries()) {
    std::optional<std::pair<std::string, Part>> found = processor_lora(e.name);
    for (const Suffix& s : kSuffixes) {
      if (found || !e.name.ends_with(s.text)) continue;
      found = std::pair{e.name.substr(0, e.name.size() - s.text.size()), s.part};
    }
    if (!found) {
      for (const OtherKind& other : kOtherKinds) {
        const bool marked =
            other.suffix ? e.name.ends_with(other.marker) : e.name.find(other.marker) != std::string::npos;
        HD_CHECK_KIND(!marked, ErrorKind::kUnsupported, file.name(), ": '", e.name, "' is part of a ",
                      other.kind, " layer; only LoRA layers (lora_up/lora_down or lora_A/lora_B) apply");
      }
      throw Error(ErrorKind::kInvalidInput,
                  str_cat(file.name(), ": '", e.name, "' is not a LoRA weight (expected ",
                          "names ending in .lora_up.weight, .lora_down.weight, .alpha, ",
                          ".lora_A.weight or .lora_B.weight)"));
    }
    LayerParts& parts = modules[found->first];
    const SafetensorsEntry** slot = found->second == Part::kUp     ? &parts.up
                                    : found->second == Part::kDown ? &parts.down
                                                                   : &parts.alpha;
    HD_CHECK(*slot == nullptr, file.name(), ": layer '", found->first, "' has '", e.name,
             "' twice in two spellings");
    *slot = &e;
  }
  HD_CHECK(!modules.empty(), file.name(), ": holds no LoRA layer");

  // Every layer's weight first: a LoRA made for another model matches few, and saying so helps more
  // than the first shape that differs.
  ModuleFinder finder(components);
  std::vector<std::pair<const Prefix*, std::string>> found;
  std::vector<std::string> unmatched;
  std::map<std::string, std::string> changed;  // component/tensor -> the layer that changes it
  for (const auto& [module, parts] : modules) {
    const Prefix* prefix = nullptr;
    for (const Prefix& p : kPrefixes)
      if (!prefix && module.starts_with(p.text)) prefix = &p;
    HD_CHECK_KIND(prefix != nullptr, ErrorKind::kUnsupported, file.name(), ": layer '", module,
                  "' starts with none of the prefixes this engine reads (lora_unet_, lora_te_, lora_te1_, "
                  "lora_te2_, unet., text_encoder., text_encoder_2.)");
    std::optional<std::string> tensor;
    tensor = finder.weight_of(prefix->component, module.substr(prefix->text.size()), prefix->underscored);
    if (!tensor) unmatched.push_back(module);
    found.emplace_back(prefix, tensor.value_or(""));
    // Two spellings of one module in one file would add its change twice.
    if (tensor) {
      const auto [it, fresh] = changed.emplace(str_cat(prefix->component, "/", *tensor), module);
      HD_CHECK(fresh, file.name(), ": layers '", it->second, "' and '", module, "' both change '", *tensor,
               "'");
    }
  }
  HD_CHECK(unmatched.empty(), file.name(), ": ", unmatched.size(), " of its ", modules.size(),
           " layers change no weight of this model (the first: '", unmatched.empty() ? "" : unmatched.front(),
           "'); is it a LoRA for another model family?");

  std::vector<LoraLayer> layers;
  size_t i = 0;
  for (const auto& [module, parts] : modules) {
    const auto& [prefix, tensor] = found[i++];
    HD_CHECK(parts.up && parts.down, file.name(), ": layer '", module, "' lacks its ",
             parts.up ? "down" : "up", " weight");
    const TensorRef& target = *finder.component(prefix->component)->find(tensor);
    HD_CHECK_KIND(!target.transposed && !target.held, ErrorKind::kUnsupported, file.name(), ": layer '",
                  module, "' changes '", tensor,
                  "', which this checkpoint stores in a form LoRAs cannot change yet");
    for (const SafetensorsEntry* e : {parts.up, parts.down}) check_floating(file, *e);
    const std::vector<int64_t> weight = target.shape(), up = parts.up->shape, down = parts.down->shape;
    const bool up_ok = (up.size() == 2 || (up.size() == 4 && up[2] == 1 && up[3] == 1)) && !weight.empty() &&
                       up[0] == weight[0];
    const bool down_ok = (down.size() == 2 || down.size() == 4) &&
                         (weight.size() == 2 || weight.size() == 4) && up.size() >= 2 && down[0] == up[1] &&
                         as_kernel(trailing(down)) == as_kernel(trailing(weight));
    HD_CHECK(up_ok && down_ok && up[1] > 0, file.name(), ": layer '", module, "' (up ", shape_text(up),
             ", down ", shape_text(down), ") does not fit '", tensor, "' of the ", prefix->component, " ",
             shape_text(weight));
    float scale = 1.0f;
    if (parts.alpha) {
      check_floating(file, *parts.alpha);
      HD_CHECK(parts.alpha->numel == 1, file.name(), ": '", parts.alpha->name, "' is not one number");
      const float alpha = file.load(*parts.alpha, DType::kF32).view().ptr<float>()[0];
      HD_CHECK(std::isfinite(alpha), file.name(), ": '", parts.alpha->name, "' is not a finite number");
      scale = alpha / float(up[1]);
    }
    layers.push_back({module, std::string(prefix->component), tensor, parts.up, parts.down, scale});
  }
  return layers;
}

}  // namespace hd
