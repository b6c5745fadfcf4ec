// tbe-fuzz's command line (CLI11): typed, range-checked options, --help generated from the
// definitions, errors naming the flag.
#pragma once

#include <optional>
#include <string>

#include "fuzz/campaign.h"

namespace tbe::fuzz {

/// The outcome of parsing: the options to run with, or an exit status and the text to print.
struct CommandLine {
  std::optional<CampaignOptions> options;  ///< set when the campaign should run (or --list)
  int exit_code = 0;  ///< without options: 0 after --help, 2 for a usage error
  std::string text;   ///< without options: the help (stdout) or the error (stderr)
};

/// Parses argv[1 .. argc). Usage errors (an unknown flag, a missing or malformed value, a value
/// out of range, no --seconds without --case or --list) give exit_code 2 and text
/// "tbe-fuzz: <what, naming the flag>\n(see tbe-fuzz --help)\n".
CommandLine parse_command_line(int argc, const char* const* argv);

}  // namespace tbe::fuzz
