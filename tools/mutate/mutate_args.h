// tbe-mutate's command line (CLI11, through the tools' shared helpers in cli/cli_parse.h).
#pragma once

#include "cli/cli_exit.h"
#include "mutate/campaign.h"

namespace tbe::mutate {

/// Parses tbe-mutate's command line (argv[0] is the program; its folder gives the default
/// --verify and --tests: the tbe-verify and test_optimized of the same build tree,
/// <dir>/tbe-verify or <dir>/../tools/tbe-verify, <dir>/../tests/test_optimized). Returns the
/// options, or how to end: --help (status 0) or a usage error (status 2, naming the flag): an
/// unknown flag or stray argument, a --fault name not in the catalogue (the message lists them),
/// a budget that is not a positive number of seconds, an empty --out.
cli::Parsed<MutateOptions> parse_mutate_args(int argc, const char* const* argv);

}  // namespace tbe::mutate
