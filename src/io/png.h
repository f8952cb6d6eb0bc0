// PNG files through libpng: 8-bit RGB images out, with text chunks (the A1111-style "parameters" that
// image viewers and web UIs read back), and any PNG in (converted to 8-bit RGB) for img2img.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hd {

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // row-major RGB, 3 bytes a pixel
};

// Writes `image` with the given (keyword, UTF-8 text) chunks (iTXt, so any prompt survives).
// Throws Error naming the path on failure.
void write_png(const std::string& path, const RgbImage& image,
               const std::vector<std::pair<std::string, std::string>>& text = {});
// The same PNG file's bytes, in memory (what a server sends).
std::vector<uint8_t> encode_png(const RgbImage& image,
                                const std::vector<std::pair<std::string, std::string>>& text = {});
// Reads any PNG as 8-bit RGB (alpha dropped over black, gray and palettes expanded, 16-bit reduced).
RgbImage read_png(const std::string& path);
// The same from bytes in memory; `what` names them in errors ("init image 1"). A picture of more than
// `max_pixels` is refused from its header, before anything is decoded.
RgbImage decode_png(std::span<const uint8_t> bytes, const std::string& what,
                    int64_t max_pixels = int64_t(16384) * 16384);
// The text chunks of a PNG, in file order.
std::vector<std::pair<std::string, std::string>> read_png_text(const std::string& path);

}  // namespace hd
