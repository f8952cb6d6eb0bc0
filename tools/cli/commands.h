// The subcommands of the `hipdiffusion` program. Each returns the process exit code; errors of the
// user's input escape as hd::Error and are reported by main.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace hd::cli {

// Exit codes: 0 success, 1 bad input or failure (one line on stderr), 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A usage error: wrong flags or arguments. main prints it with the usage line and exits 2.
struct UsageError {
  std::string message;
};

int run_info(std::span<const std::string_view> args);
int run_tokenize(std::span<const std::string_view> args);
int run_generate(std::span<const std::string_view> args);
int run_bench(std::span<const std::string_view> args);
int run_tune(std::span<const std::string_view> args);
int run_serve(std::span<const std::string_view> args);

}  // namespace hd::cli
