#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace hd {

Device Device::parse(std::string_view text) {
  const auto fail = [&]() {
    return Error(ErrorKind::kInvalidInput,
                 str_cat("invalid device '", text, "' (expected cpu, cuda:N or hip:N)"));
  };
  if (text == "cpu") return Device::cpu();
  const size_t colon = text.find(':');
  const std::string_view vendor = text.substr(0, colon);
  Device d;
  if (vendor == "cuda") {
    d.type = DeviceType::kCuda;
  } else if (vendor == "hip") {
    d.type = DeviceType::kHip;
  } else {
    throw fail();
  }
  if (colon == std::string_view::npos) return d;
  const std::string_view digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 4) throw fail();
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), d.index);
  if (ec != std::errc() || end != digits.data() + digits.size() || d.index < 0) throw fail();
  return d;
}

std::string Device::to_string() const {
  switch (type) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kCuda: return str_cat("cuda:", index);
    case DeviceType::kHip: return str_cat("hip:", index);
  }
  return "?";
}

}  // namespace hd
