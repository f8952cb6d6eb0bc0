#include "cli/cli_runner.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>

namespace hd::test {

CliResult run_cli(const std::string& args, const std::string& env) {
  const std::string command = (env.empty() ? "" : "env " + env + " ") + HD_CLI_PATH + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

}  // namespace hd::test
