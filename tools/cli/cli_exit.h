// How the tools end on a command line they do not run: --help prints the help on stdout and exits
// 0, a usage error prints "<tool>: <what>" on stderr and exits 2. Free of CLI11 (cli_parse.h holds
// the parsing), so CUDA sources can include the argument structs of their tool.
#pragma once

#include <cstdio>
#include <string>
#include <variant>

namespace tbe::cli {

/// Exit status of a bad command line, in every tool (0 after --help).
inline constexpr int kUsageError = 2;

/// A command line that ends the program before it runs: `status` 0 with the help text (for
/// stdout), or kUsageError with the message (for stderr).
struct Exit {
  int status = kUsageError;
  std::string text;
};

/// A tool's parsed command line: the arguments to run with, or how to end.
template <class Args>
using Parsed = std::variant<Args, Exit>;

/// Prints e.text on stdout (status 0) or stderr (otherwise); returns e.status.
inline int finish(const Exit& e) {
  std::fputs(e.text.c_str(), e.status == 0 ? stdout : stderr);
  return e.status;
}

}  // namespace tbe::cli
