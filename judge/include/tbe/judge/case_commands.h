// tbe-verify's case-file subcommands (docs/case-files.md):
//   replay CASE_DIR  reruns the case on the reference and on CUDA (if available) and judges both
//                    through the oracle, with warnings and error agreement;
//   check CASE_DIR   judges the outputs recorded in the case (no GPU) and compares the verdict
//                    with the case's `expect` block.
// And the writer the matrix uses to save a failing case.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "tbe/backend.h"
#include "tbe/io/case_file.h"
#include "tbe/oracle/forward_oracle.h"

namespace tbe::judge {

/// Exit statuses shared with the matrix: 0 fine, 1 failed, 3 the case could not be read.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitError = 3;

/// `tbe-verify replay DIR`. `device`: the backend to replay on, found by the caller (nullptr: the
/// GPU side is reported as skipped with `skip_reason`, e.g. why select_backend(Cuda) failed).
/// Returns the exit status: 0 when the CPU side is fine and the GPU side passed or was skipped,
/// 1 otherwise, 3 for an unreadable case.
int replay_case(const std::string& dir, std::ostream& os, Backend* device,
                const std::string& skip_reason = "");

/// `tbe-verify check DIR`: 0 when the verdict on the recorded outputs equals the case's expected
/// verdict (default "pass"), 1 when it differs, 3 for an unreadable case or one without outputs.
int check_case(const std::string& dir, std::ostream& os);

/// The verdict of `check` on a case in memory (the same judgement, without the printing of the
/// expectation): true if the recorded outputs agree with the reference and lie in the oracle's
/// enclosures. `report` receives the oracle's report when an output was judged; `why` the first
/// disagreement.
bool judge_recorded(io::CaseFile& c, std::optional<oracle::CheckReport>* report, std::string* why,
                    std::ostream* os = nullptr);

/// "tbe-verify replay DIR" (DIR shell-quoted when needed).
std::string replay_case_command(const std::string& dir);
std::string check_case_command(const std::string& dir);

}  // namespace tbe::judge
