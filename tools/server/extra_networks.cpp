#include "tools/server/extra_networks.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>

#include "core/error.h"

namespace hd::server {

namespace {

float scale_of(const std::string& text, std::string_view field, const std::string& tag) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  HD_CHECK(!text.empty() && end == text.c_str() + text.size() && std::isfinite(value), field, ": ", tag,
           ": '", text, "' is not a finite number");
  return float(value);
}

}  // namespace

PromptNetworks take_extra_networks(std::string_view prompt, std::string_view field) {
  // A1111's own pattern (modules/extra_networks.py: re_extra_net).
  static const std::regex tag(R"(<(\w+):([^>]+)>)");
  PromptNetworks out;
  const std::string text(prompt);
  size_t last = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.prompt += text.substr(last, size_t(m.position()) - last);
    last = size_t(m.position() + m.length());
    HD_CHECK(m[1] == "lora", field, ": A1111's extra network ", m.str(),
             " is not applied by this server (only <lora:NAME:SCALE>)");
    // A1111's arguments (extra_networks_lora.py): NAME, then the text encoders' scale and the UNet's
    // (which defaults to the text encoders'), by position or as te= and unet=.
    std::vector<std::string> positional;
    std::optional<float> te, unet;
    const std::string args = m[2];
    for (size_t begin = 0;;) {
      const size_t colon = args.find(':', begin);
      const std::string item = args.substr(begin, colon == std::string::npos ? colon : colon - begin);
      const size_t equals = item.find('=');
      if (equals == std::string::npos) {
        positional.push_back(item);
      } else {
        const std::string key = item.substr(0, equals);
        HD_CHECK(key == "te" || key == "unet", field, ": ", m.str(), ": '", key,
                 "=' is not applied by this server (only te= and unet=)");
        (key == "te" ? te : unet) = scale_of(item.substr(equals + 1), field, m.str());
      }
      if (colon == std::string::npos) break;
      begin = colon + 1;
    }
    HD_CHECK(positional.size() <= 3, field, ": ", m.str(),
             ": at most a name and two scales (A1111's fourth, dyn, is not applied by this server)");
    HD_CHECK(!positional.empty() && !positional[0].empty(), field, ": ", m.str(), " names no LoRA");
    serve::LoraRequest lora{positional[0], 1.0f, std::nullopt};
    if (positional.size() > 1) lora.scale = scale_of(positional[1], field, m.str());
    if (te) lora.scale = *te;
    if (positional.size() > 2) lora.unet_scale = scale_of(positional[2], field, m.str());
    if (unet) lora.unet_scale = *unet;
    out.loras.push_back(std::move(lora));
  }
  out.prompt += text.substr(last);
  return out;
}

}  // namespace hd::server
