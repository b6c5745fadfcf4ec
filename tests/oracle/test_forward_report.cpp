// The report names the worst element correctly: one wrong value is injected at a known
// (feature, sample, column) — non-VBE, VBE and NONE — and the report must point at it.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "oracle_test_support.h"
#include "tbe/forward.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/oracle/report_json.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

/// Two tables (D = 3 and 5), two features, small-integer weights.
ForwardCase two_feature_case() {
  ForwardCase c;
  c.set_tables(DType::F32, {6, 7}, {3, 5});
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < (t ? 7 : 6); ++r)
      for (int d = 0; d < (t ? 5 : 3); ++d) c.set_weight(t, r, d, 100 * t + 10 * r + d);
  c.feature_table_map = {0, 1};
  c.options.pooling = PoolingMode::Sum;
  c.options.bounds_check = BoundsCheckMode::Fatal;
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  return c;
}

std::vector<double> reference_values(const ForwardProblem& p) {
  std::vector<double> v = forward_reference_fp64(p);
  for (auto& x : v) x = round_to(p.options.policy.output, x);
  return v;
}

}  // namespace

TEST_CASE("report: worst element of a pooled output (non-VBE)", "[oracle][report]") {
  ForwardCase c = two_feature_case();
  c.batch_size = 4;  // bags f·4 + b
  c.indices = {0, 1, 2, 3, 4, 5, 0, 0, 1, 2, 3, 4, 5, 6, 6, 6};
  c.offsets = {0, 2, 3, 4, 6, 8, 9, 12, 16};
  const ForwardProblem p = c.view();
  std::vector<double> v = reference_values(p);
  REQUIRE(check_forward_values(p, v).passed());
  // (feature 1, sample 2, column 4): row 2 of [4, 8], column 3 + 4
  const std::int64_t flat = 2 * 8 + 3 + 4;
  v[flat] += 0.5;
  v[0] += 0.25;  // a smaller error elsewhere: not the worst in radius units (both points: inf)
  const CheckReport r = check_forward_values(p, v);
  INFO(r.summary());
  CHECK(r.failures == 2);
  // both are point enclosures (exact integer sums) -> position +inf; ties go to the lower flat
  CHECK(r.worst.where.flat == 0);
  v[0] -= 0.25;
  const CheckReport r2 = check_forward_values(p, v);
  INFO(r2.summary());
  CHECK(r2.failures == 1);
  const ElementCoord& w = r2.worst.where;
  CHECK(w.feature == 1);
  CHECK(w.sample == 2);
  CHECK(w.column == 4);
  CHECK(w.row == 2);
  CHECK(w.rank == -1);
  CHECK(w.flat == flat);
  CHECK(r2.worst.value == v[flat]);
  CHECK(r2.worst.reference == v[flat] - 0.5);
  CHECK(r2.worst.position == std::numeric_limits<double>::infinity());
  CHECK_FALSE(r2.worst.inside);
  const std::string s = r2.summary();
  CHECK(s.find("1/32 outside") != std::string::npos);
  CHECK(s.find("feature 1, sample 2, column 4") != std::string::npos);
  CHECK(s.find(to_string(p.options.policy)) != std::string::npos);
}

TEST_CASE("report: worst element under VBE", "[oracle][report]") {
  ForwardCase c = two_feature_case();
  c.vbe_ranks = 2;
  c.vbe_batch_sizes = {1, 2, 2, 1};  // [f][r]: feature 0 -> (1, 2), feature 1 -> (2, 1)
  c.indices = {0, 1, 2, 3, 4, 5, 6, 0, 1};
  c.offsets = {0, 1, 3, 4, 6, 8, 9};  // 6 bags: f0 r0 | f0 r1 (x2) | f1 r0 (x2) | f1 r1
  const ForwardProblem p = c.view();
  const OutputLayout layout = make_output_layout(p);
  REQUIRE(layout.numel == 24);
  // Output blocks (rank-major): r0 f0 [1x3] @0, r0 f1 [2x5] @3, r1 f0 [2x3] @13, r1 f1 [1x5] @19.
  // Feature 0, rank 1, second bag of that rank (bag 2 of feature 0), column 2 -> 13 + 3 + 2.
  std::vector<double> v = reference_values(p);
  REQUIRE(check_forward_values(p, v).passed());
  const std::int64_t flat = 13 + 3 + 2;
  v[flat] = -v[flat] - 1;
  const CheckReport r = check_forward_values(p, v);
  INFO(r.summary());
  CHECK(r.failures == 1);
  CHECK(r.worst.where.feature == 0);
  CHECK(r.worst.where.rank == 1);
  CHECK(r.worst.where.sample == 2);
  CHECK(r.worst.where.column == 2);
  CHECK(r.worst.where.flat == flat);
  CHECK(r.worst.position == -std::numeric_limits<double>::infinity());
  CHECK(r.summary().find("feature 0, rank 1, sample 2, column 2") != std::string::npos);
  // every element maps back to the bag the layout puts there
  for (std::int64_t k = 0; k < layout.num_bags; ++k) {
    const std::int64_t f = layout.feature_of_bag(k);
    const std::int64_t D = f == 0 ? 3 : 5;
    for (std::int64_t d = 0; d < D; ++d) {
      const ElementCoord e = locate_output_element(p, layout, layout.bag_output_offset(k) + d);
      CHECK(e.feature == f);
      CHECK(e.sample == k - layout.feature_bag_offset[f]);
      CHECK(e.column == d);
    }
  }
}

TEST_CASE("report: worst element under NONE pooling", "[oracle][report]") {
  ForwardCase c;
  c.set_tables(DType::F16, {5}, {4});
  for (int r = 0; r < 5; ++r)
    for (int d = 0; d < 4; ++d) c.set_weight(0, r, d, 4 * r + d);
  c.feature_table_map = {0, 0};
  c.batch_size = 2;
  c.indices = {4, 0, 1, 2, 3, 4, 1};  // position 0 belongs to no bag (offsets[0] = 1)
  c.offsets = {1, 3, 3, 6, 7};        // bags: f0 b0 [1,3) f0 b1 [] f1 b0 [3,6) f1 b1 [6,7)
  c.options.pooling = PoolingMode::None;
  c.options.bounds_check = BoundsCheckMode::Warning;
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  const ForwardProblem p = c.view();
  const ForwardEnclosures enc = compute_forward_enclosures(p);
  // uncovered row 0 is exactly zero; row 5 is a copy of W[4]
  for (int d = 0; d < 4; ++d) {
    CHECK(enc.enclosures[d].lo == 0.0);
    CHECK(enc.enclosures[d].hi == 0.0);
    CHECK(enc.enclosures[5 * 4 + d].lo == 16.0 + d);
    CHECK(enc.enclosures[5 * 4 + d].hi == 16.0 + d);
  }
  std::vector<double> v = reference_values(p);
  REQUIRE(judge_forward(p, enc, v).passed());
  v[5 * 4 + 3] = 1.0;
  const CheckReport r = judge_forward(p, enc, v);
  INFO(r.summary());
  CHECK(r.failures == 1);
  CHECK(r.worst.where.row == 5);
  CHECK(r.worst.where.feature == 1);
  CHECK(r.worst.where.sample == 0);
  CHECK(r.worst.where.column == 3);
  CHECK(r.worst.where.lookup_row);
  CHECK(r.summary().find("row 5, feature 1, sample 0, column 3") != std::string::npos);
  const ElementCoord none = locate_output_element(p, enc.layout, 2);
  CHECK(none.row == 0);
  CHECK(none.feature == -1);
  v[5 * 4 + 3] = 19.0;
  v[1] = 1.0;  // a non-zero in an uncovered row
  const CheckReport r2 = judge_forward(p, enc, v);
  CHECK(r2.failures == 1);
  CHECK(r2.summary().find("row 0, no bag, column 1") != std::string::npos);
}

TEST_CASE("report: position is in units of the radius", "[oracle][report]") {
  ElementVerdict v;
  v.enclosure = {1.0, 3.0};
  v.value = 2.5;
  judge_element(v);
  CHECK(v.inside);
  CHECK(v.position == 0.5);
  v.value = 5.0;
  judge_element(v);
  CHECK_FALSE(v.inside);
  CHECK(v.position == 3.0);
  v.value = 3.0;
  judge_element(v);
  CHECK(v.inside);
  CHECK(v.position == 1.0);
  v.value = std::numeric_limits<double>::quiet_NaN();
  judge_element(v);
  CHECK_FALSE(v.inside);
  CHECK(v.position == std::numeric_limits<double>::infinity());
  v.enclosure = {2.0, 2.0};
  v.value = 2.0;
  judge_element(v);
  CHECK(v.inside);
  CHECK(v.position == 0.0);
  v.value = 1.0;
  judge_element(v);
  CHECK(v.position == -std::numeric_limits<double>::infinity());
  v.value = -0.0;
  v.enclosure = {0.0, 0.0};
  judge_element(v);
  CHECK(v.inside);  // signed zeros are not distinguished
  const double inf = std::numeric_limits<double>::infinity();
  v.enclosure = {-inf, inf};  // unconstrained
  v.value = std::numeric_limits<double>::quiet_NaN();
  judge_element(v);
  CHECK(v.inside);
  v.enclosure = {std::nan(""), std::nan("")};  // the IEEE result is NaN
  judge_element(v);
  CHECK(v.inside);
  v.value = 0.0;
  judge_element(v);
  CHECK_FALSE(v.inside);
  v.enclosure = {65504.0, inf};  // half-infinite (FP16 output overflow)
  v.value = inf;
  judge_element(v);
  CHECK(v.inside);
  v.value = 1.0;
  judge_element(v);
  CHECK(v.position == -inf);
}

TEST_CASE("report: empty output", "[oracle][report]") {
  ForwardCase c = two_feature_case();
  c.batch_size = 0;
  c.offsets = {0};
  const CheckReport r = check_forward_values(c.view(), std::vector<double>{});
  CHECK(r.passed());
  CHECK(r.elements == 0);
  CHECK(r.summary().find("0/0 outside") != std::string::npos);
}

TEST_CASE("report: JSON form", "[oracle][report]") {
  ForwardCase c = two_feature_case();
  c.batch_size = 1;
  c.indices = {1, 2};
  c.offsets = {0, 1, 2};
  const ForwardProblem p = c.view();
  std::vector<double> v = reference_values(p);
  v[4] = std::numeric_limits<double>::quiet_NaN();
  const nlohmann::json j = check_forward_values(p, v);
  CHECK(j["failures"] == 1);
  CHECK(j["passed"] == false);
  CHECK(j["worst"]["where"]["feature"] == 1);
  CHECK(j["worst"]["where"]["column"] == 1);
  CHECK(j["worst"]["value"] == "nan");
  CHECK(j["worst"]["position"] == "inf");
  CHECK(j["policy"] == to_string(p.options.policy));
}
