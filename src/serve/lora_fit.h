// Whether a LoRA file applies to a model, asked when a request names them rather than found when a
// worker loads the pair: by then the worker may have dropped a loaded model to make room, and a LoRA made
// for another model family (an SDXL LoRA on SD1.5) would cost every queued request that reload. The
// check reads file headers only (the model's tensor names and shapes, the LoRA's layers), and each pair's
// verdict is kept: both are listed once at start (ModelCatalogue, LoraCatalogue).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "serve/lora_catalogue.h"
#include "serve/model_catalogue.h"

namespace hd::serve {

class LoraFitCache {
 public:
  // Returns when every layer of `lora` changes a weight of `model` that its shapes fit; throws an
  // Error (kInvalidInput) naming both and what does not fit otherwise. Thread-safe.
  void check(const CatalogueEntry& model, const LoraEntry& lora);

 private:
  struct Verdict {
    ErrorKind kind = ErrorKind::kInvalidInput;
    std::string why;  // empty: it fits
  };
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, Verdict> verdicts_;  // by (model path, LoRA path)
};

}  // namespace hd::serve
