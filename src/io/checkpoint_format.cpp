#include "io/checkpoint_format.h"

#include "core/error.h"

namespace hd {

CheckpointFormat sniff_checkpoint_format(std::span<const uint8_t> b) {
  if (b.size() >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) return CheckpointFormat::kPickleZip;
  // Pickle protocol 2+ begins with the PROTO opcode 0x80 and the protocol number.
  if (b.size() >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return CheckpointFormat::kPickleRaw;
  if (b.size() >= 4 && b[0] == 'G' && b[1] == 'G' && b[2] == 'U' && b[3] == 'F') return CheckpointFormat::kGguf;
  // safetensors: 8-byte length, then the JSON header, which the format requires to start with '{'.
  if (b.size() >= 9 && b[8] == '{') return CheckpointFormat::kSafetensors;
  return CheckpointFormat::kUnknown;
}

void require_safetensors(const std::string& path, CheckpointFormat format) {
  switch (format) {
    case CheckpointFormat::kSafetensors: return;
    case CheckpointFormat::kPickleZip:
    case CheckpointFormat::kPickleRaw:
      throw Error(ErrorKind::kInvalidInput,
                  str_cat(path, ": a PyTorch pickle checkpoint; hipDiffusion never unpickles files (loading a "
                                "pickle can run arbitrary code). Convert it to safetensors where you trust it, e.g. "
                                "`python -c \"import torch, safetensors.torch as st; "
                                "sd = torch.load('in.ckpt', weights_only=True); "
                                "st.save_file(sd.get('state_dict', sd), 'out.safetensors')\"`"));
    case CheckpointFormat::kGguf:
      throw Error(ErrorKind::kUnsupported, str_cat(path, ": a GGUF file; hipDiffusion reads safetensors only"));
    case CheckpointFormat::kUnknown:
      throw Error(ErrorKind::kInvalidInput, str_cat(path, ": not a safetensors file (unrecognised first bytes)"));
  }
}

}  // namespace hd
