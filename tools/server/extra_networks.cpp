#include "tools/server/extra_networks.h"

#include <cmath>
#include <cstdlib>
#include <regex>

#include "core/error.h"

namespace hd::server {

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
    const std::string args = m[2];
    const size_t colon = args.find(':');
    serve::LoraRequest lora{args.substr(0, colon), 1.0f};
    if (colon != std::string::npos) {
      const std::string scale = args.substr(colon + 1);
      char* end = nullptr;
      const double value = std::strtod(scale.c_str(), &end);
      HD_CHECK(
          !scale.empty() && end == scale.c_str() + scale.size() && std::isfinite(value), field, ": ", m.str(),
          ": the scale must be one finite number (separate text-encoder and UNet scales are not supported)");
      lora.scale = float(value);
    }
    HD_CHECK(!lora.name.empty(), field, ": ", m.str(), " names no LoRA");
    out.loras.push_back(std::move(lora));
  }
  out.prompt += text.substr(last);
  return out;
}

}  // namespace hd::server
