#include "core/error.h"

namespace hd {

Error::Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) { rebuild(); }

Error& Error::add_context(std::string line) {
  context_.push_back(std::move(line));
  rebuild();
  return *this;
}

void Error::rebuild() {
  full_ = message_;
  if (context_.empty()) return;
  full_ += " (";
  for (size_t i = 0; i < context_.size(); ++i) {
    if (i) full_ += "; ";
    full_ += context_[i];
  }
  full_ += ")";
}

}  // namespace hd
