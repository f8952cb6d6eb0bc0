// Recognises what kind of file a checkpoint is from its first bytes, never from its name: a ".ckpt"
// can hold safetensors and a ".safetensors" can hold a pickle.
//
// Pickle checkpoints (PyTorch's .ckpt/.pt/.pth/.bin, as a zip archive or a raw pickle stream) are refused:
// unpickling runs code that the file chooses, so hipDiffusion never does it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace hd {

enum class CheckpointFormat { kSafetensors, kPickleZip, kPickleRaw, kGguf, kUnknown };

CheckpointFormat sniff_checkpoint_format(std::span<const uint8_t> first_bytes);

// Throws an Error (kInvalidInput) with a message that says what `path` is and how to convert it, unless
// `format` is kSafetensors.
void require_safetensors(const std::string& path, CheckpointFormat format);

}  // namespace hd
