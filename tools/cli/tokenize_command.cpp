// `hipdiffusion tokenize --model PATH --prompt TEXT [--vocab DIR]`: the 77 token ids of a prompt.
#include <cstdio>
#include <optional>
#include <string>

#include "io/model_source.h"
#include "models/architecture.h"
#include "text/clip_tokenizer.h"
#include "pipeline/tokenizer_files.h"
#include "tools/cli/commands.h"

namespace hd::cli {

int run_tokenize(std::span<const std::string_view> args) {
  std::optional<std::string> model, prompt, vocab;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view flag = args[i];
    std::optional<std::string>* target = flag == "--model" ? &model : flag == "--prompt" ? &prompt
                                         : flag == "--vocab" ? &vocab : nullptr;
    if (target == nullptr) throw UsageError{"tokenize: unknown argument '" + std::string(flag) + "'"};
    if (i + 1 >= args.size()) throw UsageError{"tokenize: " + std::string(flag) + " needs a value"};
    *target = std::string(args[++i]);
  }
  if (!model || !prompt) throw UsageError{"tokenize: --model PATH and --prompt TEXT are required"};
  // The family decides which tokenizer a single file falls back to (SD2.x pads differently).
  const ModelSource source = ModelSource::open(*model);
  const ModelFamily family = detect_architecture(source).family;
  const ClipTokenizer tokenizer = ClipTokenizer::load(find_tokenizer_folder(source, family, vocab));
  const auto ids = tokenizer.encode(*prompt);
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
  std::printf("\n");
  return kExitOk;
}

}  // namespace hd::cli
