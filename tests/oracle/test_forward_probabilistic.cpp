// The opt-in probabilistic bound (Higham & Mary 2019): never wider than the worst case, clearly
// sharper on long bags, and conforming emulations on random data stay inside it.
#include <catch2/catch.hpp>

#include <cmath>

#include "oracle_test_support.h"
#include "tbe/errors.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

/// Long bags of random rows with random-sign values over a few binades, FP32 accumulation.
ForwardCase long_random_case(std::uint64_t seed, PoolingMode pooling, DType w) {
  CaseRng g(seed);
  std::vector<std::vector<std::int64_t>> bags(4);
  for (auto& b : bags) {
    b.resize(g.range(2000, 4000));
    for (auto& i : b) i = g.range(0, 63);
  }
  return single_table_case(w, DType::F32, PolicyKind::FbgemmCuda, pooling, 64, 6, bags,
                           [&](std::int64_t, std::int32_t) {
                             return (g.coin() ? -1.0 : 1.0) *
                                    std::ldexp(1.0 + g.unit(), static_cast<int>(g.range(-4, 4)));
                           });
}

EnclosureOptions probabilistic(double p = 1e-9) {
  EnclosureOptions o;
  o.bound = EnclosureOptions::Bound::Probabilistic;
  o.false_alarm_probability = p;
  return o;
}

}  // namespace

TEST_CASE("probabilistic bound: never wider, sharper on long bags", "[oracle][probabilistic]") {
  ForwardCase c = long_random_case(1, PoolingMode::Sum, DType::F32);
  const ForwardProblem p = c.view();
  const ForwardEnclosures wc = compute_forward_enclosures(p);
  double lambda = 0;
  const ForwardEnclosures pr = compute_forward_enclosures(p, probabilistic(), &lambda);
  // 4 bags x 6 columns x L terms; λ = sqrt(2 ln(2·events / 1e-9)) ≈ 7.8
  CHECK(lambda > 7.0);
  CHECK(lambda < 9.0);
  double ratio_sum = 0;
  for (std::size_t i = 0; i < wc.enclosures.size(); ++i) {
    CHECK(pr.enclosures[i].lo >= wc.enclosures[i].lo);
    CHECK(pr.enclosures[i].hi <= wc.enclosures[i].hi);
    CHECK(pr.reference[i] == wc.reference[i]);
    ratio_sum += (pr.enclosures[i].hi - pr.enclosures[i].lo) /
                 (wc.enclosures[i].hi - wc.enclosures[i].lo);
  }
  // γ̃ ≈ λ√k·u versus γ_k ≈ k·u: about 8·√3000/3000 ≈ 0.15 for k ≈ 3000
  CHECK(ratio_sum / static_cast<double>(wc.enclosures.size()) < 0.3);
  // exact elements stay exact points
  ForwardCase ints = single_table_case(DType::F16, DType::F32, PolicyKind::FbgemmCuda,
                                       PoolingMode::Sum, 3, 2, {{0, 1, 2, 2}},
                                       [](std::int64_t r, std::int32_t d) { return r + d; });
  const ForwardEnclosures pe = compute_forward_enclosures(ints.view(), probabilistic());
  CHECK(pe.enclosures[0].lo == 5.0);
  CHECK(pe.enclosures[0].hi == 5.0);
  CHECK_THROWS_AS(compute_forward_enclosures(p, probabilistic(0.0)), InvalidArgument);
  CHECK_THROWS_AS(compute_forward_enclosures(p, probabilistic(1.5)), InvalidArgument);
}

TEST_CASE("probabilistic bound: conforming emulations on random data stay inside",
          "[oracle][probabilistic]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const PoolingMode pooling = seed % 2 ? PoolingMode::Sum : PoolingMode::Mean;
    ForwardCase c = long_random_case(seed, pooling, seed <= 2 ? DType::F32 : DType::BF16);
    const ForwardProblem p = c.view();
    const ForwardEnclosures pr = compute_forward_enclosures(p, probabilistic());
    for (SummationOrder o : {SummationOrder::IndexOrder, SummationOrder::RandomPermutation,
                             SummationOrder::PairwiseTree, SummationOrder::Chunked256}) {
      EmulationOptions eo;
      eo.order = o;
      eo.seed = seed;
      const CheckReport r = judge_forward(p, pr, emulate_forward(p, eo));
      INFO("seed " << seed << " " << to_string(eo) << ": " << r.summary());
      CHECK(r.passed());
    }
  }
}

TEST_CASE("probabilistic bound: catches an error the worst case cannot",
          "[oracle][probabilistic]") {
  ForwardCase c = long_random_case(9, PoolingMode::Sum, DType::F32);
  const ForwardProblem p = c.view();
  const ForwardEnclosures wc = compute_forward_enclosures(p);
  const ForwardEnclosures pr = compute_forward_enclosures(p, probabilistic());
  std::vector<double> v = emulate_forward(p, SummationOrder::IndexOrder);
  // shift element 0 by 60% of the worst-case radius (an FP32 value)
  const double shift = 0.3 * (wc.enclosures[0].hi - wc.enclosures[0].lo);
  v[0] = round_to(DType::F32, wc.reference[0] + shift);
  CHECK(judge_forward(p, wc, v).passed());
  const CheckReport r = judge_forward(p, pr, v);
  INFO(r.summary());
  CHECK(r.failures == 1);
}
