// tbe-verify check / replay on backward, ikbo-lce and ikbo-attention case folders: round trips
// (the reference's outputs recorded -> folder -> check passes), corrupted recordings caught with
// the coordinates of the corrupted element, partial recordings, the SR z-test, error agreement,
// `expect` mismatches, several folders at once, and replay on conforming and faulty backends
// (the CPU reference stands in for the GPU).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "scratch_dir.h"
#include "tbe/backward.h"
#include "tbe/dtype_traits.h"
#include "tbe/errors.h"
#include "tbe/ikbo.h"
#include "tbe/ikbo_workloads.h"
#include "tbe/io/any_case_file.h"
#include "tbe/judge/case_commands.h"
#include "tbe/oracle/backward_oracle.h"
#include "tbe/precision.h"
#include "tbe/workloads.h"

using namespace tbe;
using namespace tbe::judge;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) { return tbe::test::scratch_dir("test_case_check", name); }

/// The reference backward's outputs as a recording (or the BoundsCheckError it raised).
io::BackwardRecordedOutputs record_backward(BackwardCase& c, RoundingMode write_back) {
  io::BackwardRecordedOutputs r;
  r.implementation = "test: cpu-reference";
  BackwardCase run = c;
  run.forward.options.policy.write_back = write_back;
  const BackwardProblem p = run.view();
  std::vector<std::byte> weights = c.forward.weights;
  std::vector<float> momentum = c.momentum;
  std::vector<float> psw(c.forward.per_sample_weights.size());
  BackwardOutputs out{weights.data(), momentum.empty() ? nullptr : momentum.data(),
                      psw.empty() ? nullptr : psw.data()};
  try {
    r.warnings = backward_reference(p, out).warnings;
    r.weights = weights;
    if (!momentum.empty()) r.momentum = momentum;
    if (!psw.empty()) r.per_sample_weight_grad = psw;
  } catch (const BoundsCheckError&) {
    r.error = "bounds_check";
  }
  return r;
}

/// A weighted rowwise Adagrad case (T = 3 features on 2 tables, a shared table, WARNING with one
/// bad index repaired) with the reference's outputs recorded. `weights` FP16 with `sr` or FP32.
io::BackwardCaseFile backward_case(DType weights = DType::F16, bool sr = false,
                                   OptimizerKind opt = OptimizerKind::ExactRowwiseAdagrad) {
  WorkloadSpec s;
  s.T = 3;
  s.table_rows = {30, 12};
  s.table_dims = {4, 6};
  s.feature_table_map = {0, 1, 0};
  s.L = 3;
  s.B = 4;
  s.weighted = true;
  s.seed = 21;
  s.options.pooling = PoolingMode::Sum;
  s.options.bounds_check = BoundsCheckMode::Warning;
  s.options.policy = make_policy(PolicyKind::FbgemmCuda, weights, DType::F32,
                                 sr ? RoundingMode::Stochastic : RoundingMode::Nearest);
  io::BackwardCaseFile c;
  c.name = "adagrad-warning";
  c.provenance = "test_case_check";
  c.seed = 21;
  c.problem.forward = generate(s);
  c.problem.forward.indices[1] = 30;  // == E_0: repaired to row 0, one warning
  OptimizerConfig& o = c.problem.options.optimizer;
  o.kind = opt;
  o.learning_rate = 0.05;
  o.eps = 1e-6;
  if (opt == OptimizerKind::ExactRowwiseAdagrad) {
    o.weight_decay_mode = WeightDecayMode::L2;
    o.weight_decay = 0.01;
  }
  c.problem.options.sr_seed = 77;
  c.problem.options.sr_offset = 2;
  c.problem.reset_momentum();
  c.problem.resize_grad_output();
  Rng g(5, 9);
  const auto n = static_cast<std::int64_t>(c.problem.grad_output.size() / sizeof(float));
  for (std::int64_t i = 0; i < n; ++i) c.problem.set_grad(i, 2.0 * g.uniform() - 1.0);
  for (float& m : c.problem.momentum) m = static_cast<float>(g.uniform());
  c.recorded = record_backward(c.problem, s.options.policy.write_back);
  return c;
}

/// The C12 shape (docs/edge-cases.md): 1024 FP16 rows of ones looked up once each, grad -1,
/// Adagrad with lr a quarter ulp of 1, SR asked: about 25% of the elements must move up. The
/// recording is made with `recorded_as` (RNE moves none).
io::BackwardCaseFile c12_case(std::int64_t rows, RoundingMode recorded_as) {
  io::BackwardCaseFile c;
  c.name = "c12";
  ForwardCase& f = c.problem.forward;
  f.set_tables(DType::F16, {rows}, {4});
  f.feature_table_map = {0};
  for (std::int64_t r = 0; r < rows; ++r)
    for (int d = 0; d < 4; ++d) f.set_weight(0, r, d, 1.0);
  f.index_dtype = DType::I64;
  f.indices.resize(rows);
  f.offsets.resize(rows + 1);
  for (std::int64_t r = 0; r <= rows; ++r) {
    if (r < rows) f.indices[r] = r;
    f.offsets[r] = r;
  }
  f.batch_size = rows;
  f.options.bounds_check = BoundsCheckMode::Fatal;
  f.options.policy =
      make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32, RoundingMode::Stochastic);
  c.problem.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.problem.options.optimizer.learning_rate = 2.0 * float_traits(DType::F16).unit_roundoff / 4.0;
  c.problem.options.optimizer.eps = 1e-10;
  c.problem.options.sr_seed = 99;
  c.problem.reset_momentum();
  c.problem.resize_grad_output();
  for (std::int64_t i = 0; i < rows * 4; ++i) c.problem.set_grad(i, -1.0);
  c.recorded = record_backward(c.problem, recorded_as);
  return c;
}

/// Runs check_case on `c` written to `dir`; returns the exit status, the text in `out`.
template <class Case>
int check_written(const fs::path& dir, const Case& c, std::string& out) {
  io::write_case(dir.string(), c);
  std::ostringstream os;
  const int rc = check_case(dir.string(), os);
  out = os.str();
  return rc;
}

/// Element of the flat weights buffer at (table t, row r, column d) of a backward case.
std::int64_t weight_flat(const io::BackwardCaseFile& c, std::int64_t t, std::int64_t r,
                         std::int64_t d) {
  return c.problem.forward.table_offsets[t] + r * c.problem.forward.dims[t] + d;
}

/// The reference backend with one stored weight of the first touched row moved by 0.5.
class ShiftedBackward : public Backend {
 public:
  std::string name() const override { return "shifted-backward"; }
  ForwardStats forward(const ForwardProblem& p, void* out, const ForwardStrategy& s) override {
    return ref_->forward(p, out, s);
  }
  RepairResult repair(const ForwardProblem& p) override { return ref_->repair(p); }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    BackwardStats st = ref_->backward(p, out, s);
    const BackwardReference ref = backward_reference_fp64(p);
    const TableBatchView& tb = p.forward.tables;
    const std::int64_t flat =
        tb.table_offsets[ref.run_table[0]] + ref.run_row[0] * tb.dims[ref.run_table[0]];
    store_from_double(tb.dtype, out.weights, flat,
                      load_as_double(tb.dtype, out.weights, flat) + 0.5);
    return st;
  }

 private:
  std::unique_ptr<Backend> ref_ = make_reference_backend();
};

/// The reference IKBO backend with its first output element moved by 1.
class ShiftedIkbo : public ikbo::IkboBackend {
 public:
  std::string name() const override { return "shifted-ikbo"; }
  void lce(const ikbo::LceProblem& p, void* out) override {
    ref_->lce(p, out);
    bump(p.policy.storage, out, ikbo::lce_output_numel(p));
  }
  void attention(const ikbo::AttentionProblem& p, void* out) override {
    ref_->attention(p, out);
    bump(p.policy.storage, out, ikbo::attention_output_numel(p));
  }

 private:
  static void bump(DType t, void* out, std::int64_t n) {
    if (n > 0) store_from_double(t, out, 0, load_as_double(t, out, 0) + 1.0);
  }
  std::unique_ptr<ikbo::IkboBackend> ref_ = ikbo::make_reference_ikbo_backend();
};

io::LceCaseFile lce_case() {
  io::LceCaseFile c;
  c.name = "lce";
  c.provenance = "test_case_check";
  c.seed = 3;
  const ikbo::IkboPolicy pol{DType::BF16, DType::F32, ikbo::LceRounding::RoundOnce};
  c.problem =
      ikbo::make_lce_case(ikbo::LceShape{5, 3, 4, 6, 8, 3}, pol, ikbo::MapKind::Unsorted, 17);
  io::IkboRecordedOutput r;
  r.implementation = "test: cpu-reference";
  r.output = c.problem.make_output();
  ikbo::lce_reference(c.problem.view(), r.output->data());
  c.recorded = r;
  return c;
}

io::AttentionCaseFile attention_case() {
  io::AttentionCaseFile c;
  c.name = "attention";
  c.provenance = "test_case_check";
  c.seed = 4;
  ikbo::AttentionShape sh;
  sh.B = 4;
  sh.U = 3;
  sh.n_seed = 2;
  sh.H = 2;
  sh.Dh = 8;
  sh.S = 5;
  sh.jagged = true;
  sh.lengths = {0, 3, 7};
  const ikbo::IkboPolicy pol{DType::F16, DType::F32, ikbo::LceRounding::RoundOnce};
  c.problem = ikbo::make_attention_case(sh, pol, ikbo::MapKind::Sorted, 23);
  io::IkboRecordedOutput r;
  r.implementation = "test: cpu-reference";
  r.output = c.problem.make_output();
  ikbo::attention_reference(c.problem.view(), r.output->data());
  c.recorded = r;
  return c;
}

}  // namespace

TEST_CASE("check backward: the reference's outputs pass, round trip row -> folder -> check",
          "[verify][cases][backward]") {
  const fs::path dir = scratch("bwd_pass");
  std::string out;
  for (const DType w : {DType::F32, DType::F16, DType::BF16}) {
    for (const OptimizerKind opt : {OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad}) {
      const io::BackwardCaseFile c = backward_case(w, w != DType::F32, opt);
      CHECK(check_written(dir, c, out) == kExitOk);
      INFO(out);
      CHECK_THAT(out, Catch::Contains("verdict: pass; expected: pass (default)"));
      CHECK_THAT(out, Catch::Contains("warnings: recorded 1 == reference 1"));
      CHECK_THAT(out, Catch::Contains("oracle: weights ["));
      CHECK_THAT(out, Catch::Contains("oracle: weights.untouched ["));
      CHECK_THAT(out, Catch::Contains("oracle: per_sample_weight_grad ["));
      CHECK((out.find("oracle: momentum [") != std::string::npos) ==
            (opt == OptimizerKind::ExactRowwiseAdagrad));
    }
  }
  // The same judgement in memory (judge_recorded) as through the folder.
  io::BackwardCaseFile c = backward_case();
  std::optional<oracle::CheckReport> report;
  std::string why;
  CHECK(judge_recorded(c, &report, &why));
  CHECK(why.empty());
  REQUIRE(report.has_value());
  fs::remove_all(dir);
}

TEST_CASE("check backward: a corrupted weight is caught with its coordinates",
          "[verify][cases][backward]") {
  const fs::path dir = scratch("bwd_corrupt");
  io::BackwardCaseFile c = backward_case();
  const BackwardReference ref = backward_reference_fp64(c.problem.view());
  std::string out;
  SECTION("touched row: one element outside its enclosure") {
    // The last run: table, row of the reference transpose; column 2.
    const std::size_t k = ref.run_table.size() - 1;
    const std::int64_t t = ref.run_table[k], r = ref.run_row[k];
    const std::int64_t flat = weight_flat(c, t, r, 2);
    const DType wt = c.problem.forward.weights_dtype;
    store_from_double(wt, c.recorded->weights->data(), flat,
                      load_as_double(wt, c.recorded->weights->data(), flat) + 0.25);
    CHECK(check_written(dir, c, out) == kExitFailed);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("MISMATCH: expected pass, got fail"));
    CHECK_THAT(out, Catch::Contains("weights: 1 of "));
    CHECK_THAT(out, Catch::Contains("oracle worst element (weights): table " + std::to_string(t) +
                                    ", row " + std::to_string(r) + ", column 2 (flat " +
                                    std::to_string(flat) + ")"));
    CHECK_THAT(out, Catch::Contains("(outside)"));
  }
  SECTION("a row without a lookup changed") {
    // Row 29 of table 0 has no lookup in this case (checked against the transpose).
    const std::int64_t id = 29;
    REQUIRE(std::find(ref.transpose.linear_ids.begin(), ref.transpose.linear_ids.end(), id) ==
            ref.transpose.linear_ids.end());
    const std::int64_t flat = weight_flat(c, 0, 29, 3);
    const DType wt = c.problem.forward.weights_dtype;
    store_from_double(wt, c.recorded->weights->data(), flat,
                      load_as_double(wt, c.recorded->weights->data(), flat) + 0.001);
    CHECK(check_written(dir, c, out) == kExitFailed);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("weights.untouched: 1 of "));
    CHECK_THAT(out, Catch::Contains("oracle worst element (weights.untouched): table 0, row 29, "
                                    "column 3 (flat " +
                                    std::to_string(flat) + ")"));
  }
  SECTION("momentum") {
    const std::int64_t id = ref.transpose.linear_ids[0];
    (*c.recorded->momentum)[static_cast<std::size_t>(id)] *= 2.0f;
    CHECK(check_written(dir, c, out) == kExitFailed);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("momentum: 1 of "));
    CHECK_THAT(out, Catch::Contains("oracle worst element (momentum): table " +
                                    std::to_string(ref.run_table[0]) + ", row " +
                                    std::to_string(ref.run_row[0]) + " (flat " +
                                    std::to_string(id) + ")"));
  }
  SECTION("per-sample-weight gradient") {
    (*c.recorded->per_sample_weight_grad)[4] += 1.0f;
    CHECK(check_written(dir, c, out) == kExitFailed);
    INFO(out);
    CHECK_THAT(out, Catch::Contains(
                        "oracle worst element (per_sample_weight_grad): lookup row 4 (flat 4)"));
  }
  SECTION("expected fail: the rule is named and check exits 0") {
    (*c.recorded->momentum)[static_cast<std::size_t>(ref.transpose.linear_ids[0])] *= 2.0f;
    c.expect = io::Expectation{"fail", "docs/backward.md rowwise Adagrad: the mean of g^2 over D"};
    CHECK(check_written(dir, c, out) == kExitOk);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("verdict: fail; expected: fail"));
    CHECK_THAT(out, Catch::Contains("rule the case names: docs/backward.md rowwise Adagrad"));
    CHECK_THAT(out, Catch::Contains("oracle worst element (momentum)"));
    CHECK_THAT(out, Catch::Contains("OK: the verdict is the expected one"));
  }
  SECTION("wrong warning count") {
    c.recorded->warnings = 0;
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out, Catch::Contains("warnings: recorded 0 != 1"));
  }
  fs::remove_all(dir);
}

TEST_CASE("check backward: expectation mismatch, partial recordings", "[verify][cases][backward]") {
  const fs::path dir = scratch("bwd_expect");
  io::BackwardCaseFile c = backward_case();
  std::string out;
  SECTION("correct outputs, expected fail -> 1") {
    c.expect = io::Expectation{"fail", "some rule"};
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out, Catch::Contains("MISMATCH: expected fail, got pass"));
  }
  SECTION("only the momentum recorded: only it is judged, a wrong one fails") {
    c.recorded->weights.reset();
    c.recorded->per_sample_weight_grad.reset();
    CHECK(check_written(dir, c, out) == kExitOk);
    INFO(out);
    CHECK_THAT(out, !Catch::Contains("oracle: weights"));
    CHECK_THAT(out, Catch::Contains("oracle: momentum ["));
    CHECK_THAT(out, Catch::Contains("oracle: momentum.untouched ["));
    for (float& m : *c.recorded->momentum) m += 1.0f;
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out, Catch::Contains("momentum.untouched: "));
  }
  SECTION("only the weights recorded") {
    c.recorded->momentum.reset();
    c.recorded->per_sample_weight_grad.reset();
    c.recorded->warnings.reset();
    CHECK(check_written(dir, c, out) == kExitOk);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("oracle: weights ["));
    CHECK_THAT(out, !Catch::Contains("oracle: momentum"));
    CHECK_THAT(out, !Catch::Contains("per_sample_weight_grad"));
  }
  fs::remove_all(dir);
}

TEST_CASE("check backward: errors agree only with the reference's", "[verify][cases][backward]") {
  const fs::path dir = scratch("bwd_errors");
  io::BackwardCaseFile c = backward_case();
  std::string out;
  SECTION("FATAL with a bad index: bounds_check agrees, other errors and outputs do not") {
    c.problem.forward.options.bounds_check = BoundsCheckMode::Fatal;
    io::BackwardRecordedOutputs r;
    r.implementation = "raises";
    r.error = "bounds_check";
    c.recorded = r;
    CHECK(check_written(dir, c, out) == kExitOk);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("reference: BoundsCheckError("));
    c.recorded->error = "invalid_argument";
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out, Catch::Contains("raised 'invalid_argument', the reference a BoundsCheckError"));
    const io::BackwardCaseFile ok = backward_case();
    c.recorded = ok.recorded;  // outputs where the reference raises
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out, Catch::Contains("the reference raises BoundsCheckError"));
  }
  SECTION("valid input, recorded error -> fail (expected fail: 0)") {
    io::BackwardRecordedOutputs r;
    r.implementation = "raises on valid input";
    r.error = "invalid_argument";
    c.recorded = r;
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out, Catch::Contains("the reference computes the update"));
    c.expect = io::Expectation{"fail", "docs/semantics.md feature_table_map: any map is valid"};
    CHECK(check_written(dir, c, out) == kExitOk);
  }
  SECTION("no recorded block -> 3") {
    c.recorded.reset();
    CHECK(check_written(dir, c, out) == kExitError);
    CHECK_THAT(out, Catch::Contains("records no outputs"));
  }
  fs::remove_all(dir);
}

TEST_CASE("check backward: SR write-back, per element and the z-test",
          "[verify][cases][backward]") {
  const fs::path dir = scratch("bwd_sr");
  std::string out;
  SECTION("SR recorded: passes, the z-test runs on 4096 elements") {
    CHECK(check_written(dir, c12_case(1024, RoundingMode::Stochastic), out) == kExitOk);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("stochastic rounding z-test: 4096 elements"));
  }
  SECTION("RNE recorded where SR was asked: every element passes, the z-test fails") {
    CHECK(check_written(dir, c12_case(1024, RoundingMode::Nearest), out) == kExitFailed);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("oracle: weights [") && Catch::Contains(": 0/4096 outside"));
    CHECK_THAT(out, Catch::Contains("disagreement: sr: stochastic rounding z-test"));
  }
  SECTION("too few elements: the z-test is not run (and not counted as passed)") {
    CHECK(check_written(dir, c12_case(4, RoundingMode::Nearest), out) == kExitOk);
    INFO(out);
    CHECK_THAT(
        out, Catch::Contains("stochastic rounding z-test: not run (16 non-representable elements"));
  }
  fs::remove_all(dir);
}

TEST_CASE("check ikbo: LCE and attention outputs", "[verify][cases][ikbo]") {
  const fs::path dir = scratch("ikbo");
  std::string out;
  SECTION("LCE: the reference's output passes; a moved element fails with its coordinates") {
    io::LceCaseFile c = lce_case();
    CHECK(check_written(dir, c, out) == kExitOk);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("case: lce (ikbo-lce)"));
    CHECK_THAT(out, Catch::Contains("oracle: ikbo-lce ["));
    // candidate 2, m 1, n 4: flat (2·M + 1)·N + 4 with M = 4, N = 6.
    const std::int64_t flat = (2 * 4 + 1) * 6 + 4;
    store_from_double(DType::BF16, c.recorded->output->data(), flat,
                      load_as_double(DType::BF16, c.recorded->output->data(), flat) + 0.5);
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out,
               Catch::Contains("oracle worst element (ikbo-lce): candidate 2, m 1, n 4 (flat " +
                               std::to_string(flat) + ")"));
    c.expect = io::Expectation{"fail", "docs/ikbo.md LCE"};
    CHECK(check_written(dir, c, out) == kExitOk);
  }
  SECTION("attention: the reference's output passes; a moved element fails with its coordinates") {
    io::AttentionCaseFile c = attention_case();
    CHECK(check_written(dir, c, out) == kExitOk);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("oracle: ikbo-attention ["));
    // query row 5 (candidate 2), head 1, d 3: flat (5·H + 1)·Dh + 3 with H = 2, Dh = 8.
    const std::int64_t flat = (5 * 2 + 1) * 8 + 3;
    store_from_double(DType::F16, c.recorded->output->data(), flat,
                      load_as_double(DType::F16, c.recorded->output->data(), flat) + 0.5);
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out,
               Catch::Contains("oracle worst element (ikbo-attention): query row 5, candidate 2, "
                               "head 1, d 3 (flat " +
                               std::to_string(flat) + ")"));
  }
  SECTION("a recorded error disagrees (the case is valid)") {
    io::LceCaseFile c = lce_case();
    c.recorded = io::IkboRecordedOutput{"raises", std::nullopt, std::string("device_error")};
    CHECK(check_written(dir, c, out) == kExitFailed);
    CHECK_THAT(out, Catch::Contains("raised 'device_error', the reference computes an output"));
  }
  fs::remove_all(dir);
}

TEST_CASE("check several folders: the worst exit status and a count line", "[verify][cases]") {
  const fs::path root = scratch("several");
  const std::string good = (root / "good").string(), bad = (root / "bad").string(),
                    lce = (root / "lce").string(), missing = (root / "missing").string();
  io::write_case(good, backward_case());
  io::BackwardCaseFile b = backward_case();
  (*b.recorded->momentum)[0] += 1.0f;
  io::write_case(bad, b);
  io::write_case(lce, lce_case());
  std::ostringstream os1, os2, os3;
  CHECK(check_cases({good, lce}, os1) == kExitOk);
  CHECK_THAT(os1.str(),
             Catch::Contains("check: 2 cases, 2 as expected, 0 mismatched, 0 unreadable"));
  CHECK(check_cases({good, bad, lce}, os2) == kExitFailed);
  CHECK_THAT(os2.str(),
             Catch::Contains("check: 3 cases, 2 as expected, 1 mismatched, 0 unreadable"));
  CHECK(check_cases({bad, missing}, os3) == kExitError);
  CHECK_THAT(os3.str(), Catch::Contains("cannot read the case"));
  fs::remove_all(root);
}

TEST_CASE("replay backward and ikbo cases", "[verify][cases]") {
  const fs::path root = scratch("replay");
  const std::string bwd = (root / "bwd").string(), fatal = (root / "fatal").string(),
                    lce = (root / "lce").string(), att = (root / "att").string();
  io::write_case(bwd, backward_case(DType::BF16, true));
  io::BackwardCaseFile f = backward_case();
  f.problem.forward.options.bounds_check = BoundsCheckMode::Fatal;
  io::BackwardRecordedOutputs raised;  // an implementation that raised, as the reference does
  raised.implementation = "raises";
  raised.error = "bounds_check";
  f.recorded = raised;
  io::write_case(fatal, f);
  io::write_case(lce, lce_case());
  io::write_case(att, attention_case());
  auto ref = make_reference_backend();
  auto ref_ikbo = ikbo::make_reference_ikbo_backend();
  SECTION("no device: GPU skipped, the CPU side judged") {
    for (const std::string& d : {bwd, lce, att}) {
      std::ostringstream os;
      CHECK(replay_case(d, os, ReplayDevices{nullptr, nullptr, "test: no GPU"}) == kExitOk);
      INFO(os.str());
      CHECK_THAT(os.str(), Catch::Contains("gpu: SKIPPED (no GPU: test: no GPU)"));
      CHECK_THAT(os.str(), Catch::Contains("verdict: cpu passed, gpu skipped"));
      CHECK_THAT(os.str(),
                 Catch::Contains(
                     "(the case also records outputs of test: cpu-reference: tbe-verify check"));
    }
  }
  SECTION("conforming devices pass") {
    for (const std::string& d : {bwd, fatal, lce, att}) {
      std::ostringstream os;
      CHECK(replay_case(d, os, ReplayDevices{ref.get(), ref_ikbo.get(), ""}) == kExitOk);
      INFO(os.str());
      CHECK_THAT(os.str(), Catch::Contains("verdict: cpu passed, gpu passed"));
    }
    std::ostringstream os;
    replay_case(fatal, os, ReplayDevices{ref.get(), nullptr, ""});
    CHECK_THAT(os.str(), Catch::Contains("errors: agree (every side that ran: BoundsCheckError("));
    // a recorded error is named as one, not as outputs
    CHECK_THAT(os.str(), Catch::Contains("(the case also records the bounds_check error of raises: "
                                         "tbe-verify check"));
    std::ostringstream os2;
    replay_case(bwd, os2, ReplayDevices{ref.get(), nullptr, ""});
    CHECK_THAT(os2.str(), Catch::Contains("oracle: weights ["));
    CHECK_THAT(os2.str(), Catch::Contains("warnings: cpu 1, gpu (cpu-reference) 1 (expected 1)"));
  }
  SECTION("faulty devices fail") {
    ShiftedBackward bad;
    ShiftedIkbo bad_ikbo;
    for (const std::string& d : {bwd, lce, att}) {
      std::ostringstream os;
      CHECK(replay_case(d, os, ReplayDevices{&bad, &bad_ikbo, ""}) == kExitFailed);
      INFO(os.str());
      CHECK_THAT(os.str(), Catch::Contains("gpu FAILED"));
    }
  }
  fs::remove_all(root);
}

// Not run by default (hidden tag): writes the case folders tests/tools/run_check_cli.cmake runs
// the tbe-verify binary on, into $TBE_CLI_CASES_DIR.
TEST_CASE("write the case folders of the tbe-verify check/replay CLI test", "[.write-cli-cases]") {
  const char* root = std::getenv("TBE_CLI_CASES_DIR");
  REQUIRE(root != nullptr);
  const fs::path dir(root);
  fs::remove_all(dir);
  io::write_case((dir / "bwd-pass").string(), backward_case(DType::BF16, true));
  io::BackwardCaseFile bad = backward_case();
  const BackwardReference ref = backward_reference_fp64(bad.problem.view());
  const std::int64_t flat = weight_flat(bad, ref.run_table[0], ref.run_row[0], 1);
  store_from_double(DType::F16, bad.recorded->weights->data(), flat,
                    load_as_double(DType::F16, bad.recorded->weights->data(), flat) + 0.25);
  io::write_case((dir / "bwd-mismatch").string(), bad);
  bad.expect = io::Expectation{"fail", "test: one weight moved outside its enclosure"};
  io::write_case((dir / "bwd-expect-fail").string(), bad);
  io::write_case((dir / "lce-pass").string(), lce_case());
  io::write_case((dir / "attention-pass").string(), attention_case());
}
