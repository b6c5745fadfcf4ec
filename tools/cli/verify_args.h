// tbe-verify's command line (CLI11): the options of the verification run and the case-folder
// subcommands `replay CASE_DIR` / `check CASE_DIR...` (docs/case-files.md). `tbe-verify --help`
// prints the definitions below; tests/tools/test_verify_args.cpp checks them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_exit.h"
#include "tbe/ikbo.h"
#include "tbe/judge/matrix.h"

namespace tbe::verify {

/// Sections of a run (--rows): the forward matrix, the backward rows, the IKBO rows.
struct Sections {
  bool forward = true;
  bool backward = true;
  bool ikbo = true;
};

/// "forward,backward,ikbo,all" (comma-separated, at least one) -> the sections named ("all": the
/// three). Throws std::invalid_argument naming the first part that is not a section.
Sections parse_sections(const std::string& text);

/// The options of the verification run (`tbe-verify [options]`); defaults as in --help.
struct VerifyArgs {
  std::optional<std::int64_t> batch;  ///< --batch B, 1 .. kMaxVerifyBatch (else --full / 8192)
  bool full = false;                  ///< --full: seed-large at its full B = 131072
  std::uint64_t seed = 1;             ///< --seed S
  judge::Design design = judge::Design::Pairwise;  ///< --design
  std::string only;                   ///< --only FILTER (a valid CaseFilter), "" for none
  std::string json_path;              ///< --json FILE, "" for none
  std::string backend = "cuda";       ///< --backend: "cuda" or "cpu"
  bool require_gpu = false;           ///< --require-gpu: exit 4 when no GPU row was verified
  std::string save_failures = "tbe-verify-failures";  ///< --save-failures DIR
  std::int64_t save_failures_max = 4;  ///< --save-failures-max N (clamped to 2^30)
  bool list = false;                   ///< --list
  Sections rows;                       ///< --rows LIST
  std::int64_t backward_row = 0;       ///< --backward-row N (1-based), 0: every row
  std::int64_t jobs = 0;               ///< --jobs N: backward rows at once, 0: judge::default_backward_jobs()
  tbe::ikbo::LceRounding ikbo_rounding = tbe::ikbo::LceRounding::RoundOnce;  ///< --ikbo-rounding
  /// --call-timeout S: a device backend call still running after S seconds fails the run
  /// (judge::CallWatchdog, exit 1); 0: no watchdog. The CPU reference is never watched.
  double call_timeout = 30.0;
};

/// Largest --batch.
inline constexpr std::int64_t kMaxVerifyBatch = 1048576;

/// What the command line asks for: the run, or a subcommand on a case folder.
struct VerifyCommand {
  enum class Kind { Run, Replay, Check };
  Kind kind = Kind::Run;
  VerifyArgs args;       ///< Kind::Run
  /// Kind::Replay: one case folder; Kind::Check: one or more (none empty).
  std::vector<std::string> case_dirs;
};

/// Parses tbe-verify's command line (argv[0] is the program). Returns the command, or how to end:
/// --help (status 0, the help text of the command named) or a usage error (status 2, a message
/// naming the flag): an unknown flag, a missing value, a number out of range or not decimal, a
/// bad name (--design, --backend, --rows, --ikbo-rounding, --only), --only without the forward
/// section, replay without exactly one CASE_DIR, check without a CASE_DIR, a subcommand with run
/// options.
cli::Parsed<VerifyCommand> parse_verify_args(int argc, const char* const* argv);

}  // namespace tbe::verify
