// tbe-verify check / replay on IKBO case folders (case_commands.h): the LCE / attention output,
// recorded or rerun, judged through the IKBO oracle (oracle/include/tbe/oracle/ikbo_oracle.h).
#include <ostream>
#include <span>
#include <sstream>
#include <vector>

#include "case_internal.h"
#include "tbe/errors.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/poisoned_output.h"
#include "tbe/oracle/ikbo_oracle.h"

namespace tbe::judge {
namespace {

using detail::g9;
using detail::join;

constexpr std::size_t kCanaryBytes = 64;

/// One IKBO operator: its problem, output size, enclosures, judgement and backend call.
struct Lce {
  using Problem = ikbo::LceProblem;
  static constexpr const char* kName = "ikbo-lce";
  static std::int64_t numel(const Problem& p) { return ikbo::lce_output_numel(p); }
  static oracle::IkboEnclosures enclosures(const Problem& p) {
    return oracle::compute_lce_enclosures(p);
  }
  static oracle::CheckReport judge(const Problem& p, const oracle::IkboEnclosures& e,
                                   std::span<const double> v) {
    return oracle::judge_lce(p, e, v);
  }
  static void call(ikbo::IkboBackend& b, const Problem& p, void* out) { b.lce(p, out); }
};
struct Attention {
  using Problem = ikbo::AttentionProblem;
  static constexpr const char* kName = "ikbo-attention";
  static std::int64_t numel(const Problem& p) { return ikbo::attention_output_numel(p); }
  static oracle::IkboEnclosures enclosures(const Problem& p) {
    return oracle::compute_attention_enclosures(p);
  }
  static oracle::CheckReport judge(const Problem& p, const oracle::IkboEnclosures& e,
                                   std::span<const double> v) {
    return oracle::judge_attention(p, e, v);
  }
  static void call(ikbo::IkboBackend& b, const Problem& p, void* out) { b.attention(p, out); }
};

std::vector<double> as_doubles(DType t, const void* data, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = load_as_double(t, data, i);
  return v;
}

template <class Op, class CaseFile>
bool judge_ikbo(const CaseFile& c, std::optional<oracle::CheckReport>* report, std::string* why,
                std::ostream* os) {
  const io::IkboRecordedOutput& r = *c.recorded;
  const typename Op::Problem p = c.problem.view();
  const DType st = p.policy.storage;
  const std::int64_t n = Op::numel(p);
  std::vector<std::string> problems;
  if (os) *os << "reference: an output of " << n << " " << to_string(st) << " elements\n";
  if (r.error) {
    if (os) *os << "recorded: error '" << *r.error << "'\n";
    problems.push_back("errors: the implementation raised '" + *r.error +
                       "', the reference computes an output (the case is valid)");
  } else {
    if (os) *os << "recorded: output of " << n << " " << to_string(st) << " elements\n";
    oracle::CheckReport rep = Op::judge(p, Op::enclosures(p), as_doubles(st, r.output->data(), n));
    if (os) *os << "oracle: " << rep.summary() << "\n";
    if (!rep.passed())
      problems.push_back("oracle: " + std::to_string(rep.failures) + " of " +
                         std::to_string(rep.elements) + " elements outside their enclosures");
    if (report) *report = std::move(rep);
  }
  if (why) *why = join(problems);
  if (os)
    for (const auto& s : problems) *os << "disagreement: " << s << "\n";
  return problems.empty();
}

/// What one IKBO call did.
struct Side {
  std::string name;
  bool ran = false;
  std::string skip_reason;
  std::string error;  ///< "" for an output, else the error's type and what()
  std::optional<oracle::CheckReport> report;
  std::vector<std::string> problems;
  bool passed() const { return ran && problems.empty(); }
};

template <class Op>
Side run_side(const std::string& name, ikbo::IkboBackend& b, const typename Op::Problem& p,
              const oracle::IkboEnclosures& enc) {
  Side s;
  s.name = name;
  s.ran = true;
  const DType st = p.policy.storage;
  const std::int64_t n = Op::numel(p);
  PoisonedOutput out(st, n, static_cast<std::int64_t>(kCanaryBytes / dtype_size(st)));
  try {
    Op::call(b, p, out.data());
  } catch (const InvalidArgument& e) {
    s.error = std::string("InvalidArgument: ") + e.what();
  } catch (const std::exception& e) {
    s.error = std::string("error: ") + e.what();
  }
  if (!out.canary_intact()) s.problems.push_back("wrote past the end of the output (canary)");
  if (!s.error.empty()) {
    s.problems.push_back("expected an output, got " + s.error);
    return s;
  }
  s.report = Op::judge(p, enc, as_doubles(st, out.data(), n));
  if (!s.report->passed()) s.problems.push_back("oracle: " + s.report->summary());
  return s;
}

template <class Op, class CaseFile>
int replay_ikbo(const std::string& dir, const CaseFile& c, std::ostream& os,
                ikbo::IkboBackend* device, const std::string& skip_reason) {
  os << replay_case_command(dir) << "\n";
  detail::print_case_header(os, c);
  const typename Op::Problem p = c.problem.view();
  os << "reference expects: an output of " << Op::numel(p) << " " << to_string(p.policy.storage)
     << " elements\n";
  const oracle::IkboEnclosures enc = Op::enclosures(p);
  std::vector<Side> sides;
  auto cpu = ikbo::make_reference_ikbo_backend();
  sides.push_back(run_side<Op>("cpu (" + cpu->name() + ")", *cpu, p, enc));
  if (device) {
    sides.push_back(run_side<Op>("gpu (" + device->name() + ")", *device, p, enc));
  } else {
    sides.push_back(detail::skipped_gpu_side<Side>(skip_reason));
  }
  os << "results:\n";
  for (const Side& s : sides) {
    if (!detail::print_side_start(os, s)) continue;
    os << (s.error.empty() ? "output" : s.error) << "\n";
    if (s.report) os << "    oracle: " << s.report->summary() << "\n";
    detail::print_side_verdict(os, s.passed(), s.problems);
  }
  const Side& ref = sides.front();
  const Side& gpu = sides.back();
  const bool gpu_ran = gpu.ran && sides.size() > 1;
  return detail::finish_replay(os, dir, ref.passed(), gpu_ran, gpu.passed(), /*agree=*/true,
                               detail::recorded_name(c.recorded),
                               detail::recorded_error(c.recorded));
}

void print_common_header(std::ostream& os, const std::string& name, const std::string& op,
                         const std::string& provenance, std::uint64_t seed) {
  os << "case: " << (name.empty() ? "(unnamed)" : name) << " (" << op << ")\n";
  if (!provenance.empty()) os << "provenance: " << provenance << "\n";
  os << "seed: " << seed << "\n";
}

}  // namespace

namespace detail {

void print_case_header(std::ostream& os, const io::LceCaseFile& c) {
  print_common_header(os, c.name, Lce::kName, c.provenance, c.seed);
  const ikbo::LceShape& s = c.problem.shape;
  os << "problem: B=" << s.B << " U=" << s.U << " M=" << s.M << " N=" << s.N << " K_c=" << s.K_c
     << " K_u=" << s.K_u << ", map " << ikbo::to_string(c.problem.map) << ", policy "
     << ikbo::to_string(c.problem.policy) << "\n";
}

void print_case_header(std::ostream& os, const io::AttentionCaseFile& c) {
  print_common_header(os, c.name, Attention::kName, c.provenance, c.seed);
  const ikbo::AttentionShape& s = c.problem.shape;
  os << "problem: B=" << s.B << " U=" << s.U << " n_seed=" << s.n_seed << " H=" << s.H
     << " Dh=" << s.Dh
     << (s.jagged ? " jagged keys=" + std::to_string(c.problem.k_offsets.back())
                  : " S=" + std::to_string(s.S))
     << ", scale " << (s.scale == 0 ? std::string("1/sqrt(Dh)") : g9(s.scale)) << ", map "
     << ikbo::to_string(c.problem.map) << ", policy " << ikbo::to_string(c.problem.policy) << "\n";
}

int replay_lce(const std::string& dir, const io::LceCaseFile& c, std::ostream& os,
               ikbo::IkboBackend* device, const std::string& skip_reason) {
  return replay_ikbo<Lce>(dir, c, os, device, skip_reason);
}

int replay_attention(const std::string& dir, const io::AttentionCaseFile& c, std::ostream& os,
                     ikbo::IkboBackend* device, const std::string& skip_reason) {
  return replay_ikbo<Attention>(dir, c, os, device, skip_reason);
}

}  // namespace detail

bool judge_recorded(const io::LceCaseFile& c, std::optional<oracle::CheckReport>* report,
                    std::string* why, std::ostream* os) {
  return judge_ikbo<Lce>(c, report, why, os);
}

bool judge_recorded(const io::AttentionCaseFile& c, std::optional<oracle::CheckReport>* report,
                    std::string* why, std::ostream* os) {
  return judge_ikbo<Attention>(c, report, why, os);
}

}  // namespace tbe::judge
