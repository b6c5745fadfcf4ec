// tbe-verify check / replay on backward case folders (case_commands.h): the recorded or rerun
// updated weights, momentum and per-sample-weight gradients judged through the backward oracle
// (oracle/include/tbe/oracle/backward_oracle.h), the SR z-test, warnings and error agreement.
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <vector>

#include "case_internal.h"
#include "tbe/backward.h"
#include "tbe/errors.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/forward_judgement.h"
#include "tbe/oracle/backward_oracle.h"

namespace tbe::judge {
namespace {

using detail::g9;
using detail::join;
using detail::print_side_verdict;

bool stochastic_write_back(const BackwardProblem& p) {
  return p.forward.options.policy.write_back == RoundingMode::Stochastic &&
         p.forward.tables.dtype != DType::F32;
}

/// What the reference does with a backward case: the enclosures of every output, or the
/// BoundsCheckError of FATAL; the forward's repair warning count.
struct BackwardExpectation {
  std::optional<oracle::BackwardEnclosures> enc;
  std::optional<BoundsViolation> violation;
  std::int64_t warnings = 0;
  std::string text() const {
    if (violation) return "BoundsCheckError(" + to_string(*violation) + ")";
    return std::to_string(enc->reference.transpose.linear_ids.size()) + " updated rows (" +
           std::to_string(enc->reference.transpose.sorted_positions.size()) +
           " lookups in bags), " + std::to_string(warnings) + " warnings";
  }
};

BackwardExpectation expect_backward(const BackwardProblem& p) {
  BackwardExpectation e;
  try {
    e.enc = oracle::compute_backward_enclosures(p);
    e.warnings = expect_forward(p.forward).warnings;
  } catch (const BoundsCheckError& err) {
    e.violation = err.violation();
  }
  return e;
}

/// The oracle's judgement of the outputs that are present (nullptr: absent, not judged).
struct OutputsJudgement {
  std::vector<oracle::CheckReport> reports;
  std::vector<std::string> problems;
  std::vector<std::string> lines;  ///< "oracle: ..." and the z-test line
};

OutputsJudgement judge_outputs(const BackwardProblem& p, const oracle::BackwardEnclosures& enc,
                               const void* weights, const float* momentum, const float* psw_grad) {
  OutputsJudgement j;
  // An absent output is judged as its input (so judge_backward has every buffer it needs) and
  // its reports are dropped.
  const oracle::BackwardResultView view{weights ? weights : p.forward.tables.weights,
                                        momentum ? momentum : p.momentum, psw_grad};
  const oracle::BackwardCheckReport all = oracle::judge_backward(p, enc, view);
  for (const oracle::CheckReport& r : all.reports) {
    if ((!weights && r.check.rfind("weights", 0) == 0) ||
        (!momentum && r.check.rfind("momentum", 0) == 0))
      continue;
    j.lines.push_back("oracle: " + r.summary());
    if (!r.passed()) {
      const bool untouched = r.check.find(".untouched") != std::string::npos;
      j.problems.push_back(r.check + ": " + std::to_string(r.failures) + " of " +
                           std::to_string(r.elements) +
                           (untouched ? " elements of rows without a lookup changed"
                                      : " elements outside their enclosures"));
    }
    j.reports.push_back(r);
  }
  if (weights && stochastic_write_back(p)) {
    const oracle::StochasticRoundingTest z = oracle::stochastic_rounding_test(p, enc, weights);
    if (z.variance >= kMinSrVariance) {
      j.lines.push_back(z.summary());
      if (!z.passed()) j.problems.push_back("sr: " + z.summary());
    } else {
      j.lines.push_back("stochastic rounding z-test: not run (" + std::to_string(z.samples) +
                        " non-representable elements, sum f(1-f) = " + g9(z.variance) + " < " +
                        g9(kMinSrVariance) + ": too few to judge the rounding directions)");
    }
  }
  return j;
}

std::string optimizer_text(const BackwardCase& c) {
  const OptimizerConfig& o = c.options.optimizer;
  std::ostringstream os;
  os << to_string(o.kind) << " lr " << g9(o.learning_rate);
  if (o.kind == OptimizerKind::ExactRowwiseAdagrad) os << ", eps " << g9(o.eps);
  os << ", weight decay " << to_string(o.weight_decay_mode);
  if (o.weight_decay_mode != WeightDecayMode::None) os << " " << g9(o.weight_decay);
  if (o.max_norm > 0) os << ", max_norm " << g9(o.max_norm);
  if (o.max_gradient > 0) os << ", max_gradient " << g9(o.max_gradient);
  const RoundingMode wb = c.forward.options.policy.write_back;
  os << "; write-back " << (wb == RoundingMode::Stochastic ? "sr" : "rne");
  if (wb == RoundingMode::Stochastic)
    os << " (seed " << c.options.sr_seed << ", offset " << c.options.sr_offset << ")";
  return os.str();
}

// ---- replay ------------------------------------------------------------------------------------

constexpr std::size_t kCanaryBytes = 64;
constexpr std::byte kCanary{0xA5};

/// A host output buffer: its initial bytes, then kCanaryBytes of kCanary no backend may write.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  GuardedBuffer(const void* initial, std::size_t bytes) : size_(bytes), initial_(bytes) {
    if (bytes > 0) std::memcpy(initial_.data(), initial, bytes);
    bytes_ = initial_;
    bytes_.resize(bytes + kCanaryBytes, kCanary);
  }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  bool canary_intact() const {
    for (std::size_t i = size_; i < bytes_.size(); ++i)
      if (bytes_[i] != kCanary) return false;
    return true;
  }
  bool unchanged() const {
    return canary_intact() &&
           (size_ == 0 || std::memcmp(bytes_.data(), initial_.data(), size_) == 0);
  }

 private:
  std::size_t size_ = 0;
  std::vector<std::byte> initial_;
  std::vector<std::byte> bytes_;
};

enum class Kind { Ok, Bounds, Invalid, Other };

/// What one backward call did.
struct Side {
  std::string name;
  bool ran = false;
  std::string skip_reason;
  Kind kind = Kind::Ok;
  std::string what;           ///< the error's what()
  BoundsViolation violation;  ///< Kind::Bounds
  BackwardStats stats;
  std::vector<std::string> lines;     ///< the oracle's reports and the z-test
  std::vector<std::string> problems;  ///< why this side failed
  bool passed() const { return ran && problems.empty(); }
};

std::string outcome_text(const Side& s) {
  switch (s.kind) {
    case Kind::Ok:
      return "updated, " + std::to_string(s.stats.warnings) + " warnings";
    case Kind::Bounds:
      return "BoundsCheckError(" + to_string(s.violation) + ")";
    case Kind::Invalid:
      return "InvalidArgument: " + s.what;
    default:
      return "error: " + s.what;
  }
}

Side run_side(const std::string& name, Backend& b, const BackwardProblem& p,
              const BackwardStrategy& strategy, const BackwardExpectation& ex) {
  Side s;
  s.name = name;
  s.ran = true;
  const TableBatchView& tb = p.forward.tables;
  const bool adagrad = p.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad;
  const bool weighted = p.forward.lookups.weighted();
  GuardedBuffer weights(tb.weights,
                        static_cast<std::size_t>(total_weight_elements(tb)) * dtype_size(tb.dtype));
  GuardedBuffer momentum;
  if (adagrad)
    momentum = GuardedBuffer(p.momentum, static_cast<std::size_t>(total_rows(tb)) * sizeof(float));
  GuardedBuffer psw;
  if (weighted) {  // poisoned: every position must be written (0 outside every bag)
    const std::vector<float> nan(static_cast<std::size_t>(p.forward.lookups.num_indices),
                                 std::numeric_limits<float>::quiet_NaN());
    psw = GuardedBuffer(nan.data(), nan.size() * sizeof(float));
  }
  BackwardOutputs out;
  out.weights = weights.data();
  out.momentum = adagrad ? static_cast<float*>(momentum.data()) : nullptr;
  out.per_sample_weight_grad = weighted ? static_cast<float*>(psw.data()) : nullptr;
  try {
    s.stats = b.backward(p, out, strategy);
  } catch (const BoundsCheckError& e) {
    s.kind = Kind::Bounds;
    s.violation = e.violation();
    s.what = e.what();
  } catch (const InvalidArgument& e) {
    s.kind = Kind::Invalid;
    s.what = e.what();
  } catch (const std::exception& e) {
    s.kind = Kind::Other;
    s.what = e.what();
  }
  if (!weights.canary_intact() || !momentum.canary_intact() || !psw.canary_intact())
    s.problems.push_back("wrote past the end of an output (canary)");
  if (ex.violation) {
    if (s.kind != Kind::Bounds || !(s.violation == *ex.violation))
      s.problems.push_back("expected BoundsCheckError(" + to_string(*ex.violation) + "), got " +
                           outcome_text(s));
    else if (!weights.unchanged() || !momentum.unchanged() || !psw.unchanged())
      s.problems.push_back("outputs written despite the error");
    return s;
  }
  if (s.kind != Kind::Ok) {
    s.problems.push_back("expected the update, got " + outcome_text(s));
    return s;
  }
  if (s.stats.warnings != ex.warnings)
    s.problems.push_back("warnings " + std::to_string(s.stats.warnings) +
                         " != " + std::to_string(ex.warnings) + " (tbe::repair)");
  OutputsJudgement j = judge_outputs(p, *ex.enc, weights.data(),
                                     adagrad ? static_cast<const float*>(momentum.data()) : nullptr,
                                     weighted ? static_cast<const float*>(psw.data()) : nullptr);
  s.lines = std::move(j.lines);
  for (std::string& pr : j.problems) s.problems.push_back(std::move(pr));
  return s;
}

void print_side(std::ostream& os, const Side& s) {
  if (!detail::print_side_start(os, s)) return;
  os << outcome_text(s);
  if (!s.stats.paths.empty()) {
    os << "; paths";
    for (const auto& p : s.stats.paths) os << " " << p;
  }
  os << "\n";
  for (const std::string& l : s.lines) os << "    " << l << "\n";
  print_side_verdict(os, s.passed(), s.problems);
}

}  // namespace

namespace detail {

void print_case_header(std::ostream& os, const io::BackwardCaseFile& c) {
  os << "case: " << (c.name.empty() ? "(unnamed)" : c.name) << " (backward)\n";
  if (!c.provenance.empty()) os << "provenance: " << c.provenance << "\n";
  os << "seed: " << c.seed << "\n";
  os << "problem: " << describe(c.problem.forward) << "\n";
  os << "optimizer: " << optimizer_text(c.problem) << "\n";
}

int replay_backward(const std::string& dir, io::BackwardCaseFile& c, std::ostream& os,
                    Backend* device, const std::string& skip_reason) {
  os << replay_case_command(dir) << "\n";
  print_case_header(os, c);
  const BackwardProblem p = c.problem.view();
  const BackwardExpectation ex = expect_backward(p);
  os << "reference expects: " << ex.text() << "\n";
  const BackwardStrategy strategy = c.strategy ? c.strategy->strategy : BackwardStrategy{};
  if (c.strategy && c.strategy->hoisted)
    os << "(the case was run with the transpose hoisted into a TransposeOp; tbe::Backend runs it "
          "in the backward call: the strategy is semantics-neutral)\n";

  std::vector<Side> sides;
  auto cpu = make_reference_backend();
  sides.push_back(run_side("cpu (" + cpu->name() + ")", *cpu, p, strategy, ex));
  if (device) {
    sides.push_back(run_side("gpu (" + device->name() + ")", *device, p, strategy, ex));
  } else {
    sides.push_back(skipped_gpu_side<Side>(skip_reason));
  }
  os << "results:\n";
  for (const Side& s : sides) print_side(os, s);

  const Side& ref = sides.front();
  const Side& gpu = sides.back();
  const bool gpu_ran = sides.size() > 1 && gpu.ran;
  const bool agree =
      !gpu_ran ||
      (gpu.kind == ref.kind && (ref.kind != Kind::Bounds || gpu.violation == ref.violation) &&
       (ref.kind != Kind::Ok || gpu.stats.warnings == ref.stats.warnings));
  auto warnings_text = [](const Side& s) {
    return s.ran && s.kind == Kind::Ok ? std::to_string(s.stats.warnings) : "-";
  };
  os << "warnings: cpu " << warnings_text(ref) << ", " << gpu.name << " " << warnings_text(gpu)
     << " (expected "
     << (ex.violation ? std::string("none: FATAL raises") : std::to_string(ex.warnings)) << ")\n";
  os << "errors: "
     << (agree ? "agree (every side that ran: " +
                     (ref.kind == Kind::Ok ? std::string("the update") : outcome_text(ref)) + ")"
               : "DISAGREE\n  - " + gpu.name + ": " + outcome_text(gpu) +
                     " vs cpu: " + outcome_text(ref))
     << "\n";
  return detail::finish_replay(os, dir, ref.passed(), gpu_ran, gpu.passed(), agree,
                               detail::recorded_name(c.recorded),
                               detail::recorded_error(c.recorded));
}

}  // namespace detail

bool judge_recorded(io::BackwardCaseFile& c, std::optional<oracle::CheckReport>* report,
                    std::string* why, std::ostream* os) {
  const io::BackwardRecordedOutputs& r = *c.recorded;
  const BackwardProblem p = c.problem.view();
  const BackwardExpectation ex = expect_backward(p);
  std::vector<std::string> problems;
  if (os) *os << "reference: " << ex.text() << "\n";
  if (r.error) {
    if (os) *os << "recorded: error '" << *r.error << "'\n";
    if (!ex.violation)
      problems.push_back("errors: the implementation raised '" + *r.error +
                         "', the reference computes the update");
    else if (*r.error != "bounds_check")
      problems.push_back("errors: the implementation raised '" + *r.error +
                         "', the reference a BoundsCheckError(" + to_string(*ex.violation) + ")");
  } else {
    if (os) {
      std::vector<std::string> what;
      if (r.weights)
        what.push_back("weights (" +
                       std::to_string(r.weights->size() / dtype_size(p.forward.tables.dtype)) +
                       " " + to_string(p.forward.tables.dtype) + " elements)");
      if (r.momentum) what.push_back("momentum (" + std::to_string(r.momentum->size()) + " fp32)");
      if (r.per_sample_weight_grad)
        what.push_back("per-sample-weight gradients (" +
                       std::to_string(r.per_sample_weight_grad->size()) + " fp32)");
      if (r.warnings) what.push_back(std::to_string(*r.warnings) + " warnings");
      *os << "recorded: " << join(what) << "\n";
    }
    if (ex.violation) {
      problems.push_back("errors: the reference raises BoundsCheckError(" +
                         to_string(*ex.violation) + "), the implementation returned outputs");
    } else {
      OutputsJudgement j =
          judge_outputs(p, *ex.enc, r.weights ? r.weights->data() : nullptr,
                        r.momentum ? r.momentum->data() : nullptr,
                        r.per_sample_weight_grad ? r.per_sample_weight_grad->data() : nullptr);
      if (os)
        for (const std::string& l : j.lines) *os << l << "\n";
      problems.insert(problems.end(), j.problems.begin(), j.problems.end());
      if (report) *report = detail::worst_report(j.reports);
      if (r.warnings && *r.warnings != ex.warnings)
        problems.push_back("warnings: recorded " + std::to_string(*r.warnings) +
                           " != " + std::to_string(ex.warnings) + " (tbe::repair)");
      else if (os && r.warnings)
        *os << "warnings: recorded " << *r.warnings << " == reference " << ex.warnings << "\n";
    }
  }
  if (why) *why = join(problems);
  if (os)
    for (const auto& s : problems) *os << "disagreement: " << s << "\n";
  return problems.empty();
}

}  // namespace tbe::judge
