#include "tools/server/base64.h"

#include <openssl/evp.h>

#include <memory>

#include "core/error.h"

namespace hd::server {

std::string base64_encode(std::span<const uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  // EVP_EncodeBlock: one line, padded, NUL-terminated (the string's own terminator takes the NUL).
  const int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(), int(bytes.size()));
  out.resize(size_t(written));
  return out;
}

std::vector<uint8_t> base64_decode(std::string_view text, const std::string& what) {
  HD_CHECK(text.size() < (size_t(1) << 31), what, " is too large");
  std::unique_ptr<EVP_ENCODE_CTX, decltype(&EVP_ENCODE_CTX_free)> ctx(EVP_ENCODE_CTX_new(),
                                                                      EVP_ENCODE_CTX_free);
  HD_CHECK_KIND(ctx != nullptr, ErrorKind::kOutOfMemory, "cannot decode ", what);
  // The streaming decoder (unlike EVP_DecodeBlock) skips whitespace and accounts for the padding.
  EVP_DecodeInit(ctx.get());
  std::vector<uint8_t> out(text.size() / 4 * 3 + 3);
  int length = 0, tail = 0;
  const int ok = EVP_DecodeUpdate(ctx.get(), out.data(), &length,
                                  reinterpret_cast<const unsigned char*>(text.data()), int(text.size()));
  HD_CHECK(ok >= 0 && EVP_DecodeFinal(ctx.get(), out.data() + length, &tail) == 1, what,
           " is not valid base64");
  out.resize(size_t(length + tail));
  return out;
}

}  // namespace hd::server
