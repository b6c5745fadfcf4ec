// tbe-verify's case-file subcommands (docs/case-files.md), for every operator (forward,
// backward, ikbo-lce, ikbo-attention; read_any_case dispatches on case.json's `operator`):
//   replay CASE_DIR     reruns the case on the reference and on the GPU backend (if available)
//                       and judges both through the oracle, with warnings and error agreement;
//   check CASE_DIR...   judges the outputs recorded in each case (no GPU) and compares the
//                       verdict with the case's `expect` block.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backend.h"
#include "tbe/ikbo.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/io/case_file.h"
#include "tbe/io/ikbo_case_file.h"
#include "tbe/oracle/forward_oracle.h"

namespace tbe::judge {

/// Exit statuses shared with the matrix: 0 fine, 1 failed, 3 the case could not be read.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitError = 3;

/// The backends `replay` reruns a case on besides the CPU reference, found by the caller (not
/// owned). A null one: the GPU side of the cases it serves is reported as skipped with
/// `skip_reason` (e.g. why select_backend(Cuda) failed).
struct ReplayDevices {
  Backend* tbe = nullptr;             ///< forward and backward cases
  ikbo::IkboBackend* ikbo = nullptr;  ///< ikbo-lce and ikbo-attention cases
  std::string skip_reason;
};

/// `tbe-verify replay DIR` on a case of any operator. Forward: the reference and the device with
/// both bounds-check strategies. Backward: the reference backward and the device's, with the
/// case's strategy (the transpose is never hoisted through tbe::Backend), judged by the backward
/// oracle (updated weights, untouched rows bitwise, momentum, per-sample-weight gradients, SR
/// z-test), canaries past every output, warnings and error agreement. IKBO: the reference and
/// the device IKBO backend, judged by the LCE / attention oracle, with a canary. Returns the exit
/// status: 0 when the CPU side is fine and the GPU side passed or was skipped, 1 otherwise, 3 for
/// an unreadable case.
int replay_case(const std::string& dir, std::ostream& os, const ReplayDevices& devices);
/// replay_case with `device` for forward and backward cases (IKBO cases: GPU side skipped).
int replay_case(const std::string& dir, std::ostream& os, Backend* device,
                const std::string& skip_reason = "");

/// `tbe-verify check DIR` on a case of any operator: 0 when the verdict on the recorded outputs
/// equals the case's expected verdict (default "pass"), 1 when it differs, 3 for an unreadable
/// case, one without outputs or one the oracle cannot judge. With `expect.verdict = "fail"` it
/// prints the rule the case names and the oracle's worst element (coordinates, value, enclosure,
/// position in radii).
int check_case(const std::string& dir, std::ostream& os);
/// `tbe-verify check DIR...`: check_case on each folder in order (a blank line between them),
/// then, for more than one, a count line. Returns 0 when every case met its expectation, else 3
/// if any case could not be read or judged, else 1.
int check_cases(const std::vector<std::string>& dirs, std::ostream& os);

/// The verdict of `check` on a case in memory (the same judgement, without the printing of the
/// expectation): true if the recorded outputs agree with the reference and lie in the oracle's
/// enclosures. `report` receives the oracle's report when an output was judged (backward: the
/// worst of its reports); `why` every disagreement ("; "-separated). `os`: the judgement's lines.
/// Forward: the reference's expectation (FATAL offender, tbe::repair's warning count) and the
/// output against oracle::check_forward.
bool judge_recorded(io::CaseFile& c, std::optional<oracle::CheckReport>* report, std::string* why,
                    std::ostream* os = nullptr);
/// Backward (docs/case-files.md "Backward"): the recorded outputs that are present, each against
/// oracle::judge_backward: `weights` (touched rows inside their enclosures; under SR one of the
/// two roundings of a point of the exact enclosure; untouched rows and the gaps between tables
/// bitwise unchanged), `momentum` (touched inside, untouched bitwise unchanged), the
/// per-sample-weight gradients; under SR with FP16/BF16 weights also the z-test on the rounding
/// directions (oracle::stochastic_rounding_test) when Σ f(1 − f) >= kMinSrVariance. A recorded
/// `error` agrees only as `bounds_check` where the reference raises BoundsCheckError (FATAL with
/// an offender); outputs where it raises disagree; a recorded warning count must equal
/// tbe::repair's.
bool judge_recorded(io::BackwardCaseFile& c, std::optional<oracle::CheckReport>* report,
                    std::string* why, std::ostream* os = nullptr);
/// IKBO LCE / attention: the recorded output against oracle::judge_lce / judge_attention (each
/// element inside its enclosure and a value of policy.storage). A recorded error always
/// disagrees: a case that reads is valid, and the reference computes an output for it.
bool judge_recorded(const io::LceCaseFile& c, std::optional<oracle::CheckReport>* report,
                    std::string* why, std::ostream* os = nullptr);
bool judge_recorded(const io::AttentionCaseFile& c, std::optional<oracle::CheckReport>* report,
                    std::string* why, std::ostream* os = nullptr);

/// The SR z-test runs when the variance of its sum, Σ f(1 − f) over the non-representable
/// elements, is at least this: then no single element moves z by more than 1/5 and the normal
/// approximation behind |z| <= 5 holds (docs/case-files.md "Judging"). Below it the test is
/// reported as not run (too few elements), never as passed.
inline constexpr double kMinSrVariance = 25.0;

/// "tbe-verify replay DIR" (DIR shell-quoted when needed).
std::string replay_case_command(const std::string& dir);
std::string check_case_command(const std::string& dir);

}  // namespace tbe::judge
