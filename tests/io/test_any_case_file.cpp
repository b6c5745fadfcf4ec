// Case folders of any operator: read_case_operator and read_any_case dispatch, bitwise_equal
// notices a change anywhere, and the forward folders committed under tests/data read exactly as
// the forward reader reads them (backward compatibility of the format).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "case_test_support.h"
#include "tbe/io/any_case_file.h"
#include "tbe/workloads.h"

using namespace tbe;
using namespace tbe::io;
using namespace case_test;

namespace {

CaseFile small_forward() {
  WorkloadSpec s;
  s.T = 2;
  s.E = 6;
  s.D = 3;
  s.L = 2;
  s.B = 2;
  s.weighted = true;
  CaseFile c;
  c.name = "forward";
  c.problem = generate(s);
  return c;
}

BackwardCaseFile small_backward() {
  BackwardCaseFile c;
  c.name = "backward";
  c.problem.forward = small_forward().problem;
  c.problem.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.problem.reset_momentum();
  c.problem.resize_grad_output();
  c.problem.set_grad(0, 0.5);
  return c;
}

LceCaseFile small_lce() {
  LceCaseFile c;
  c.name = "lce";
  c.problem = ikbo::make_lce_case({3, 2, 2, 2, 3, 1}, {}, ikbo::MapKind::Sorted, 1);
  return c;
}

AttentionCaseFile small_attention() {
  AttentionCaseFile c;
  c.name = "attention";
  ikbo::AttentionShape sh;
  sh.B = 2;
  sh.U = 2;
  sh.S = 3;
  c.problem = ikbo::make_attention_case(sh, {}, ikbo::MapKind::Sorted, 2);
  return c;
}

/// The committed forward case folders (tests/data/**/case.json).
std::vector<fs::path> data_case_folders() {
  const fs::path data = TBE_TEST_DATA_DIR;
  std::vector<fs::path> out;
  if (!fs::is_directory(data)) return out;
  for (const auto& e : fs::recursive_directory_iterator(data))
    if (e.is_regular_file() && e.path().filename() == "case.json") out.push_back(e.path().parent_path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("any case: read_any_case dispatches on the operator, write_case on the alternative", "[io][case][any]") {
  const fs::path dir = scratch("any");
  const std::vector<AnyCaseFile> cases = {small_forward(), small_backward(), small_lce(), small_attention()};
  const CaseOperator ops[] = {CaseOperator::Forward, CaseOperator::Backward, CaseOperator::IkboLce,
                              CaseOperator::IkboAttention};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    CHECK(case_operator(cases[i]) == ops[i]);
    CHECK(parse_case_operator(to_string(ops[i])) == ops[i]);
    write_case(dir.string(), cases[i]);  // one folder rewritten with every operator in turn
    CHECK(read_case_operator(dir.string()) == ops[i]);
    const AnyCaseFile back = read_any_case(dir.string());
    CHECK(back.index() == i);
    CHECK(bitwise_equal(back, cases[i]));
    for (std::size_t k = 0; k < cases.size(); ++k) CHECK(bitwise_equal(back, cases[k]) == (k == i));
  }
  CHECK(to_string(CaseOperator::IkboLce) == "ikbo-lce");
  CHECK_THROWS_WITH(parse_case_operator("ikbo", "operator"), Catch::Contains("allowed: forward, backward, ikbo-lce, ikbo-attention"));
  fs::remove_all(dir);
}

TEST_CASE("any case: read_case_operator checks format, version and operator", "[io][case][any][untrusted]") {
  const fs::path dir = scratch("any_op");
  auto read_op = [](const std::string& d) { return read_case_operator(d); };
  expect_rejected_by(read_op, dir, "any_op", {"not a case folder"});
  write_case(dir.string(), small_lce());
  const json j0 = load_json(dir);
  json j = j0;
  j["format"] = "tbe-case-2";
  save_json(dir, j);
  expect_rejected_by(read_op, dir, "case.json", {"format", "tbe-case-2"});
  j = j0;
  j["version"] = 2;
  save_json(dir, j);
  expect_rejected_by(read_op, dir, "case.json", {"version", "2"});
  j = j0;
  j["operator"] = "ikbo-gemm";
  save_json(dir, j);
  expect_rejected_by(read_op, dir, "case.json", {"operator", "ikbo-gemm"});
  // read_any_case reads an unknown operator as a forward case: the forward's errors, in order.
  expect_rejected_by([](const std::string& d) { return read_any_case(d); }, dir, "case.json",
                     {"case.json[\"map\"]", "unknown key"});
  j.erase("operator");
  save_json(dir, j);
  expect_rejected_by(read_op, dir, "case.json", {"operator", "missing required key"});
  fs::remove_all(dir);
}

TEST_CASE("any case: bitwise_equal notices one changed bit or field", "[io][case][any]") {
  SECTION("forward") {
    const CaseFile a = small_forward();
    CaseFile b = a;
    CHECK(bitwise_equal(a, b));
    b.problem.per_sample_weights[0] = -b.problem.per_sample_weights[0];
    CHECK_FALSE(bitwise_equal(a, b));
    b = a;
    b.expect = Expectation{};
    CHECK_FALSE(bitwise_equal(a, b));
  }
  SECTION("backward") {
    const BackwardCaseFile a = small_backward();
    BackwardCaseFile b = a;
    b.problem.options.optimizer.max_norm = -0.0;  // == 0.0, other bits
    CHECK_FALSE(bitwise_equal(a, b));
    b = a;
    b.strategy = BackwardStrategyRecord{};
    CHECK_FALSE(bitwise_equal(a, b));
    b = a;
    b.problem.momentum[1] = 1e-30f;
    CHECK_FALSE(bitwise_equal(a, b));
  }
  SECTION("ikbo") {
    const LceCaseFile a = small_lce();
    LceCaseFile b = a;
    b.problem.map = ikbo::MapKind::Unsorted;
    CHECK_FALSE(bitwise_equal(a, b));
    const AttentionCaseFile x = small_attention();
    AttentionCaseFile y = x;
    y.problem.shape.scale = 1e-300;
    CHECK_FALSE(bitwise_equal(x, y));
    y = x;
    y.recorded = IkboRecordedOutput{"x", std::nullopt, std::string("device_error")};
    CHECK_FALSE(bitwise_equal(x, y));
  }
}

TEST_CASE("any case: the committed folders read as before, through every entry point", "[io][case][any]") {
  // tests/data holds recorded folders of every operator: each reads through read_any_case as the
  // operator its case.json names, round-trips bitwise, and the other operators' readers refuse it.
  const std::vector<fs::path> folders = data_case_folders();
  REQUIRE_FALSE(folders.empty());
  const fs::path dir = scratch("any_data");
  std::set<CaseOperator> seen;
  for (const fs::path& f : folders) {
    CAPTURE(f.string());
    const CaseOperator op = read_case_operator(f.string());
    seen.insert(op);
    const AnyCaseFile any = read_any_case(f.string());
    CHECK(case_operator(any) == op);
    write_case(dir.string(), any);
    CHECK(bitwise_equal(read_any_case(dir.string()), any));
    if (op == CaseOperator::Forward) {
      CHECK(bitwise_equal(read_case(f.string()), std::get<CaseFile>(any)));
      CHECK_THROWS_WITH(read_backward_case(f.string()), Catch::Contains("'forward' is not 'backward'"));
    } else {
      CHECK_THROWS_WITH(read_case(f.string()), Catch::Contains("is not 'forward'"));
    }
  }
  CHECK(seen.count(CaseOperator::Forward) == 1);
  CHECK(seen.count(CaseOperator::Backward) == 1);
  CHECK(seen.count(CaseOperator::IkboAttention) == 1);
  fs::remove_all(dir);
}
