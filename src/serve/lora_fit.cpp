#include "serve/lora_fit.h"

#include "io/lora.h"
#include "io/model_source.h"

namespace hd::serve {

void LoraFitCache::check(const CatalogueEntry& model, const LoraEntry& lora) {
  const std::pair<std::string, std::string> key{model.path, lora.path};
  std::optional<Verdict> verdict;
  {
    std::lock_guard lock(mutex_);
    if (auto it = verdicts_.find(key); it != verdicts_.end()) verdict = it->second;
  }
  if (!verdict) {
    // Outside the lock: two requests may check the same new pair at once, and reach the same verdict.
    // A model or a LoRA file that cannot be read (missing, malformed, being copied) is not a verdict about
    // the pair: those errors come through as they are, and are not kept.
    const ModelSource source = ModelSource::open(model.path);
    const SafetensorsFile file = ModelSource::open_lora(lora.path);
    verdict = Verdict{};
    try {
      lora_layers(file, source.components());  // what ModelSource::add_lora checks before it attaches any
    } catch (const Error& e) {
      // What the layers say (one that changes no weight, a shape that does not fit, a LoRA kind the
      // engine does not read) is kept; anything else is not a verdict.
      if (e.kind() != ErrorKind::kInvalidInput && e.kind() != ErrorKind::kUnsupported) throw;
      verdict = Verdict{e.kind(), e.what()};
    }
    std::lock_guard lock(mutex_);
    verdicts_.emplace(key, *verdict);
  }
  HD_CHECK_KIND(verdict->why.empty(), verdict->kind, "LoRA ", lora.name, " does not fit model ", model.name,
                ": ", verdict->why);
}

}  // namespace hd::serve
