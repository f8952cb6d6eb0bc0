// Base64 (RFC 4648, with padding) through OpenSSL's libcrypto: images in A1111's JSON.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hd::server {

std::string base64_encode(std::span<const uint8_t> bytes);
// Decodes `text` (whitespace allowed, as line-wrapped encoders write it); an Error (kInvalidInput) naming
// `what` when it is not base64.
std::vector<uint8_t> base64_decode(std::string_view text, const std::string& what);

}  // namespace hd::server
