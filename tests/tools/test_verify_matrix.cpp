// tbe-verify's matrix logic on a tiny workload: the covering design, --only filters, the case
// runner (CPU self-checks and device rows, with the CPU reference standing in for the device),
// its sharpness against deliberately faulty backends, and the report/JSON.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/judge/matrix.h"
#include "tbe/judge/report.h"
#include "tbe/judge/runner.h"

using namespace tbe;
using namespace tbe::judge;

namespace {

// T=3 features over 2 tables (feature 2 shares table 0), one D for pooling none, zipf indices.
WorkloadSpec tiny_spec() {
  WorkloadSpec s;
  s.name = "tiny";
  s.T = 3;
  s.E = 50;
  s.D = 8;
  s.L = 5;
  s.B = 12;
  s.table_rows = {50, 37};
  s.table_dims = {8, 8};
  s.feature_table_map = {0, 1, 0};
  s.distribution = IndexDistribution::Zipf;
  s.zipf_alpha = 1.15;
  return s;
}

RunnerConfig tiny_config(Backend* device) {
  RunnerConfig cfg;
  cfg.custom_spec = tiny_spec();
  cfg.seed = 7;
  cfg.device = device;
  cfg.skip_reason = "no GPU (test)";
  return cfg;
}

const RowResult* row_of(const CaseResult& r, Target t) {
  for (const RowResult& row : r.rows)
    if (row.target == t) return &row;
  return nullptr;
}

bool has_check(const RowResult& row, const std::string& prefix) {
  return std::any_of(row.checks.begin(), row.checks.end(),
                     [&](const Check& c) { return c.name.rfind(prefix, 0) == 0; });
}

// A backend that wraps the reference and breaks one thing.
enum class Fault {
  None,
  CorruptOneElement,
  WarningsOffByOne,
  SwallowFatal,
  WritePastEnd,
  WrongRepair
};

class FaultyBackend : public Backend {
 public:
  explicit FaultyBackend(Fault f) : fault_(f), ref_(make_reference_backend()) {}
  std::string name() const override { return "faulty"; }
  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& strategy) override {
    const OutputLayout layout = make_output_layout(p);
    ForwardStats stats;
    if (fault_ == Fault::SwallowFatal && p.options.bounds_check == BoundsCheckMode::Fatal) {
      ForwardProblem q = p;
      q.options.bounds_check = BoundsCheckMode::Warning;
      stats = ref_->forward(q, output, strategy);
      stats.warnings = 0;
    } else {
      stats = ref_->forward(p, output, strategy);
    }
    stats.paths.push_back("faulty.path");
    const DType out_t = p.options.policy.output;
    if (fault_ == Fault::CorruptOneElement && layout.numel > 0) {
      const std::int64_t i = layout.numel / 2;
      store_from_double(out_t, output, i, load_as_double(out_t, output, i) + 0.5);
    }
    if (fault_ == Fault::WarningsOffByOne) stats.warnings += 1;
    if (fault_ == Fault::WritePastEnd) store_from_double(out_t, output, layout.numel, 0.0);
    return stats;
  }
  RepairResult repair(const ForwardProblem& p) override {
    RepairResult r = ref_->repair(p);
    if (fault_ == Fault::WrongRepair && !r.indices.empty()) r.indices.back() += 1;
    return r;
  }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    return ref_->backward(p, out, s);
  }

 private:
  Fault fault_;
  std::unique_ptr<Backend> ref_;
};

}  // namespace

TEST_CASE("pairwise design covers every applicable pair of axis values", "[verify][matrix]") {
  const std::vector<CaseAxes> cases = enumerate_cases(Design::Pairwise);
  const Coverage cov = pair_coverage(cases);
  INFO("missing: " << (cov.missing.empty() ? std::string("none") : cov.missing.front()));
  CHECK(cov.required > 0);
  CHECK(cov.covered == cov.required);
  // 8 precision levels x 4 bounds modes is a lower bound on any pairwise design.
  const auto applicable_count =
      std::count_if(cases.begin(), cases.end(), [](const CaseAxes& c) { return applicable(c); });
  CHECK(applicable_count >= 32);
  CHECK(applicable_count <= 48);
  // Exactly one not-applicable case (weighted=1 x pooling=none), shown as skipped.
  CHECK(cases.size() - static_cast<std::size_t>(applicable_count) == 1);
  // Every value of every axis appears in an applicable case.
  for (const std::string& axis : axis_names())
    for (const std::string& value : axis_values(axis)) {
      INFO(axis << "=" << value);
      CHECK(std::any_of(cases.begin(), cases.end(), [&](const CaseAxes& c) {
        return applicable(c) && axis_value(c, axis) == value;
      }));
    }
  // Deterministic, grouped by weight type (fp32, fp16, bf16), labels unique.
  CHECK(enumerate_cases(Design::Pairwise) == cases);
  std::set<std::string> labels;
  for (const CaseAxes& c : cases) labels.insert(case_label(c));
  CHECK(labels.size() == cases.size());
  const auto first_bf16 = std::find_if(cases.begin(), cases.end(), [](const CaseAxes& c) {
    return c.precision.weights == DType::BF16;
  });
  CHECK(std::all_of(first_bf16, cases.end(),
                    [](const CaseAxes& c) { return c.precision.weights == DType::BF16; }));
}

TEST_CASE("full design is the whole cross product", "[verify][matrix]") {
  const std::vector<CaseAxes> cases = enumerate_cases(Design::Full);
  CHECK(cases.size() == 768);
  CHECK(std::count_if(cases.begin(), cases.end(),
                      [](const CaseAxes& c) { return !applicable(c); }) == 128);
  const Coverage cov = pair_coverage(cases);
  CHECK(cov.covered == cov.required);
}

TEST_CASE("case filters of --only: labels round-trip, errors name axis and value",
          "[verify][matrix]") {
  const std::vector<CaseAxes> full = enumerate_cases(Design::Full);
  const CaseAxes pick = full[301];
  const CaseFilter f = CaseFilter::parse(case_label(pick));
  CHECK(f.pins_one_case());
  CHECK(std::count_if(full.begin(), full.end(), [&](const CaseAxes& c) { return f.matches(c); }) ==
        1);
  CHECK(f.matches(pick));

  const CaseFilter some = CaseFilter::parse("pooling=none,bounds=fatal|warning");
  CHECK_FALSE(some.pins_one_case());
  for (const CaseAxes& c : full)
    CHECK(some.matches(c) ==
          (c.pooling == PoolingMode::None &&
           (c.bounds == BoundsCheckMode::Fatal || c.bounds == BoundsCheckMode::Warning)));

  auto message = [](const std::string& text) {
    try {
      CaseFilter::parse(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("colour=red"), Catch::Contains("unknown axis 'colour'"));
  CHECK_THAT(message("w=fp8"), Catch::Contains("'fp8'") && Catch::Contains("fp32, fp16, bf16"));
  CHECK_THAT(message("pooling"), Catch::Contains("not axis=value"));
  CHECK_THROWS_AS(parse_design("triplewise"), std::invalid_argument);
}

TEST_CASE("no GPU: CPU self-checks pass on every case, device rows are skipped",
          "[verify][runner]") {
  Runner runner(tiny_config(nullptr));
  std::vector<CaseResult> results;
  for (const CaseAxes& c : enumerate_cases(Design::Pairwise)) results.push_back(runner.run(c));

  for (const CaseResult& r : results) {
    INFO(r.label);
    const RowResult* dev = row_of(r, Target::Device);
    REQUIRE(dev != nullptr);
    CHECK(dev->verdict == Verdict::Skipped);  // never passed without a GPU
    if (!r.applicable) {
      CHECK(r.rows.size() == 1);
      continue;
    }
    const RowResult* self = row_of(r, Target::SelfCheck);
    REQUIRE(self != nullptr);
    INFO(self->reason);
    CHECK(self->verdict == Verdict::Passed);
    CHECK(has_check(*self, "oracle.reference"));
    CHECK(has_check(*self, "oracle.emulate["));
    if (r.axes.bounds == BoundsCheckMode::Warning || r.axes.bounds == BoundsCheckMode::Ignore) {
      CHECK(self->warnings_expected > 0);  // the malformed copy really is malformed
      CHECK(self->warnings_got == self->warnings_expected);
      CHECK(has_check(*self, "repair.count"));
      CHECK_FALSE(r.input.malformed.empty());
    }
    if (r.axes.bounds == BoundsCheckMode::Fatal) CHECK(has_check(*self, "fatal.offender"));
    if (r.axes.bounds == BoundsCheckMode::None) CHECK(r.input.malformed.empty());
    if (r.axes.vbe) CHECK(r.input.vbe_ranks >= 2);
  }
  const Totals t = count_rows(results);
  CHECK(t.failed == 0);
  CHECK(t.passed == static_cast<std::int64_t>(results.size()) - 1);
  CHECK(t.skipped == static_cast<std::int64_t>(results.size()));
}

TEST_CASE("device rows pass with a correct backend and report its paths", "[verify][runner]") {
  auto device = make_reference_backend();
  Runner runner(tiny_config(device.get()));
  for (const CaseAxes& c : enumerate_cases(Design::Pairwise)) {
    const CaseResult r = runner.run(c);
    INFO(r.label);
    if (!r.applicable) continue;
    const RowResult* dev = row_of(r, Target::Device);
    REQUIRE(dev != nullptr);
    INFO(dev->reason);
    CHECK(dev->verdict == Verdict::Passed);
    CHECK(row_of(r, Target::SelfCheck) == nullptr);
    CHECK(std::find(dev->paths.begin(), dev->paths.end(), "reference") != dev->paths.end());
    if (c.bounds == BoundsCheckMode::Fatal) CHECK(has_check(*dev, "malformed.error"));
  }
}

TEST_CASE("device rows catch a faulty backend", "[verify][runner]") {
  struct Expect {
    Fault fault;
    BoundsCheckMode bounds;
    const char* failing_check;
  };
  const Expect expects[] = {
      {Fault::CorruptOneElement, BoundsCheckMode::None, "oracle"},
      {Fault::WarningsOffByOne, BoundsCheckMode::Warning, "warnings"},
      {Fault::SwallowFatal, BoundsCheckMode::Fatal, "malformed.error"},
      {Fault::WritePastEnd, BoundsCheckMode::Ignore, "canary"},
      {Fault::WrongRepair, BoundsCheckMode::Warning, "repair"},
  };
  for (const Expect& e : expects) {
    FaultyBackend device(e.fault);
    Runner runner(tiny_config(&device));
    CaseAxes c;
    c.precision = {PolicyKind::FbgemmCuda, DType::F16, DType::F32};
    c.pooling = PoolingMode::Mean;
    c.bounds = e.bounds;
    c.vbe = true;
    const CaseResult r = runner.run(c);
    INFO(r.label << " expecting " << e.failing_check);
    const RowResult* dev = row_of(r, Target::Device);
    REQUIRE(dev != nullptr);
    CHECK(dev->verdict == Verdict::Failed);
    CHECK(r.verdict() == Verdict::Failed);
    const bool named = std::any_of(dev->checks.begin(), dev->checks.end(), [&](const Check& ch) {
      return !ch.passed && ch.name.find(e.failing_check) != std::string::npos;
    });
    CHECK(named);
    CHECK(std::find(dev->paths.begin(), dev->paths.end(), "faulty.path") != dev->paths.end());
  }
}

TEST_CASE("report: tables, replay commands, JSON", "[verify][report]") {
  FaultyBackend device(Fault::CorruptOneElement);
  Runner runner(tiny_config(&device));
  std::vector<CaseResult> results;
  const CaseFilter only = CaseFilter::parse("w=fp32,bounds=none|warning");
  for (const CaseAxes& c : enumerate_cases(Design::Pairwise))
    if (only.matches(c)) results.push_back(runner.run(c));
  REQUIRE(!results.empty());

  RunInfo info;
  info.spec = runner.spec();
  info.seed = 7;
  info.device_present = true;
  info.device = info.backend = "faulty";
  info.sequence_samples = runner.sequence_samples();
  std::ostringstream os;
  print_header(os, info);
  print_results(os, info, results);
  const std::string text = os.str();
  const Totals t = count_rows(results);
  CHECK(t.failed > 0);
  CHECK_THAT(text,
             Catch::Contains(std::to_string(t.passed) + " passed, " + std::to_string(t.failed) +
                             " failed, " + std::to_string(t.skipped) + " skipped"));
  CHECK_THAT(text, Catch::Contains("replay: tbe-verify --batch 12 --seed 7 --only policy="));
  CHECK_THAT(text, Catch::Contains("faulty.path"));

  const nlohmann::json j = nlohmann::json::parse(to_json(info, results).dump());
  CHECK(j["cases"].size() == results.size());
  CHECK(j["summary"]["failed"].get<std::int64_t>() == t.failed);
  bool worst_found = false;
  for (const auto& c : j["cases"]) {
    CHECK(c["axes"].size() == axis_names().size());
    for (const auto& row : c["rows"])
      if (row.contains("worst")) {
        worst_found = true;
        CHECK(row["worst"].contains("position"));
        CHECK(row["worst"].contains("lo"));
      }
    if (c["verdict"] == "failed")
      CHECK(c["replay"].get<std::string>().find("--only ") != std::string::npos);
  }
  CHECK(worst_found);
}
