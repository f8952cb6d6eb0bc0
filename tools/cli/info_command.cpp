// `hipdiffusion info PATH`: what a model is made of and which architecture it is.
#include <cstdio>
#include <map>
#include <string>

#include "core/buffer.h"
#include "io/model_source.h"
#include "models/architecture.h"
#include "tools/cli/commands.h"

namespace hd::cli {

namespace {

std::string dtype_summary(const ModelComponent& c) {
  std::map<std::string, int> counts;
  for (const auto& t : c.tensors) ++counts[t.entry->dtype_name];
  std::string s;
  for (const auto& [name, n] : counts) s += (s.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  return s;
}

std::string printable(const std::string& text, size_t max_chars) {
  std::string s = text.size() > max_chars ? text.substr(0, max_chars - 3) + "..." : text;
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return s;
}

}  // namespace

int run_info(std::span<const std::string_view> args) {
  if (args.size() != 1 || args[0].starts_with("-")) {
    throw UsageError{args.empty() ? "info: missing PATH" : "info: expected exactly one PATH"};
  }
  const ModelSource model = ModelSource::open(std::string(args[0]));
  const ArchitectureInfo arch = detect_architecture(model);

  std::printf("model:        %s\n", model.path().c_str());
  std::printf("layout:       %s\n", std::string(layout_name(model.layout())).c_str());
  std::printf("architecture: %s", family_name(arch.family).c_str());
  if (arch.unet_in_channels == 9) std::printf(" inpainting");
  std::printf(" (%s)\n", arch.evidence.c_str());
  std::printf("prediction:   %s", arch.prediction.c_str());
  if (!arch.prediction_source.empty()) std::printf(" (%s)", arch.prediction_source.c_str());
  std::printf("\n");
  if (arch.context_dim) std::printf("context dim:  %d\n", arch.context_dim);
  if (arch.unet_in_channels) std::printf("unet in ch:   %d\n", arch.unet_in_channels);
  std::printf("components:\n");
  size_t total = 0;
  for (const auto& c : model.components()) {
    size_t bytes = 0;
    for (const auto& t : c.tensors) bytes += t.entry->nbytes();
    total += bytes;
    std::printf("  %-15s %6zu tensors  %10s  %s\n", c.name.c_str(), c.tensors.size(), format_bytes(bytes).c_str(),
                dtype_summary(c).c_str());
  }
  std::printf("total:        %s in %zu file%s\n", format_bytes(total).c_str(), model.files().size(),
              model.files().size() == 1 ? "" : "s");
  if (model.layout() == ModelLayout::kDiffusersFolder) {
    std::printf("tokenizer:    %s\n", model.tokenizer_files().empty() ? "none" : model.tokenizer_files().c_str());
  }
  // Metadata is free text from the file: shown shortened, with control characters masked.
  constexpr size_t kMaxMetadataLines = 12;
  size_t shown_lines = 0, all_lines = 0;
  for (const auto& f : model.files()) {
    for (const auto& [key, value] : f->metadata()) {
      if (++all_lines > kMaxMetadataLines) continue;
      ++shown_lines;
      std::printf("metadata:     %s = %s\n", printable(key, 40).c_str(), printable(value, 80).c_str());
    }
  }
  if (all_lines > shown_lines) std::printf("metadata:     (%zu more entries)\n", all_lines - shown_lines);
  return kExitOk;
}

}  // namespace hd::cli
