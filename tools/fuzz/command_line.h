// tbe-fuzz's command line (CLI11, through the tools' shared helpers in cli/cli_parse.h): typed,
// range-checked options, --help generated from the definitions, errors naming the flag.
#pragma once

#include "cli/cli_exit.h"
#include "fuzz/campaign.h"

namespace tbe::fuzz {

/// Parses tbe-fuzz's command line (argv[0] is the program). Returns the options to run with (the
/// campaign, --case or --list), or how to end: --help / -h (status 0, the help text) or a usage
/// error (status cli::kUsageError = 2, "tbe-fuzz: <what, naming the flag>\n(see tbe-fuzz
/// --help)\n"): an unknown flag or stray argument, a missing or malformed value, a value out of
/// range (integers are decimal), no --seconds without --case or --list. A repeated option keeps
/// its last value (cli::set_conventions).
cli::Parsed<CampaignOptions> parse_command_line(int argc, const char* const* argv);

}  // namespace tbe::fuzz
