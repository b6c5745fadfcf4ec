// What the case-folder commands of the operators share (case_commands.cpp: forward and the
// dispatch; case_backward.cpp; case_ikbo.cpp): text helpers, the case headers and the per-operator
// replays.
#pragma once

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

namespace tbe::judge::detail {

/// "%.9g" of v.
std::string g9(double v);

/// s quoted for a POSIX shell when it holds anything but [A-Za-z0-9_./=,-+:@%].
std::string shell_quote(const std::string& s);

/// The worst element of a report: its coordinates (forward: feature/sample/column or the lookup
/// row; backward: table/row/column; IKBO: the operator's indices), flat index, value, enclosure,
/// position in radii (inside/outside) and FP64 reference.
std::string worst_text(const oracle::CheckReport& r);

/// The report to show as "the worst": the failing report with the largest |position| (NaN the
/// largest), else the non-empty report with the largest |position|; nullopt when none has
/// elements.
std::optional<oracle::CheckReport> worst_report(const std::vector<oracle::CheckReport>& reports);

/// "a; b; c".
std::string join(const std::vector<std::string>& parts);

/// A replay's GPU side when no device ran: named "gpu", not run, with the reason ("no GPU: ...").
/// Side is the operator's replay side type (fields name, skip_reason; ran false by default).
template <class Side>
Side skipped_gpu_side(const std::string& skip_reason) {
  Side s;
  s.name = "gpu";
  s.skip_reason = "no GPU: " + (skip_reason.empty() ? std::string("none found") : skip_reason);
  return s;
}

/// The start of a replay side's block: "  <name>: ", then "SKIPPED (<reason>)" and the line's end
/// when the side did not run (returns false: nothing more to print), else true.
template <class Side>
bool print_side_start(std::ostream& os, const Side& s) {
  os << "  " << s.name << ": ";
  if (s.ran) return true;
  os << "SKIPPED (" << s.skip_reason << ")\n";
  return false;
}

/// The end of a replay side's block: "    passed" or "    FAILED", then one "    - problem"
/// line per problem.
void print_side_verdict(std::ostream& os, bool passed, const std::vector<std::string>& problems);

/// The last lines of every operator's replay: "verdict: cpu passed|FAILED, gpu
/// passed|FAILED|skipped" and, when the case also records another implementation's result
/// (`recorded_by` not null: its name), what it records (its outputs, or the error it raised:
/// `recorded_error` not null, e.g. "invalid_argument") and the command that judges it. Returns
/// kExitOk when the CPU side passed, the GPU side passed or did not run, and the sides agreed;
/// else kExitFailed.
int finish_replay(std::ostream& os, const std::string& dir, bool cpu_ok, bool gpu_ran, bool gpu_ok,
                  bool agree, const std::string* recorded_by, const std::string* recorded_error);

/// finish_replay's recorded_by and recorded_error for a case's optional recorded block (any
/// operator's: a member `implementation` and an optional `error`).
template <class Recorded>
const std::string* recorded_name(const std::optional<Recorded>& r) {
  return r ? &r->implementation : nullptr;
}
template <class Recorded>
const std::string* recorded_error(const std::optional<Recorded>& r) {
  return r && r->error ? &*r->error : nullptr;
}

/// "case:", "provenance:", "seed:" and "problem:" lines of a case (the problem in one line).
void print_case_header(std::ostream& os, const io::CaseFile& c);
void print_case_header(std::ostream& os, const io::BackwardCaseFile& c);
void print_case_header(std::ostream& os, const io::LceCaseFile& c);
void print_case_header(std::ostream& os, const io::AttentionCaseFile& c);
/// The forward problem in one line ("T=2, 2 tables (E 20,20; D 5,5), B=3, ...").
std::string describe(const ForwardCase& c);

/// replay_case of each operator on a case already read (`device` null: GPU side skipped with
/// `skip_reason`); same exit statuses.
int replay_forward(const std::string& dir, io::CaseFile& c, std::ostream& os, Backend* device,
                   const std::string& skip_reason);
int replay_backward(const std::string& dir, io::BackwardCaseFile& c, std::ostream& os,
                    Backend* device, const std::string& skip_reason);
int replay_lce(const std::string& dir, const io::LceCaseFile& c, std::ostream& os,
               ikbo::IkboBackend* device, const std::string& skip_reason);
int replay_attention(const std::string& dir, const io::AttentionCaseFile& c, std::ostream& os,
                     ikbo::IkboBackend* device, const std::string& skip_reason);

}  // namespace tbe::judge::detail
