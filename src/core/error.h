// Error type of the whole engine. An Error carries a message and a stack of context lines
// ("while reading unet/diffusion_pytorch_model.safetensors"), added as it travels up, so that the one
// line a user sees says what failed and where.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace hd {

// What kind of failure this is; front ends map it to an exit code.
enum class ErrorKind {
  kInvalidInput,   // malformed file, bad shape, bad argument value: the user's input is wrong
  kUnsupported,    // valid input that this build or version cannot handle
  kOutOfMemory,    // an allocation failed
  kRuntime,        // a system or device call failed
  kInternal,       // a broken invariant: a bug in hipDiffusion
  kBusy,           // at a limit that passes (a full request queue) or shutting down: try again later
  kCancelled,      // the work was cancelled by its caller
};

class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message);

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }
  const std::vector<std::string>& context() const noexcept { return context_; }

  // Adds an outer context line ("while loading X"); the innermost comes first.
  Error& add_context(std::string line);

  // Message followed by context, on one line: "bad shape [3] (while loading x; in file y)".
  const char* what() const noexcept override { return full_.c_str(); }

 private:
  void rebuild();

  ErrorKind kind_;
  std::string message_;
  std::vector<std::string> context_;
  std::string full_;
};

// Concatenates any streamable values into one string; used to build error messages.
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Throws an Error of the given kind if `cond` is false. The message arguments are only evaluated on failure.
#define HD_CHECK_KIND(cond, kind, ...)                                 \
  do {                                                                 \
    if (!(cond)) throw ::hd::Error((kind), ::hd::str_cat(__VA_ARGS__)); \
  } while (0)

#define HD_CHECK(cond, ...) HD_CHECK_KIND(cond, ::hd::ErrorKind::kInvalidInput, __VA_ARGS__)

// An invariant that only a bug can break; reports file and line.
#define HD_ASSERT(cond)                                                                        \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::hd::Error(::hd::ErrorKind::kInternal,                                            \
                        ::hd::str_cat("internal error: ", #cond, " failed at ", __FILE__, ":", \
                                      __LINE__));                                              \
  } while (0)

// Runs `body`; an Error escaping it gets `context_expr` added. Keeps call sites to one line.
template <typename Body, typename Context>
auto with_context(Body&& body, Context&& context_fn) -> decltype(body()) {
  try {
    return body();
  } catch (Error& e) {
    e.add_context(context_fn());
    throw;
  }
}

}  // namespace hd
