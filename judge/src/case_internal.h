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
