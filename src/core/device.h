// Where a tensor lives: the CPU, or GPU N of a vendor. Parsed from "cpu", "cuda:0", "hip:1".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hd {

enum class DeviceType : uint8_t { kCpu, kCuda, kHip };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device cpu() { return {}; }
  // Accepts "cpu", "cuda", "cuda:N", "hip", "hip:N" (N a non-negative decimal); throws Error otherwise.
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_gpu() const { return type != DeviceType::kCpu; }
  std::string to_string() const;

  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace hd
