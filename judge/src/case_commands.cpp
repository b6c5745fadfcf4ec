// tbe-verify replay / check on case folders.
#include "tbe/judge/case_commands.h"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <vector>

#include "tbe/bounds_check.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/judge/forward_call.h"
#include "tbe/judge/forward_judgement.h"
#include "tbe/judge/poisoned_output.h"

namespace tbe::judge {
namespace {

constexpr std::size_t kCanaryBytes = 256;

std::string g17(double v) {
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
  std::ostringstream os;
  if (w.where.lookup_row)
    os << "lookup row " << w.where.row;
  else
    os << "feature " << w.where.feature << ", sample " << w.where.sample;
  if (w.where.rank >= 0) os << ", rank " << w.where.rank;
  os << ", column " << w.where.column << " (flat " << w.where.flat << "): value " << g17(w.value)
     << ", enclosure [" << g17(w.enclosure.lo) << ", " << g17(w.enclosure.hi) << "], position "
     << g17(w.position) << " radius" << (w.inside ? " (inside)" : " (outside)")
     << ", FP64 reference " << g17(w.reference);
  return os.str();
}

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
  os << "  " << s.name << ": ";
  if (!s.ran) {
    os << "SKIPPED (" << s.skip_reason << ")\n";
    return;
  }
  os << outcome_text(s);
  if (!s.call.stats.paths.empty()) {
    os << "; paths";
    for (const auto& p : s.call.stats.paths) os << " " << p;
  }
  os << "\n";
  if (s.report) os << "    oracle: " << s.report->summary() << "\n";
  os << "    " << (s.passed() ? "passed" : "FAILED");
  for (const auto& p : s.problems) os << "\n    - " << p;
  os << "\n";
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

}  // namespace

std::string replay_case_command(const std::string& dir) { return "tbe-verify replay " + shell_quote(dir); }
std::string check_case_command(const std::string& dir) { return "tbe-verify check " + shell_quote(dir); }

int replay_case(const std::string& dir, std::ostream& os, Backend* device,
                const std::string& skip_reason) {
  io::CaseFile c;
  try {
    c = io::read_case(dir);
  } catch (const Error& e) {
    os << "tbe-verify replay: cannot read the case: " << e.what() << "\n";
    return kExitError;
  }
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
    Side s;
    s.name = "gpu";
    s.skip_reason = "no GPU: " + (skip_reason.empty() ? std::string("none found") : skip_reason);
    sides.push_back(s);
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
  os << "verdict: cpu " << (cpu_ok ? "passed" : "FAILED") << ", gpu "
     << (!gpu_ran ? "skipped" : gpu_ok ? "passed" : "FAILED") << "\n";
  if (c.recorded) os << "(the case also records outputs of " << c.recorded->implementation << ": " << check_case_command(dir) << ")\n";
  return cpu_ok && gpu_ok && agree ? kExitOk : kExitFailed;
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
  if (why) {
    why->clear();
    for (const auto& s : problems) *why += (why->empty() ? "" : "; ") + s;
  }
  if (os)
    for (const auto& s : problems) *os << "disagreement: " << s << "\n";
  return problems.empty();
}

int check_case(const std::string& dir, std::ostream& os) {
  io::CaseFile c;
  try {
    c = io::read_case(dir);
  } catch (const Error& e) {
    os << "tbe-verify check: cannot read the case: " << e.what() << "\n";
    return kExitError;
  }
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
  const bool pass = judge_recorded(c, &report, &why, &os);
  const io::Expectation expect = c.expect.value_or(io::Expectation{});
  const std::string verdict = pass ? "pass" : "fail";
  os << "verdict: " << verdict << "; expected: " << expect.verdict
     << (c.expect ? "" : " (default)") << "\n";
  if (expect.verdict == "fail") {
    os << "rule the case names: " << expect.rule << "\n";
    if (report) os << "oracle worst element: " << worst_text(*report) << "\n";
  }
  if (verdict == expect.verdict) {
    os << "OK: the verdict is the expected one\n";
    return kExitOk;
  }
  os << "MISMATCH: expected " << expect.verdict << ", got " << verdict
     << (why.empty() ? "" : " (" + why + ")") << "\n";
  if (report && expect.verdict == "pass") os << "oracle worst element: " << worst_text(*report) << "\n";
  return kExitFailed;
}

}  // namespace tbe::judge
