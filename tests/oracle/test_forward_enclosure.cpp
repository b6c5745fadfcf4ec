// Shape of the forward enclosures: exact where the arithmetic is exact (small-integer fills give
// single points equal to the exact value), never absurdly wide, exact zeros for empty bags,
// copies under NONE, the operator's bounds-check semantics, and the non-finite special forms.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "oracle_test_support.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Σ s_p·W[i_p] (times 1/L) per element, computed independently of the oracle: exact for the
/// small-integer / power-of-two inputs used here.
std::vector<double> exact_values(ForwardCase& c) {
  const ForwardProblem p = c.view();
  const OutputLayout layout = make_output_layout(p);
  std::vector<double> v(layout.numel, 0.0);
  for (std::int64_t k = 0; k < layout.num_bags; ++k) {
    const std::int64_t f = layout.feature_of_bag(k);
    const std::int64_t t = c.feature_table_map[f];
    const std::int64_t D = c.dims[t];
    const std::int64_t L = c.offsets[k + 1] - c.offsets[k];
    for (std::int64_t d = 0; d < D; ++d) {
      double s = 0;
      for (std::int64_t q = c.offsets[k]; q < c.offsets[k + 1]; ++q)
        s += (c.per_sample_weights.empty() ? 1.0 : c.per_sample_weights[q]) *
             c.weight(t, c.indices[q], d);
      if (c.options.pooling == PoolingMode::Mean && L > 0) s /= static_cast<double>(L);
      v[layout.bag_output_offset(k) + d] = s;
    }
  }
  return v;
}

}  // namespace

TEST_CASE("small-integer fills give point enclosures equal to the exact value",
          "[oracle][width]") {
  int cases = 0;
  for (PolicyKind kind : {PolicyKind::SeedDefault, PolicyKind::FbgemmCuda})
    for (DType w : {DType::F32, DType::F16, DType::BF16})
      for (DType out : {DType::F32, DType::F16, DType::BF16})
        for (SampleWeightMode psw : {SampleWeightMode::None, SampleWeightMode::PowersOfTwo}) {
          CaseSpec s;
          s.seed = 1000 + cases;
          s.policy = kind;
          s.weights = w;
          s.output = out;
          s.num_tables = 2;
          s.num_features = 3;
          s.dims = {1, 7};
          s.rows = {4, 9};
          s.batch = 3;
          s.bag_length_mode = 3;
          s.values = ValueMode::SmallIntegers;
          s.sample_weights = psw;
          ForwardCase c = build_case(s);
          INFO("seed " << s.seed << " " << to_string(c.options.policy));
          const std::vector<double> exact = exact_values(c);
          const std::vector<Enclosure> e = forward_enclosures(c.view());
          REQUIRE(e.size() == exact.size());
          for (std::size_t i = 0; i < e.size(); ++i) {
            INFO("element " << i << " exact " << exact[i]);
            CHECK(e[i].lo == round_to(out, exact[i]));
            CHECK(e[i].hi == round_to(out, exact[i]));
          }
          ++cases;
        }
  CHECK(cases == 36);
}

TEST_CASE("MEAN with power-of-two L is exact, with other L the enclosure is tight",
          "[oracle][width]") {
  // docs/edge-cases.md C11: W[r] = [3r, 3r+1, 3r+2]; offsets [0, 1, 1, 3, 3, 5].
  for (PoolingMode pooling : {PoolingMode::Sum, PoolingMode::Mean}) {
    ForwardCase c = single_table_case(DType::F32, DType::F32, PolicyKind::FbgemmCuda, pooling, 5,
                                      3, {{0}, {}, {1, 2}, {}, {3, 4}},
                                      [](std::int64_t r, std::int32_t d) { return 3.0 * r + d; });
    const std::vector<Enclosure> e = forward_enclosures(c.view());
    const double sum[] = {0, 1, 2, 0, 0, 0, 9, 11, 13, 0, 0, 0, 21, 23, 25};
    const double mean[] = {0, 1, 2, 0, 0, 0, 4.5, 5.5, 6.5, 0, 0, 0, 10.5, 11.5, 12.5};
    for (int i = 0; i < 15; ++i) {
      const double x = pooling == PoolingMode::Sum ? sum[i] : mean[i];
      CHECK(e[i].lo == x);
      CHECK(e[i].hi == x);
    }
  }
  // L = 3: 1/3 is inexact; the enclosure is a few FP32 ulps wide under FP32 accumulation and at
  // most one FP32 ulp (two neighbours) under FP64 accumulation.
  for (PolicyKind kind : {PolicyKind::FbgemmCuda, PolicyKind::SeedDefault}) {
    ForwardCase c = single_table_case(DType::F32, DType::F32, kind, PoolingMode::Mean, 3, 1,
                                      {{0, 1, 2}},
                                      [](std::int64_t r, std::int32_t) { return 1.0 + r; });
    const Enclosure e = forward_enclosures(c.view())[0];
    const double ulp = std::nextafter(2.0f, 3.0f) - 2.0f;
    INFO(to_string(kind) << " [" << e.lo << ", " << e.hi << "]");
    CHECK(e.lo <= 2.0);
    CHECK(e.hi >= 2.0);
    CHECK(e.hi - e.lo <= (kind == PolicyKind::SeedDefault ? 0.0 : 8 * ulp));
  }
}

TEST_CASE("enclosures are not absurdly wide for random positive data", "[oracle][width]") {
  // Positive terms (A = |S|): the width is about γ(L)·|S| in the accumulation type, plus one
  // output rounding. Check it against 2·(L+2)·u_acc·|S| + 2 output ulps.
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    CaseRng g(seed);
    const PolicyKind kind = seed % 2 ? PolicyKind::SeedDefault : PolicyKind::FbgemmCuda;
    const DType w = seed % 3 == 0 ? DType::F16 : (seed % 3 == 1 ? DType::F32 : DType::BF16);
    const DType out = seed % 4 == 0 ? DType::F16 : DType::F32;
    std::vector<std::vector<std::int64_t>> bags(5);
    for (auto& b : bags) {
      b.resize(g.range(1, 700));
      for (auto& i : b) i = g.range(0, 15);
    }
    ForwardCase c = single_table_case(w, out, kind, seed % 5 ? PoolingMode::Sum : PoolingMode::Mean,
                                      16, 6, bags, [&](std::int64_t, std::int32_t) {
                                        return 1.0 + g.unit();
                                      });
    const ForwardProblem p = c.view();
    const ForwardEnclosures enc = compute_forward_enclosures(p);
    const double u = float_traits(p.options.policy.accumulation).unit_roundoff;
    const double uo = float_traits(out).unit_roundoff;
    for (std::size_t i = 0; i < enc.enclosures.size(); ++i) {
      const double L = static_cast<double>(bags[i / 6].size());
      const double S = std::fabs(enc.reference[i]);
      const double allowed = 2 * (L + 2) * u * S + 4 * uo * S;
      INFO("seed " << seed << " element " << i << " " << enc.enclosures[i].lo << " "
                   << enc.enclosures[i].hi);
      CHECK(enc.enclosures[i].hi - enc.enclosures[i].lo <= allowed);
    }
  }
}

TEST_CASE("empty bags are exactly zero, NONE rows are copies", "[oracle][semantics]") {
  for (PoolingMode pooling : {PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None}) {
    ForwardCase c = single_table_case(DType::BF16, DType::F16, PolicyKind::SeedDefault, pooling,
                                      4, 3, {{}, {1, 2}, {}, {3}},
                                      [](std::int64_t r, std::int32_t d) {
                                        return (r + 1) * 0.1 + d;  // inexact in BF16
                                      });
    const ForwardProblem p = c.view();
    const ForwardEnclosures enc = compute_forward_enclosures(p);
    if (pooling == PoolingMode::None) {
      REQUIRE(enc.enclosures.size() == 3 * 3);
      for (int q = 0; q < 3; ++q)
        for (int d = 0; d < 3; ++d) {
          const double w = round_to(DType::F16, c.weight(0, c.indices[q], d));
          CHECK(enc.enclosures[q * 3 + d].lo == w);
          CHECK(enc.enclosures[q * 3 + d].hi == w);
        }
    } else {
      for (int b : {0, 2})
        for (int d = 0; d < 3; ++d) {
          CHECK(enc.enclosures[b * 3 + d].lo == 0.0);
          CHECK(enc.enclosures[b * 3 + d].hi == 0.0);
        }
      // a single-lookup bag under SUM/MEAN is the exact copy too (one term, L = 1)
      for (int d = 0; d < 3; ++d) {
        const double w = round_to(DType::F16, c.weight(0, 3, d));
        CHECK(enc.enclosures[9 + d].lo == w);
        CHECK(enc.enclosures[9 + d].hi == w);
      }
    }
  }
}

TEST_CASE("the bounds check runs first, exactly as in the operator", "[oracle][semantics]") {
  // docs/edge-cases.md C01: E=10, D=4, B=2, indices [3, 12, -5, 7], offsets [0, 2, 4].
  auto fill = [](std::int64_t r, std::int32_t d) { return 10.0 * r + d; };
  ForwardCase c = single_table_case(DType::F32, DType::F32, PolicyKind::SeedDefault,
                                    PoolingMode::Sum, 10, 4, {{3, 12}, {-5, 7}}, fill);
  c.options.bounds_check = BoundsCheckMode::Fatal;
  CHECK_THROWS_AS(forward_enclosures(c.view()), BoundsCheckError);
  CHECK_THROWS_AS(emulate_forward(c.view(), SummationOrder::IndexOrder), BoundsCheckError);
  c.options.bounds_check = BoundsCheckMode::Warning;
  const std::vector<Enclosure> e = forward_enclosures(c.view());
  for (int d = 0; d < 4; ++d) {
    CHECK(e[d].lo == 30.0 + 2 * d);       // W[3] + W[0]
    CHECK(e[4 + d].lo == 70.0 + 2 * d);   // W[0] + W[7]
    CHECK(e[4 + d].hi == 70.0 + 2 * d);
  }
  // docs/edge-cases.md C14: trailing indices, last offset repaired to N.
  ForwardCase t = single_table_case(DType::F32, DType::F32, PolicyKind::SeedDefault,
                                    PoolingMode::Sum, 32, 4, {{10, 11}, {20}}, fill);
  t.indices.insert(t.indices.end(), {5, 5, 5});
  t.options.bounds_check = BoundsCheckMode::Warning;
  const std::vector<Enclosure> te = forward_enclosures(t.view());
  CHECK(te[4].lo == 200.0 + 3 * 50.0);
  t.options.bounds_check = BoundsCheckMode::Fatal;
  CHECK_THROWS_AS(forward_enclosures(t.view()), BoundsCheckError);
  // shape errors are InvalidArgument, like the operator
  ForwardCase bad = c;
  bad.offsets.pop_back();
  CHECK_THROWS_AS(forward_enclosures(bad.view()), InvalidArgument);
}

TEST_CASE("non-finite inputs and accumulator overflow", "[oracle][semantics]") {
  SECTION("an infinite weight gives a point at inf; inf - inf gives NaN") {
    ForwardCase c = single_table_case(DType::F32, DType::F32, PolicyKind::SeedDefault,
                                      PoolingMode::Mean, 3, 1, {{0, 2}, {0, 1}, {2}},
                                      [](std::int64_t r, std::int32_t) {
                                        return r == 0 ? kInf : (r == 1 ? -kInf : 1.0);
                                      });
    const std::vector<Enclosure> e = forward_enclosures(c.view());
    CHECK(e[0].lo == kInf);
    CHECK(e[0].hi == kInf);
    CHECK(std::isnan(e[1].lo));
    CHECK(e[2].lo == 1.0);
    std::vector<double> v = emulate_forward(c.view(), SummationOrder::PairwiseTree);
    CHECK(check_forward_values(c.view(), v).passed());
    v[1] = 0.0;
    CHECK(check_forward_values(c.view(), v).failures == 1);
  }
  SECTION("possible FP32 accumulator overflow makes the element unconstrained") {
    ForwardCase c = single_table_case(DType::BF16, DType::F32, PolicyKind::FbgemmCuda,
                                      PoolingMode::Sum, 2, 1, {{0, 0, 1}, {1}},
                                      [](std::int64_t r, std::int32_t) {
                                        return r == 0 ? 0x1.8p127 : -0x1p127;
                                      });
    const std::vector<Enclosure> e = forward_enclosures(c.view());
    CHECK(e[0].lo == -kInf);
    CHECK(e[0].hi == kInf);
    CHECK(e[1].lo == -0x1p127);
    for (SummationOrder o : kAllSummationOrders)
      CHECK(check_forward_values(c.view(), emulate_forward(c.view(), o)).passed());
  }
  SECTION("an FP16 output that overflows is inf") {
    ForwardCase c = single_table_case(DType::F32, DType::F16, PolicyKind::SeedDefault,
                                      PoolingMode::Sum, 1, 1, {{0, 0}},
                                      [](std::int64_t, std::int32_t) { return 40000.0; });
    const std::vector<Enclosure> e = forward_enclosures(c.view());
    CHECK(e[0].lo == kInf);
    CHECK(e[0].hi == kInf);
    CHECK(check_forward_values(c.view(), emulate_forward(c.view(), SummationOrder::IndexOrder))
              .passed());
  }
}

TEST_CASE("underflow: FP32 products of tiny weights stay inside", "[oracle][semantics]") {
  // FP32 weights near the subnormal range times tiny per-sample weights underflow in FP32.
  ForwardCase c = single_table_case(DType::F32, DType::F32, PolicyKind::FbgemmCuda,
                                    PoolingMode::Mean, 3, 2, {{0, 1, 2, 1, 0}, {2, 2, 2}},
                                    [](std::int64_t r, std::int32_t d) {
                                      return std::ldexp(1.0 + 0.3 * r, -120 - 5 * d) *
                                             (r == 1 ? -1 : 1);
                                    });
  c.per_sample_weights = {0x1.3p-20f, 0x1.7p-25f, 3.0f, -0x1p-29f, 0x1.1p-3f, 0x1p-30f, 1.5f,
                          -0x1.9p-27f};
  const ForwardProblem p = c.view();
  const ForwardEnclosures enc = compute_forward_enclosures(p);
  for (SummationOrder o : kAllSummationOrders)
    for (MeanScaling ms : kAllMeanScalings) {
      EmulationOptions eo;
      eo.order = o;
      eo.mean_scaling = ms;
      const CheckReport r = judge_forward(p, enc, emulate_forward(p, eo));
      INFO(to_string(eo) << ": " << r.summary());
      CHECK(r.passed());
    }
}

TEST_CASE("a deliberately wrong FP16-accumulation policy still gets a sound enclosure",
          "[oracle][semantics]") {
  // Policies are plain data: tests may build one with FP16 accumulation. The bound then counts
  // the conversions of FP32 weights and per-sample weights into FP16 (docs/oracle.md §2.2).
  CaseSpec s;
  s.seed = 31;
  s.weights = DType::F32;
  s.output = DType::F32;
  s.pooling = PoolingMode::Mean;
  s.dims = {3};
  s.rows = {5};
  s.batch = 4;
  s.bag_length_mode = 3;
  s.values = ValueMode::Binades;
  s.exponent_spread = 6;
  s.sample_weights = SampleWeightMode::NearOne;
  ForwardCase c = build_case(s);
  c.options.policy.accumulation = DType::F16;
  const ForwardProblem p = c.view();
  const ForwardEnclosures enc = compute_forward_enclosures(p);
  for (SummationOrder o : kAllSummationOrders)
    for (MeanScaling ms : kAllMeanScalings) {
      EmulationOptions eo;
      eo.order = o;
      eo.mean_scaling = ms;
      const CheckReport r = judge_forward(p, enc, emulate_forward(p, eo));
      INFO(to_string(eo) << ": " << r.summary());
      CHECK(r.passed());
    }
  c.options.policy.accumulation = DType::I32;
  CHECK_THROWS_AS(forward_enclosures(c.view()), InvalidArgument);
}
