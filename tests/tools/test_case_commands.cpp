// tbe-verify replay / check on case folders, and the matrix saving a failing case that replay and
// check then reproduce. The CPU reference (and broken wrappers of it) stand in for the GPU.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "scratch_dir.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/io/case_file.h"
#include "tbe/select_backend.h"
#include "tbe/workloads.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/report.h"
#include "tbe/judge/runner.h"

using namespace tbe;
using namespace tbe::judge;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) { return tbe::test::scratch_dir("test_cases", name); }

// WARNING mode, MEAN, weighted, with one bad index (repaired to row 0 with one warning).
io::CaseFile warning_case() {
  WorkloadSpec s;
  s.T = 2;
  s.E = 20;
  s.D = 5;
  s.L = 4;
  s.B = 3;
  s.weighted = true;
  s.options.pooling = PoolingMode::Mean;
  s.options.bounds_check = BoundsCheckMode::Warning;
  s.options.policy = make_policy(PolicyKind::FbgemmCuda, DType::F16, DType::F32);
  s.seed = 11;
  io::CaseFile c;
  c.name = "warning-mean";
  c.provenance = "test_case_commands";
  c.seed = 11;
  c.problem = generate(s);
  c.problem.indices[2] = 20;  // == E: bad
  return c;
}

// Records the reference's outputs, then applies `edit` to them.
void record_reference(io::CaseFile& c, double add_to_first = 0.0) {
  const ForwardProblem p = c.problem.view();
  io::RecordedOutputs r;
  r.implementation = "test implementation";
  r.output_dtype = p.options.policy.output;
  const std::int64_t n = make_output_layout(p).numel;
  r.output.resize(static_cast<std::size_t>(n) * dtype_size(r.output_dtype));
  r.warnings = forward_reference(p, r.output.data()).warnings;
  if (add_to_first != 0.0)
    store_from_double(r.output_dtype, r.output.data(), 0,
                      load_as_double(r.output_dtype, r.output.data(), 0) + add_to_first);
  c.recorded = r;
}

// The reference with its first output element shifted.
class ShiftedBackend : public Backend {
 public:
  std::string name() const override { return "shifted"; }
  ForwardStats forward(const ForwardProblem& p, void* out, const ForwardStrategy& s) override {
    ForwardStats st = ref_->forward(p, out, s);
    const DType t = p.options.policy.output;
    if (make_output_layout(p).numel > 0) store_from_double(t, out, 0, load_as_double(t, out, 0) + 0.75);
    return st;
  }
  RepairResult repair(const ForwardProblem& p) override { return ref_->repair(p); }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    return ref_->backward(p, out, s);
  }

 private:
  std::unique_ptr<Backend> ref_ = make_reference_backend();
};

}  // namespace

TEST_CASE("check: recorded outputs judged against the case's expectation", "[verify][cases]") {
  const fs::path dir = scratch("check");
  io::CaseFile c = warning_case();

  SECTION("correct output, default expectation pass -> 0") {
    record_reference(c);
    io::write_case(dir.string(), c);
    std::ostringstream os;
    CHECK(check_case(dir.string(), os) == kExitOk);
    INFO(os.str());
    CHECK_THAT(os.str(), Catch::Contains("verdict: pass; expected: pass (default)"));
    CHECK_THAT(os.str(), Catch::Contains("warnings: recorded 1 == reference 1"));
  }
  SECTION("wrong output, expected pass -> 1 with the worst element") {
    record_reference(c, 0.5);
    io::write_case(dir.string(), c);
    std::ostringstream os;
    CHECK(check_case(dir.string(), os) == kExitFailed);
    INFO(os.str());
    CHECK_THAT(os.str(), Catch::Contains("MISMATCH: expected pass, got fail"));
    CHECK_THAT(os.str(), Catch::Contains("oracle worst element: feature 0, sample 0, column 0 (flat 0)"));
  }
  SECTION("wrong output, expected fail -> 0, naming the rule and the worst element") {
    record_reference(c, 0.5);
    c.expect = io::Expectation{"fail", "semantics.md Pooling: MEAN divides by L"};
    io::write_case(dir.string(), c);
    std::ostringstream os;
    CHECK(check_case(dir.string(), os) == kExitOk);
    INFO(os.str());
    CHECK_THAT(os.str(), Catch::Contains("rule the case names: semantics.md Pooling: MEAN divides by L"));
    CHECK_THAT(os.str(), Catch::Contains("oracle worst element: feature 0, sample 0"));
    CHECK_THAT(os.str(), Catch::Contains("(outside)"));
  }
  SECTION("correct output, expected fail -> 1") {
    record_reference(c);
    c.expect = io::Expectation{"fail", "some rule"};
    io::write_case(dir.string(), c);
    std::ostringstream os;
    CHECK(check_case(dir.string(), os) == kExitFailed);
  }
  SECTION("wrong warning count -> fail") {
    record_reference(c);
    c.recorded->warnings = 0;
    io::write_case(dir.string(), c);
    std::ostringstream os;
    CHECK(check_case(dir.string(), os) == kExitFailed);
    CHECK_THAT(os.str(), Catch::Contains("warnings: recorded 0 != 1"));
  }
  SECTION("errors: bounds_check agrees under FATAL with a violation, not otherwise") {
    c.problem.options.bounds_check = BoundsCheckMode::Fatal;
    io::RecordedOutputs r;
    r.implementation = "raises";
    r.output_dtype = DType::F32;
    r.error = "bounds_check";
    c.recorded = r;
    io::write_case(dir.string(), c);
    std::ostringstream os;
    CHECK(check_case(dir.string(), os) == kExitOk);
    c.problem.indices[2] = 0;  // now valid: the reference computes an output
    io::write_case(dir.string(), c);
    std::ostringstream os2;
    CHECK(check_case(dir.string(), os2) == kExitFailed);
    CHECK_THAT(os2.str(), Catch::Contains("the reference computes an output"));
  }
  SECTION("no recorded block, unreadable case -> 3") {
    io::write_case(dir.string(), c);
    std::ostringstream os;
    CHECK(check_case(dir.string(), os) == kExitError);
    CHECK(check_case((dir / "missing").string(), os) == kExitError);
    CHECK_THAT(os.str(), Catch::Contains("cannot read the case"));
  }
  fs::remove_all(dir);
}

TEST_CASE("replay: reference and device rerun and judged", "[verify][cases]") {
  const fs::path dir = scratch("replay");
  io::CaseFile c = warning_case();
  io::write_case(dir.string(), c);
  SECTION("no device -> GPU skipped, exit 0 when the CPU side is fine") {
    std::ostringstream os;
    // nullptr device with a skip reason: the tool's path when select_backend(Cuda) failed.
    const int rc = replay_case(dir.string(), os, nullptr, "test: no GPU");
    INFO(os.str());
    CHECK(rc == kExitOk);
    CHECK_THAT(os.str(), Catch::Contains("gpu: SKIPPED (no GPU: test: no GPU)"));
    CHECK_THAT(os.str(), Catch::Contains("verdict: cpu passed, gpu skipped"));
    CHECK_THAT(os.str(), Catch::Contains("reference expects: an output with 1 warnings"));
  }
  SECTION("a conforming device passes both strategies") {
    auto dev = make_reference_backend();
    std::ostringstream os;
    CHECK(replay_case(dir.string(), os, dev.get()) == kExitOk);
    INFO(os.str());
    CHECK_THAT(os.str(), Catch::Contains("fused bounds check"));
    CHECK_THAT(os.str(), Catch::Contains("separate bounds check"));
    CHECK_THAT(os.str(), Catch::Contains("errors: agree"));
  }
  SECTION("a faulty device fails") {
    ShiftedBackend dev;
    std::ostringstream os;
    CHECK(replay_case(dir.string(), os, &dev) == kExitFailed);
    INFO(os.str());
    CHECK_THAT(os.str(), Catch::Contains("gpu FAILED"));
  }
  SECTION("FATAL: both sides must raise the same offender") {
    c.problem.options.bounds_check = BoundsCheckMode::Fatal;
    io::write_case(dir.string(), c);
    auto dev = make_reference_backend();
    std::ostringstream os;
    CHECK(replay_case(dir.string(), os, dev.get()) == kExitOk);
    INFO(os.str());
    CHECK_THAT(os.str(), Catch::Contains("errors: agree (every side that ran: BoundsCheckError(bounds check FATAL: index 20"));
  }
  fs::remove_all(dir);
}

TEST_CASE("matrix: a failing case is saved and replays", "[verify][cases]") {
  const fs::path dir = scratch("saved");
  ShiftedBackend dev;
  RunnerConfig cfg;
  WorkloadSpec s;
  s.name = "tiny";
  s.T = 2;
  s.E = 30;
  s.D = 4;
  s.L = 3;
  s.B = 6;
  cfg.custom_spec = s;
  cfg.seed = 3;
  cfg.device = &dev;
  cfg.save_failures_dir = dir.string();
  cfg.save_failures_max = 1;
  Runner runner(cfg);
  CaseAxes a;
  a.bounds = BoundsCheckMode::Warning;
  a.weighted = true;
  const CaseResult r = runner.run(a);
  REQUIRE(r.verdict() == Verdict::Failed);
  REQUIRE(r.saved_case == (dir / case_label(a)).string());
  const io::CaseFile saved = io::read_case(r.saved_case);
  REQUIRE(saved.recorded.has_value());
  CHECK(saved.recorded->implementation == "shifted (" +
                                              std::string(r.input.fused_bounds_check ? "fused" : "separate") +
                                              " bounds check)");
  CHECK(saved.provenance.find("malformed input") != std::string::npos);
  std::ostringstream os;
  CHECK(check_case(r.saved_case, os) == kExitFailed);  // the saved outputs fail, as they did
  auto good = make_reference_backend();
  std::ostringstream os2;
  CHECK(replay_case(r.saved_case, os2, good.get()) == kExitOk);
  // The report names the replay command of the saved case; the second failure is not saved.
  a.pooling = PoolingMode::Mean;
  const CaseResult r2 = runner.run(a);
  CHECK(r2.saved_case.empty());
  CHECK_THAT(r2.save_note, Catch::Contains("--save-failures-max 1"));
  RunInfo info;
  info.spec = runner.spec();
  info.device_present = true;
  std::ostringstream rep;
  print_results(rep, info, {r, r2});
  CHECK_THAT(rep.str(), Catch::Contains("replay case: tbe-verify replay " + r.saved_case));
  fs::remove_all(dir);
}
