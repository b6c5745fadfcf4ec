// The public bug-report cases (docs/edge-cases.md) on the GPU, with exact values.
#include <cmath>
#include <cstring>

#include <catch2/catch.hpp>

#include "gpu_harness.h"
#include "tbe/case_builder.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/precision.h"

using namespace tbe;
using namespace tbe::test;

namespace {

ForwardCase one_table(DType w, std::int64_t E, std::int32_t D, std::int64_t B,
                      std::vector<std::int64_t> indices, std::vector<std::int64_t> offsets,
                      BoundsCheckMode mode, PoolingMode pooling = PoolingMode::Sum,
                      DType index = DType::I64) {
  ForwardCaseSpec spec;  // raw indices + offsets: several cases are malformed on purpose
  spec.weights = w;
  spec.rows = {E};
  spec.dims = {D};
  spec.feature_table_map = {0};
  spec.indices = std::move(indices);
  spec.offsets = std::move(offsets);
  spec.batch_size = B;
  spec.index_dtype = index;
  spec.options.pooling = pooling;
  spec.options.bounds_check = mode;
  spec.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
  return build_case(spec);
}

std::vector<float> as_floats(const Outcome& o) {
  std::vector<float> v(o.output.size() / 4);
  std::memcpy(v.data(), o.output.data(), v.size() * 4);
  return v;
}

void set_row_pattern(ForwardCase& c) {  // W[r][d] = 10 r + d (exact in every type for small r)
  for (std::int64_t r = 0; r < c.rows[0]; ++r)
    for (std::int32_t d = 0; d < c.dims[0]; ++d) c.set_weight(0, r, d, 10.0 * r + d);
}

}  // namespace

TEST_CASE("C01 index repair and FATAL offender", "[gpu][cases]") {
  for (bool fused : {true, false})
    for (DType idx : {DType::I32, DType::I64}) {
      ForwardCase c = one_table(DType::F32, 10, 4, 2, {3, 12, -5, 7}, {0, 2, 4},
                                BoundsCheckMode::Warning, PoolingMode::Sum, idx);
      set_row_pattern(c);
      const Outcome g = run_gpu(c, fused);
      REQUIRE(g.kind == Outcome::Kind::Ok);
      CHECK(g.stats.warnings == 2);
      const auto v = as_floats(g);
      for (int d = 0; d < 4; ++d) {
        CHECK(v[d] == 30.0f + 2 * d);      // W3 + W0
        CHECK(v[4 + d] == 70.0f + 2 * d);  // W0 + W7
      }
      c.options.bounds_check = BoundsCheckMode::Fatal;
      const Outcome f = run_gpu(c, fused);
      REQUIRE(f.kind == Outcome::Kind::BoundsCheck);
      CHECK(f.violation.kind == BoundsViolation::Kind::Index);
      CHECK(f.violation.position == 1);
      CHECK(f.violation.value == 12);
      CHECK(f.poison_intact);
      CHECK(f.violation == run_reference(c).violation);
    }
}

TEST_CASE("C02 offset repair is deterministic on the GPU", "[gpu][cases]") {
  for (bool fused : {true, false}) {
    ForwardCase c = one_table(DType::F32, 10, 2, 3, {1, 2, 3, 4}, {0, 3, 2, 4},
                              BoundsCheckMode::Warning);
    set_row_pattern(c);
    const Outcome first = run_gpu(c, fused);
    REQUIRE(first.kind == Outcome::Kind::Ok);
    CHECK(first.stats.warnings == 1);
    const auto v = as_floats(first);
    CHECK(v[0] == 60.0f); CHECK(v[1] == 63.0f);  // W1 + W2 + W3
    CHECK(v[2] == 0.0f); CHECK(v[3] == 0.0f);    // empty after repair
    CHECK(v[4] == 40.0f); CHECK(v[5] == 41.0f);  // W4
    for (int run = 0; run < 10; ++run) {
      cuda::ForwardTuning tuning;
      tuning.pipelined = run % 2 == 0;
      tuning.prefer_l1 = run % 3 == 0;
      tuning.row_index32 = run % 4 < 2;
      const Outcome again = run_gpu(c, fused, tuning);
      CHECK(again.stats.warnings == 1);
      CHECK(count_bit_differences(first, again) == 0);
    }
    const RepairResult r = repair_gpu(c);
    CHECK(r.offsets == std::vector<std::int64_t>{0, 3, 3, 4});
    CHECK(r.warnings == 1);
  }
}

TEST_CASE("C03 no lookups, B = 0 and N = 0", "[gpu][cases]") {
  ForwardCase c;
  c.set_tables(DType::F32, {16, 16}, {8, 8});
  c.feature_table_map = {0, 1};
  c.index_dtype = DType::I32;
  c.batch_size = 2;
  c.offsets = {0, 0, 0, 0, 0};
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  for (PoolingMode pm : {PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None})
    for (BoundsCheckMode m : {BoundsCheckMode::Warning, BoundsCheckMode::Fatal, BoundsCheckMode::None}) {
      c.options.pooling = pm;
      c.options.bounds_check = m;
      const Outcome g = run_gpu(c, true);
      REQUIRE(g.kind == Outcome::Kind::Ok);
      CHECK(g.sentinels_intact);
      CHECK(g.output.size() == (pm == PoolingMode::None ? 0u : 2u * 16 * 4));
      for (float x : as_floats(g)) CHECK(x == 0.0f);
    }
  c.batch_size = 0;  // B = 0
  c.offsets = {0};
  c.options.pooling = PoolingMode::Sum;
  const Outcome g = run_gpu(c, false);
  REQUIRE(g.kind == Outcome::Kind::Ok);
  CHECK(g.output.empty());
}

TEST_CASE("C06 wide rows D in {1280, 1536, 2048}", "[gpu][cases]") {
  for (DType w : {DType::F32, DType::F16})
    for (std::int32_t D : {1280, 1536, 2048}) {
      ForwardCase c = one_table(w, 64, D, 4096, {}, {0}, BoundsCheckMode::Warning);
      for (std::int64_t r = 0; r < 64; ++r)
        for (std::int32_t d = 0; d < D; ++d) c.set_weight(0, r, d, static_cast<double>(r * 7 + d % 13) / 8.0);
      for (std::int64_t b = 0; b < 4096; ++b) {
        c.indices.push_back(b % 64);
        c.offsets.push_back(b + 1);
      }
      cuda::ForwardTuning tuning;
      tuning.pipelined = D != 1536;
      tuning.prefer_l1 = D != 1280;
      tuning.row_index32 = D != 2048;
      const Outcome g = run_gpu(c, true, tuning);
      REQUIRE(g.kind == Outcome::Kind::Ok);
      CHECK(g.sentinels_intact);
      const auto v = as_floats(g);
      std::int64_t bad = 0;
      for (std::int64_t b = 0; b < 4096; ++b)
        for (std::int32_t d = 0; d < D; ++d)
          bad += v[b * D + d] != static_cast<float>(c.weight(0, b % 64, d));
      INFO("w=" << to_string(w) << " D=" << D);
      CHECK(bad == 0);
    }
}

TEST_CASE("C11 MEAN with empty bags is never NaN", "[gpu][cases]") {
  for (PoolingMode pm : {PoolingMode::Sum, PoolingMode::Mean}) {
    ForwardCase c = one_table(DType::F32, 5, 3, 5, {0, 1, 2, 3, 4}, {0, 1, 1, 3, 3, 5},
                              BoundsCheckMode::Warning, pm);
    for (int r = 0; r < 5; ++r)
      for (int d = 0; d < 3; ++d) c.set_weight(0, r, d, 3.0 * r + d);
    const Outcome g = run_gpu(c, true);
    REQUIRE(g.kind == Outcome::Kind::Ok);
    const auto v = as_floats(g);
    const std::vector<float> sum = {0, 1, 2, 0, 0, 0, 9, 11, 13, 0, 0, 0, 21, 23, 25};
    const std::vector<float> mean = {0, 1, 2, 0, 0, 0, 4.5, 5.5, 6.5, 0, 0, 0, 10.5, 11.5, 12.5};
    CHECK(v == (pm == PoolingMode::Sum ? sum : mean));
  }
}

TEST_CASE("C10 FP16 weights accumulate in FP32", "[gpu][cases]") {
  ForwardCase c = one_table(DType::F16, 2, 4, 1, {0, 1}, {0, 2}, BoundsCheckMode::Warning);
  for (int d = 0; d < 4; ++d) { c.set_weight(0, 0, d, 1.0); c.set_weight(0, 1, d, std::ldexp(1.0, -11)); }
  const Outcome g = run_gpu(c, true);
  REQUIRE(g.kind == Outcome::Kind::Ok);
  for (float x : as_floats(g)) CHECK(x == 1.00048828125f);
  ForwardCase c2 = one_table(DType::F16, 2, 4, 1, std::vector<std::int64_t>(3000, 0), {0, 3000},
                             BoundsCheckMode::Warning);
  for (int d = 0; d < 4; ++d) c2.set_weight(0, 0, d, 1.0);
  const Outcome g2 = run_gpu(c2, true);
  REQUIRE(g2.kind == Outcome::Kind::Ok);
  for (float x : as_floats(g2)) CHECK(x == 3000.0f);
}

TEST_CASE("C14 trailing indices: last offset repaired, FATAL raises", "[gpu][cases]") {
  ForwardCase c = one_table(DType::F32, 32, 4, 2, {10, 11, 20, 5, 5, 5}, {0, 2, 3},
                            BoundsCheckMode::Warning);
  set_row_pattern(c);
  for (bool fused : {true, false}) {
    const Outcome g = run_gpu(c, fused);
    REQUIRE(g.kind == Outcome::Kind::Ok);
    CHECK(g.stats.warnings == 1);
    const auto v = as_floats(g);
    for (int d = 0; d < 4; ++d) CHECK(v[4 + d] == 200.0f + d + 3 * (50.0f + d));
  }
  c.options.bounds_check = BoundsCheckMode::Fatal;
  const Outcome f = run_gpu(c, true);
  REQUIRE(f.kind == Outcome::Kind::BoundsCheck);
  CHECK(f.violation.kind == BoundsViolation::Kind::LastOffset);
  CHECK(f.violation == run_reference(c).violation);
  CHECK(f.poison_intact);
}

TEST_CASE("C05 permuted feature_table_map", "[gpu][cases]") {
  ForwardCase c;
  c.set_tables(DType::F32, {8, 4}, {4, 4});
  c.feature_table_map = {1, 0};
  c.batch_size = 1;
  c.indices = {3, 7};
  c.offsets = {0, 1, 2};
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  c.options.bounds_check = BoundsCheckMode::Fatal;
  for (int t = 0; t < 2; ++t)
    for (std::int64_t r = 0; r < c.rows[t]; ++r)
      for (int d = 0; d < 4; ++d) c.set_weight(t, r, d, 100.0 * t + 10.0 * r + d);
  const Outcome g = run_gpu(c, true);
  REQUIRE(g.kind == Outcome::Kind::Ok);
  const auto v = as_floats(g);
  for (int d = 0; d < 4; ++d) {
    CHECK(v[d] == 130.0f + d);     // W_1[3]
    CHECK(v[4 + d] == 70.0f + d);  // W_0[7]
  }
}
