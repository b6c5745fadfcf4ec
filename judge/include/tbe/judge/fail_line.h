// The machine-readable line tbe-verify prints on stderr the moment a row fails, so that a parent
// process (tbe-mutate, docs/mutation.md) learns which check failed first, and when, without waiting
// for the tables at the end of the run:
//   tbe-verify-fail {"section":"forward","row":"...","check":"gpu oracle","case":"DIR","replay":"..."}
// (one line, the JSON object as nlohmann::json dumps it; "case" is "" when no case folder was
// written: the backward and IKBO rows write none, their replay command reruns the row).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tbe/judge/backward_rows.h"
#include "tbe/judge/ikbo_rows.h"
#include "tbe/judge/large_table.h"
#include "tbe/judge/report.h"
#include "tbe/judge/runner.h"

namespace tbe::judge {

/// One failing row.
struct FailLine {
  std::string section;   ///< "forward", "backward" or "ikbo"
  std::string row;       ///< the row's label
  std::string check;     ///< the first failed check: "<target> <check name>"
  std::string case_dir;  ///< the case folder the row wrote ("" if none)
  std::string replay;    ///< a command that replays the row (the case folder's when written)
};

/// The prefix of every fail line (followed by one space and the JSON object).
inline constexpr std::string_view kFailLinePrefix = "tbe-verify-fail";

/// The line for `f` (no trailing newline).
std::string format_fail_line(const FailLine& f);

/// `line` read back (a trailing '\r' or '\n' ignored); nullopt when it is not a fail line or its
/// JSON object is malformed or lacks a field.
std::optional<FailLine> parse_fail_line(std::string_view line);

/// The fail lines of a finished forward case (one per failed row), of a backward row and of an
/// IKBO row (none when they did not fail). `info` gives the replay command of the case.
std::vector<FailLine> fail_lines(const RunInfo& info, const CaseResult& r);
std::vector<FailLine> fail_lines(const BackwardRowResult& r, const std::string& replay_prefix);
std::vector<FailLine> fail_lines(const IkboConfig& cfg, const IkboRowResult& r);
/// A large-table row (--full; section "forward" or "backward" from its name "large.<section>");
/// the replay runs that section with the large table at a small B.
std::vector<FailLine> fail_lines(const LargeTableRow& r, std::uint64_t seed);

}  // namespace tbe::judge
