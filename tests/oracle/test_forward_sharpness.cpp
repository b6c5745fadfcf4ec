// Sharpness of the forward enclosures: seeded faults are rejected, each on an input constructed
// so that the fault provably changes the result by more than the enclosure allows.
// A fault is modelled as an emulation of a *different* computation (a modified problem, a
// narrower accumulation type, no output rounding, a corrupted value) judged against the
// original problem.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "oracle_test_support.h"
#include "tbe/forward.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

/// Distinct small integers per (row, column): every sum is exact, so enclosures are points.
double distinct_fill(std::int64_t r, std::int32_t d) { return static_cast<double>(10 * r + d + 1); }

/// Judges the emulation of `faulty` against the enclosures of `original` (same output shape).
CheckReport judge_fault(ForwardCase& original, ForwardCase& faulty, EmulationOptions o = {}) {
  const std::vector<double> v = emulate_forward(faulty.view(), o);
  return check_forward_values(original.view(), v);
}

/// The same fault-free emulation passes (the control of every sharpness case).
void require_control_passes(ForwardCase& c, EmulationOptions o = {}) {
  const CheckReport ok = check_forward_values(c.view(), emulate_forward(c.view(), o));
  INFO(ok.summary());
  REQUIRE(ok.passed());
}

ForwardCase integer_case(PoolingMode pooling, DType w = DType::F16, DType out = DType::F32) {
  return single_table_case(w, out, PolicyKind::FbgemmCuda, pooling, 8, 5,
                           {{1, 2, 3}, {4, 4, 0, 7}, {}, {6, 5}}, distinct_fill);
}

}  // namespace

TEST_CASE("sharpness: a dropped term is rejected", "[oracle][sharpness]") {
  SECTION("exact case: drop the last lookup of bag 1") {
    ForwardCase good = integer_case(PoolingMode::Sum);
    require_control_passes(good);
    ForwardCase bad = good;
    bad.indices.erase(bad.indices.begin() + bad.offsets[2] - 1);
    for (std::size_t k = 2; k < bad.offsets.size(); ++k) --bad.offsets[k];
    const CheckReport r = judge_fault(good, bad);
    INFO(r.summary());
    CHECK_FALSE(r.passed());
    CHECK(r.worst.where.sample == 1);
  }
  SECTION("rounded case: FP32 accumulation, 300 random terms, drop the largest") {
    CaseSpec s;
    s.seed = 2024;
    s.policy = PolicyKind::FbgemmCuda;
    s.weights = DType::F32;
    s.output = DType::F32;
    s.dims = {4};
    s.rows = {9};
    s.batch = 1;
    s.values = ValueMode::Binades;
    s.exponent_spread = 12;
    ForwardCase good = build_case(s);
    good.indices.resize(300);
    for (std::size_t i = 0; i < 300; ++i) good.indices[i] = static_cast<std::int64_t>(i % 9);
    good.offsets = {0, 300};
    require_control_passes(good);
    // the row with the largest |W[r][0]|
    std::int64_t big = 0;
    for (std::int64_t r = 1; r < 9; ++r)
      if (std::fabs(good.weight(0, r, 0)) > std::fabs(good.weight(0, big, 0))) big = r;
    const std::vector<Enclosure> e = forward_enclosures(good.view());
    REQUIRE(std::fabs(good.weight(0, big, 0)) > e[0].hi - e[0].lo);  // the fault matters
    ForwardCase bad = good;
    bad.indices.erase(bad.indices.begin() + big);  // first lookup of row `big`
    bad.offsets = {0, 299};
    for (SummationOrder o : kAllSummationOrders) {
      EmulationOptions eo;
      eo.order = o;
      const CheckReport r = judge_fault(good, bad, eo);
      INFO(to_string(o) << ": " << r.summary());
      CHECK_FALSE(r.passed());
    }
  }
}

TEST_CASE("sharpness: FP16 accumulation under an FP32-accumulation policy is rejected",
          "[oracle][sharpness]") {
  for (PolicyKind kind : {PolicyKind::SeedDefault, PolicyKind::FbgemmCuda}) {
    // 1 + 4096 · 2^-12 = 2 exactly in FP32; FP16 absorbs every 2^-12 added to 1 (half an ulp of
    // 1 in FP16 is 2^-11).
    std::vector<std::int64_t> bag(4097, 1);
    bag[0] = 0;
    ForwardCase c = single_table_case(DType::F16, DType::F32, kind, PoolingMode::Sum, 2, 3, {bag},
                                      [](std::int64_t r, std::int32_t) {
                                        return r == 0 ? 1.0 : 0x1p-12;
                                      });
    REQUIRE(c.options.policy.accumulation == DType::F32);
    require_control_passes(c);
    const std::vector<Enclosure> e = forward_enclosures(c.view());
    CHECK(e[0].lo == 2.0);
    CHECK(e[0].hi == 2.0);
    for (SummationOrder o : {SummationOrder::IndexOrder, SummationOrder::SortedDescending}) {
      EmulationOptions eo;
      eo.order = o;
      eo.accumulation = DType::F16;
      const CheckReport r = judge_fault(c, c, eo);
      INFO(r.summary());
      CHECK_FALSE(r.passed());
      CHECK(r.failures == 3);
    }
  }
  SECTION("tbe-edge-cases C10: 1 + 2^-11 in FP16 weights, FP32 output") {
    ForwardCase c = single_table_case(DType::F16, DType::F32, PolicyKind::SeedDefault,
                                      PoolingMode::Sum, 2, 4, {{0, 1}},
                                      [](std::int64_t r, std::int32_t) {
                                        return r == 0 ? 1.0 : 0x1p-11;
                                      });
    const std::vector<Enclosure> e = forward_enclosures(c.view());
    CHECK(e[0].lo == 1.00048828125);
    CHECK(e[0].hi == 1.00048828125);
    EmulationOptions eo;
    eo.accumulation = DType::F16;
    CHECK_FALSE(judge_fault(c, c, eo).passed());
  }
}

TEST_CASE("sharpness: FP32 accumulation under the seed default for FP32 weights is rejected",
          "[oracle][sharpness]") {
  // Bag: 1, then 1000 lookups of 2^-25, then -1. Exact: 1000·2^-25. In FP32 every 2^-25 added to
  // 1 is absorbed (a quarter ulp), so FP32 accumulation in index order returns 0; FP64 is exact.
  std::vector<std::int64_t> bag(1002, 1);
  bag.front() = 0;
  bag.back() = 2;
  auto fill = [](std::int64_t r, std::int32_t d) {
    const double v[] = {1.0, 0x1p-25, -1.0};
    return v[r] * (d + 1);
  };
  ForwardCase seed_default = single_table_case(DType::F32, DType::F32, PolicyKind::SeedDefault,
                                               PoolingMode::Sum, 3, 3, {bag}, fill);
  REQUIRE(seed_default.options.policy.accumulation == DType::F64);
  require_control_passes(seed_default);
  EmulationOptions fp32;
  fp32.accumulation = DType::F32;
  const CheckReport r = judge_fault(seed_default, seed_default, fp32);
  INFO(r.summary());
  CHECK_FALSE(r.passed());
  CHECK(r.failures == 3);

  // The same FP32 computation is conforming under the FBGEMM-CUDA policy (FP32 accumulation):
  // the enclosure is policy-dependent, not a fixed tolerance.
  ForwardCase fbgemm = seed_default;
  fbgemm.options.policy = make_policy(PolicyKind::FbgemmCuda, DType::F32, DType::F32);
  for (SummationOrder o : kAllSummationOrders) {
    EmulationOptions eo;
    eo.order = o;
    const CheckReport ok = check_forward_values(fbgemm.view(), emulate_forward(fbgemm.view(), eo));
    INFO(to_string(o) << ": " << ok.summary());
    CHECK(ok.passed());
  }
}

TEST_CASE("sharpness: a missing 1/L is rejected", "[oracle][sharpness]") {
  for (DType out : {DType::F32, DType::F16, DType::BF16}) {
    ForwardCase mean = integer_case(PoolingMode::Mean, DType::F16, out);
    require_control_passes(mean);
    ForwardCase sum = mean;
    sum.options.pooling = PoolingMode::Sum;  // the kernel forgot to scale
    const CheckReport r = judge_fault(mean, sum);
    INFO(r.summary());
    CHECK_FALSE(r.passed());
    // every element of the non-empty bags of length >= 2 (bags 0, 1, 3) is wrong
    CHECK(r.failures == 3 * 5);
  }
}

TEST_CASE("sharpness: a wrong row (i + 1, i - 1) is rejected", "[oracle][sharpness]") {
  for (int delta : {+1, -1}) {
    ForwardCase good = integer_case(PoolingMode::Sum);
    ForwardCase bad = good;
    for (auto& i : bad.indices) i = (i + delta + 8) % 8;
    const CheckReport r = judge_fault(good, bad);
    INFO("delta " << delta << ": " << r.summary());
    CHECK_FALSE(r.passed());
    CHECK(r.failures == 3 * 5);  // every non-empty bag moved by a multiple of 10 per lookup
  }
  SECTION("NONE pooling: a wrong row is a wrong copy") {
    ForwardCase good = integer_case(PoolingMode::None);
    ForwardCase bad = good;
    bad.indices[4] = bad.indices[4] + 1;
    const CheckReport r = judge_fault(good, bad);
    INFO(r.summary());
    CHECK(r.failures == 5);
    CHECK(r.worst.where.row == 4);
  }
}

TEST_CASE("sharpness: a bag boundary off by one is rejected", "[oracle][sharpness]") {
  for (int delta : {+1, -1}) {
    ForwardCase good = integer_case(PoolingMode::Sum);
    ForwardCase bad = good;
    for (std::size_t k = 1; k + 1 < bad.offsets.size(); ++k)
      bad.offsets[k] = std::max<std::int64_t>(bad.offsets[k] + delta, bad.offsets[k - 1]);
    const CheckReport r = judge_fault(good, bad);
    INFO("delta " << delta << ": " << r.summary());
    CHECK_FALSE(r.passed());
  }
}

TEST_CASE("sharpness: an output that was not rounded to the output type is rejected",
          "[oracle][sharpness]") {
  SECTION("point enclosure") {
    // 1 + 2^-13 (FP32 weights) stored in FP16 must be 1; the unrounded value is not an FP16.
    ForwardCase c = single_table_case(DType::F32, DType::F16, PolicyKind::SeedDefault,
                                      PoolingMode::Sum, 2, 2, {{0, 1}},
                                      [](std::int64_t r, std::int32_t) {
                                        return r == 0 ? 1.0 : 0x1p-13;
                                      });
    require_control_passes(c);
    EmulationOptions raw;
    raw.round_to_output = false;
    const CheckReport r = judge_fault(c, c, raw);
    INFO(r.summary());
    CHECK(r.failures == 2);
    CHECK(std::isinf(r.worst.position));
  }
  SECTION("a non-FP16 value strictly inside a wide enclosure") {
    // FP32 accumulation of 1.1, -1.3, 1.1, -1.3, ... (2000 terms) + 0.37: the enclosure
    // (radius about γ32(2000)·2400 = 0.29) spans several FP16 values (spacing 0.125 at 200).
    std::vector<std::int64_t> bag(2001);
    for (std::size_t i = 0; i < 2000; ++i) bag[i] = static_cast<std::int64_t>(i % 2);
    bag[2000] = 2;
    ForwardCase c = single_table_case(DType::F32, DType::F16, PolicyKind::FbgemmCuda,
                                      PoolingMode::Sum, 3, 2, {bag, {2}},
                                      [](std::int64_t r, std::int32_t) {
                                        return r == 0 ? 1.1 : (r == 1 ? -1.3 : 0.37);
                                      });
    const ForwardProblem p = c.view();
    const ForwardEnclosures enc = compute_forward_enclosures(p);
    std::vector<double> v = emulate_forward(p, SummationOrder::IndexOrder);
    REQUIRE(judge_forward(p, enc, v).passed());
    std::int64_t wide = -1;
    for (std::size_t i = 0; i < enc.enclosures.size() && wide < 0; ++i)
      if (std::isfinite(enc.enclosures[i].lo) && enc.enclosures[i].hi > enc.enclosures[i].lo)
        wide = static_cast<std::int64_t>(i);
    REQUIRE(wide >= 0);
    const Enclosure e = enc.enclosures[wide];
    const double next = round_up_to(DType::F16, std::nextafter(e.lo, 1e300));
    v[wide] = e.lo + (next - e.lo) / 2;  // between two adjacent FP16 values, inside [lo, hi]
    REQUIRE(v[wide] > e.lo);
    REQUIRE(v[wide] < e.hi);
    const CheckReport r = judge_forward(p, enc, v);
    INFO(r.summary());
    CHECK(r.failures == 1);
    CHECK(r.worst.where.flat == wide);
  }
}

TEST_CASE("sharpness: NaN in the output is rejected", "[oracle][sharpness]") {
  for (DType out : {DType::F32, DType::F16, DType::BF16}) {
    ForwardCase c = integer_case(PoolingMode::Mean, DType::BF16, out);
    const ForwardProblem p = c.view();
    std::vector<std::byte> buf(make_output_layout(p).numel * dtype_size(out));
    forward_reference(p, buf.data());
    REQUIRE(check_forward(p, buf.data()).passed());
    store_from_double(out, buf.data(), 7, std::numeric_limits<double>::quiet_NaN());
    const CheckReport r = check_forward(p, buf.data());
    INFO(r.summary());
    CHECK(r.failures == 1);
    CHECK(r.worst.where.flat == 7);
    CHECK(r.worst.position == std::numeric_limits<double>::infinity());
    // an empty bag's element (bag 2 = row 2) must be exactly 0: NaN there too
    store_from_double(out, buf.data(), 7, 0.0);
    forward_reference(p, buf.data());
    store_from_double(out, buf.data(), 2 * 5 + 1, std::numeric_limits<double>::quiet_NaN());
    CHECK(check_forward(p, buf.data()).worst.where.sample == 2);
  }
}
