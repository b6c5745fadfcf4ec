// tbe-verify replay / check on case folders: the dispatch on the operator, the check driver and
// the forward case (backward: case_backward.cpp, IKBO: case_ikbo.cpp).
#include "tbe/judge/case_commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <variant>
#include <vector>

#include "case_internal.h"
#include "tbe/bounds_check.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/io/any_case_file.h"
#include "tbe/judge/forward_call.h"
#include "tbe/judge/forward_judgement.h"
#include "tbe/judge/poisoned_output.h"

namespace tbe::judge {
namespace detail {

std::string g9(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string describe(const ForwardCase& c) {
  std::ostringstream os;
  const std::int64_t T = c.num_features();
  os << "T=" << T << ", " << c.rows.size() << " tables (E";
  for (std::size_t t = 0; t < c.rows.size() && t < 8; ++t) os << (t ? "," : " ") << c.rows[t];
  if (c.rows.size() > 8) os << ",...";
  os << "; D";
  for (std::size_t t = 0; t < c.dims.size() && t < 8; ++t) os << (t ? "," : " ") << c.dims[t];
  if (c.dims.size() > 8) os << ",...";
  os << "), ";
  if (c.vbe_batch_sizes.empty())
    os << "B=" << c.batch_size;
  else
    os << "VBE R=" << c.vbe_ranks;
  os << ", bags=" << static_cast<std::int64_t>(c.offsets.size()) - 1 << ", N=" << c.indices.size()
     << ", pooling=" << to_string(c.options.pooling)
     << ", bounds=" << to_string(c.options.bounds_check) << ", index=" << to_string(c.index_dtype)
     << ", weighted=" << (c.per_sample_weights.empty() ? 0 : 1) << ", policy "
     << to_string(c.options.policy);
  return os.str();
}

std::string worst_text(const oracle::CheckReport& r) {
  const oracle::ElementVerdict& w = r.worst;
  const oracle::ElementCoord& c = w.where;
  std::ostringstream os;
  if (c.space == oracle::ElementCoord::Space::IkboLce) {
    os << "candidate " << c.sample << ", m " << c.row << ", n " << c.column;
  } else if (c.space == oracle::ElementCoord::Space::IkboAttention) {
    os << "query row " << c.row << ", candidate " << c.sample << ", head " << c.head << ", d "
       << c.column;
  } else if (c.table_row) {  // backward: a weight (column >= 0) or momentum of (table, row)
    os << "table " << c.feature << ", row " << c.row;
  } else if (c.lookup_row) {
    os << "lookup row " << c.row;
  } else {
    os << "feature " << c.feature << ", sample " << c.sample;
  }
  if (c.space == oracle::ElementCoord::Space::Tbe) {
    if (c.rank >= 0) os << ", rank " << c.rank;
    if (c.column >= 0) os << ", column " << c.column;
  }
  os << " (flat " << c.flat << "): value " << g9(w.value) << ", enclosure [" << g9(w.enclosure.lo)
     << ", " << g9(w.enclosure.hi) << "], position " << g9(w.position) << " radius"
     << (w.inside ? " (inside)" : " (outside)") << ", FP64 reference " << g9(w.reference);
  return os.str();
}

std::optional<oracle::CheckReport> worst_report(const std::vector<oracle::CheckReport>& reports) {
  const oracle::CheckReport* worst = nullptr;
  auto key = [](const oracle::CheckReport& r) {
    const double a = std::abs(r.worst.position);
    return std::isnan(a) ? HUGE_VAL : a;
  };
  for (const oracle::CheckReport& r : reports) {
    if (r.elements == 0) continue;
    if (!worst || (!r.passed() && worst->passed()) ||
        (r.passed() == worst->passed() && key(r) > key(*worst)))
      worst = &r;
  }
  if (!worst) return std::nullopt;
  return *worst;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

void print_side_verdict(std::ostream& os, bool passed, const std::vector<std::string>& problems) {
  os << "    " << (passed ? "passed" : "FAILED");
  for (const auto& p : problems) os << "\n    - " << p;
  os << "\n";
}

int finish_replay(std::ostream& os, const std::string& dir, bool cpu_ok, bool gpu_ran, bool gpu_ok,
                  bool agree, const std::string* recorded_by, const std::string* recorded_error) {
  gpu_ok = !gpu_ran || gpu_ok;
  os << "verdict: cpu " << (cpu_ok ? "passed" : "FAILED") << ", gpu "
     << (!gpu_ran ? "skipped" : gpu_ok ? "passed" : "FAILED") << "\n";
  if (recorded_by != nullptr)
    os << "(the case also records "
       << (recorded_error != nullptr ? "the " + *recorded_error + " error" : std::string("outputs"))
       << " of " << *recorded_by << ": " << check_case_command(dir) << ")\n";
  return cpu_ok && gpu_ok && agree ? kExitOk : kExitFailed;
}

std::string shell_quote(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string("_./=,-+:@%").find(c) != std::string::npos))
      plain = false;
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void print_case_header(std::ostream& os, const io::CaseFile& c) {
  os << "case: " << (c.name.empty() ? "(unnamed)" : c.name) << "\n";
  if (!c.provenance.empty()) os << "provenance: " << c.provenance << "\n";
  os << "seed: " << c.seed << "\n";
  os << "problem: " << describe(c.problem) << "\n";
}

namespace {

constexpr std::size_t kCanaryBytes = 256;

/// The outcome classes replay compares across sides (every error but a bounds or argument error
/// is one class).
enum class Kind { Ok, Bounds, Invalid, Other };
Kind kind_of(const ForwardCall& c) {
  switch (c.outcome) {
    case ForwardCall::Outcome::Output:
      return Kind::Ok;
    case ForwardCall::Outcome::BoundsError:
      return Kind::Bounds;
    case ForwardCall::Outcome::InvalidArgument:
      return Kind::Invalid;
    default:
      return Kind::Other;
  }
}

/// What one forward call did.
struct Side {
  std::string name;
  bool ran = false;
  std::string skip_reason;
  ForwardCall call;
  bool canary_intact = true;
  bool untouched = true;
  std::optional<oracle::CheckReport> report;
  std::vector<std::string> problems;  // why this side failed
  bool passed() const { return ran && problems.empty(); }
  Kind kind() const { return kind_of(call); }
};

std::string outcome_text(const Side& s) {
  switch (s.kind()) {
    case Kind::Ok:
      return "output, " + std::to_string(s.call.stats.warnings) + " warnings";
    case Kind::Bounds:
      return s.call.error_text();
    case Kind::Invalid:
      return "InvalidArgument: " + s.call.what;
    default:
      return "error: " + s.call.what;
  }
}

Side run_side(const std::string& name, Backend& b, const ForwardProblem& p,
              const ForwardStrategy& strategy, const ForwardExpectation& ex) {
  Side s;
  s.name = name;
  s.ran = true;
  const OutputLayout layout = make_output_layout(p);
  const DType out_t = p.options.policy.output;
  PoisonedOutput out(out_t, layout.numel,
                     static_cast<std::int64_t>(kCanaryBytes / dtype_size(out_t)));
  s.call = call_forward(b, p, strategy, out.data());
  s.canary_intact = out.canary_intact();
  s.untouched = out.untouched();
  if (!s.canary_intact) s.problems.push_back("wrote past the end of the output (canary)");
  if (ex.violation) {
    if (s.kind() != Kind::Bounds || !(s.call.violation == *ex.violation))
      s.problems.push_back("expected BoundsCheckError(" + to_string(*ex.violation) + "), got " +
                           outcome_text(s));
    else if (!s.untouched)
      s.problems.push_back("output written despite the error");
    return s;
  }
  if (s.kind() != Kind::Ok) {
    s.problems.push_back("expected an output, got " + outcome_text(s));
    return s;
  }
  if (s.call.stats.warnings != ex.warnings)
    s.problems.push_back("warnings " + std::to_string(s.call.stats.warnings) + " != " +
                         std::to_string(ex.warnings) + " (tbe::repair)");
  s.report = oracle::check_forward(p, out.data());
  if (!s.report->passed()) s.problems.push_back("oracle: " + s.report->summary());
  return s;
}

void print_side(std::ostream& os, const Side& s) {
  if (!print_side_start(os, s)) return;
  os << outcome_text(s);
  if (!s.call.stats.paths.empty()) {
    os << "; paths";
    for (const auto& p : s.call.stats.paths) os << " " << p;
  }
  os << "\n";
  if (s.report) os << "    oracle: " << s.report->summary() << "\n";
  print_side_verdict(os, s.passed(), s.problems);
}

}  // namespace

int replay_forward(const std::string& dir, io::CaseFile& c, std::ostream& os, Backend* device,
                   const std::string& skip_reason) {
  os << replay_case_command(dir) << "\n";
  print_case_header(os, c);
  const ForwardProblem p = c.problem.view();
  const ForwardExpectation ex = expect_forward(p);
  os << "reference expects: "
     << (ex.violation ? "BoundsCheckError(" + to_string(*ex.violation) + ")"
                      : "an output with " + std::to_string(ex.warnings) + " warnings")
     << "\n";

  std::vector<Side> sides;
  auto cpu = make_reference_backend();
  sides.push_back(run_side("cpu (" + cpu->name() + ")", *cpu, p, {}, ex));

  if (device) {
    for (bool fused : {true, false}) {
      ForwardStrategy st;
      st.fused_bounds_check = fused;
      sides.push_back(run_side("gpu (" + device->name() + ", " +
                                   (fused ? "fused" : "separate") + " bounds check)",
                               *device, p, st, ex));
    }
  } else {
    sides.push_back(skipped_gpu_side<Side>(skip_reason));
  }
  os << "results:\n";
  for (const Side& s : sides) print_side(os, s);

  // Agreement between the sides that ran: same kind of outcome, same offender, same warnings.
  bool agree = true;
  std::string agreement;
  const Side& ref = sides.front();
  for (std::size_t i = 1; i < sides.size(); ++i) {
    const Side& s = sides[i];
    if (!s.ran) continue;
    const bool same = s.kind() == ref.kind() &&
                      (s.kind() != Kind::Bounds || s.call.violation == ref.call.violation) &&
                      (s.kind() != Kind::Ok || s.call.stats.warnings == ref.call.stats.warnings);
    agree = agree && same;
    if (!same) agreement += "\n  - " + s.name + ": " + outcome_text(s) + " vs cpu: " + outcome_text(ref);
  }
  auto warnings_text = [](const Side& s) {
    return s.ran && s.kind() == Kind::Ok ? std::to_string(s.call.stats.warnings) : "-";
  };
  os << "warnings: cpu " << warnings_text(ref);
  for (std::size_t i = 1; i < sides.size(); ++i)
    os << ", " << sides[i].name << " " << warnings_text(sides[i]);
  os << " (expected " << (ex.violation ? std::string("none: FATAL raises") : std::to_string(ex.warnings)) << ")\n";
  const std::string ref_kind = ref.kind() == Kind::Ok ? std::string("an output") : outcome_text(ref);
  os << "errors: " << (agree ? "agree (every side that ran: " + ref_kind + ")" : "DISAGREE" + agreement) << "\n";

  const bool cpu_ok = ref.passed();
  bool gpu_ok = true, gpu_ran = false;
  for (std::size_t i = 1; i < sides.size(); ++i) {
    gpu_ran = gpu_ran || sides[i].ran;
    if (sides[i].ran && !sides[i].passed()) gpu_ok = false;
  }
  return finish_replay(os, dir, cpu_ok, gpu_ran, gpu_ok, agree, recorded_name(c.recorded),
                       recorded_error(c.recorded));
}

}  // namespace detail

using detail::join;
using detail::print_case_header;
using detail::shell_quote;
using detail::worst_text;

namespace {

/// "oracle worst element[ (report)]: ..." (forward reports are not named: one output).
std::string worst_line(const oracle::CheckReport& r) {
  return "oracle worst element" + (r.check == "forward" ? std::string() : " (" + r.check + ")") +
         ": " + worst_text(r);
}

/// `check` on a case already read.
template <class Case>
int check_read_case(const std::string& dir, Case& c, std::ostream& os) {
  os << check_case_command(dir) << "\n";
  print_case_header(os, c);
  if (!c.recorded) {
    os << "tbe-verify check: the case records no outputs (no \"recorded\" block); use "
       << replay_case_command(dir) << "\n";
    return kExitError;
  }
  os << "implementation: " << (c.recorded->implementation.empty() ? "(unnamed)" : c.recorded->implementation) << "\n";
  std::optional<oracle::CheckReport> report;
  std::string why;
  bool pass = false;
  try {
    pass = judge_recorded(c, &report, &why, &os);
  } catch (const std::exception& e) {
    os << "tbe-verify check: cannot judge the case: " << e.what() << "\n";
    return kExitError;
  }
  const io::Expectation expect = c.expect.value_or(io::Expectation{});
  const std::string verdict = pass ? "pass" : "fail";
  os << "verdict: " << verdict << "; expected: " << expect.verdict
     << (c.expect ? "" : " (default)") << "\n";
  if (expect.verdict == "fail") {
    os << "rule the case names: " << expect.rule << "\n";
    if (report) os << worst_line(*report) << "\n";
  }
  if (verdict == expect.verdict) {
    os << "OK: the verdict is the expected one\n";
    return kExitOk;
  }
  os << "MISMATCH: expected " << expect.verdict << ", got " << verdict
     << (why.empty() ? "" : " (" + why + ")") << "\n";
  if (report && expect.verdict == "pass") os << worst_line(*report) << "\n";
  return kExitFailed;
}

}  // namespace

std::string replay_case_command(const std::string& dir) { return "tbe-verify replay " + shell_quote(dir); }
std::string check_case_command(const std::string& dir) { return "tbe-verify check " + shell_quote(dir); }

int replay_case(const std::string& dir, std::ostream& os, const ReplayDevices& devices) {
  io::AnyCaseFile c;
  try {
    c = io::read_any_case(dir);
  } catch (const Error& e) {
    os << "tbe-verify replay: cannot read the case: " << e.what() << "\n";
    return kExitError;
  }
  try {
    switch (io::case_operator(c)) {
      case io::CaseOperator::Forward:
        return detail::replay_forward(dir, std::get<io::CaseFile>(c), os, devices.tbe,
                                      devices.skip_reason);
      case io::CaseOperator::Backward:
        return detail::replay_backward(dir, std::get<io::BackwardCaseFile>(c), os, devices.tbe,
                                       devices.skip_reason);
      case io::CaseOperator::IkboLce:
        return detail::replay_lce(dir, std::get<io::LceCaseFile>(c), os, devices.ikbo,
                                  devices.skip_reason);
      case io::CaseOperator::IkboAttention:
        return detail::replay_attention(dir, std::get<io::AttentionCaseFile>(c), os, devices.ikbo,
                                        devices.skip_reason);
    }
  } catch (const std::exception& e) {
    os << "tbe-verify replay: cannot judge the case: " << e.what() << "\n";
  }
  return kExitError;
}

int replay_case(const std::string& dir, std::ostream& os, Backend* device,
                const std::string& skip_reason) {
  return replay_case(dir, os, ReplayDevices{device, nullptr, skip_reason});
}

bool judge_recorded(io::CaseFile& c, std::optional<oracle::CheckReport>* report, std::string* why,
                    std::ostream* os) {
  const io::RecordedOutputs& r = *c.recorded;
  const ForwardProblem p = c.problem.view();
  const ForwardExpectation ex = expect_forward(p);
  std::vector<std::string> problems;
  if (os)
    *os << "reference: "
        << (ex.violation ? "BoundsCheckError(" + to_string(*ex.violation) + ")"
                         : "an output with " + std::to_string(ex.warnings) + " warnings")
        << "\n";
  if (r.error) {
    if (os) *os << "recorded: error '" << *r.error << "'\n";
    if (!ex.violation)
      problems.push_back("errors: the implementation raised '" + *r.error +
                         "', the reference computes an output");
    else if (*r.error != "bounds_check")
      problems.push_back("errors: the implementation raised '" + *r.error +
                         "', the reference a BoundsCheckError");
  } else {
    const std::int64_t numel = static_cast<std::int64_t>(r.output.size() / dtype_size(r.output_dtype));
    if (os) {
      *os << "recorded: output of " << numel << " " << to_string(r.output_dtype) << " elements";
      if (r.warnings) *os << ", " << *r.warnings << " warnings";
      *os << "\n";
    }
    if (ex.violation) {
      problems.push_back("errors: the reference raises BoundsCheckError(" +
                         to_string(*ex.violation) + "), the implementation returned an output");
    } else {
      oracle::CheckReport rep = oracle::check_forward(p, r.output.data());
      if (os) *os << "oracle: " << rep.summary() << "\n";
      if (!rep.passed()) problems.push_back("oracle: " + std::to_string(rep.failures) + " of " + std::to_string(rep.elements) + " elements outside their enclosures");
      if (report) *report = std::move(rep);
      if (r.warnings && *r.warnings != ex.warnings)
        problems.push_back("warnings: recorded " + std::to_string(*r.warnings) + " != " +
                           std::to_string(ex.warnings) + " (tbe::repair)");
      else if (os && r.warnings)
        *os << "warnings: recorded " << *r.warnings << " == reference " << ex.warnings << "\n";
    }
  }
  if (why) *why = join(problems);
  if (os)
    for (const auto& s : problems) *os << "disagreement: " << s << "\n";
  return problems.empty();
}

int check_case(const std::string& dir, std::ostream& os) {
  io::AnyCaseFile c;
  try {
    c = io::read_any_case(dir);
  } catch (const Error& e) {
    os << "tbe-verify check: cannot read the case: " << e.what() << "\n";
    return kExitError;
  }
  return std::visit([&](auto& one) { return check_read_case(dir, one, os); }, c);
}

int check_cases(const std::vector<std::string>& dirs, std::ostream& os) {
  std::int64_t as_expected = 0, mismatched = 0, unreadable = 0;
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    if (i > 0) os << "\n";
    const int rc = check_case(dirs[i], os);
    (rc == kExitOk ? as_expected : rc == kExitFailed ? mismatched : unreadable) += 1;
  }
  if (dirs.size() > 1)
    os << "\ncheck: " << dirs.size() << " cases, " << as_expected << " as expected, " << mismatched
       << " mismatched, " << unreadable << " unreadable\n";
  return unreadable > 0 ? kExitError : mismatched > 0 ? kExitFailed : kExitOk;
}

}  // namespace tbe::judge
