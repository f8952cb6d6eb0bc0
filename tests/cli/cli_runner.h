// Runs the real `hipdiffusion` binary for the CLI tests.
#pragma once

#include <filesystem>
#include <string>

namespace hd::test {

struct CliResult {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// Runs `hipdiffusion ARGS` through /bin/sh, with `env` (e.g. "HF_HUB_CACHE=/x") in its environment.
CliResult run_cli(const std::string& args, const std::string& env = "");
// A path quoted for the shell.
std::string quoted(const std::filesystem::path& p);

}  // namespace hd::test
