// The backward enclosures are not absurdly wide (exact cases are points, random cases are a few
// rounding units wide), contain the reference, and the special cases (non-finite input, positions
// outside every bag, empty problems) behave as docs/oracle.md "Backward" states.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <limits>

#include "backward_oracle_test_support.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

bool contains(const Enclosure& e, double v) { return e.lo <= v && v <= e.hi; }

}  // namespace

TEST_CASE("C09 enclosures: exact G and momentum are points, weights a couple of ulps",
          "[oracle][backward][enclosure]") {
  for (DType wdt : {DType::F32, DType::F16, DType::BF16}) {
    for (PolicyKind kind : {PolicyKind::SeedDefault, PolicyKind::FbgemmCuda}) {
      INFO(to_string(wdt) << " " << to_string(kind));
      BackwardCase c = c09_case(wdt, kind);
      const BackwardEnclosures enc = compute_backward_enclosures(c.view());
      REQUIRE(enc.row_grad.size() == 2);
      for (const auto& g : enc.row_grad) {
        CHECK(g.lo == 2.0);
        CHECK(g.hi == 2.0);
      }
      CHECK(enc.momentum[0].lo == 4.0);
      CHECK(enc.momentum[0].hi == 4.0);
      for (const auto& w : enc.weights) {
        CHECK(contains(w, 0.5));
        CHECK(w.hi - w.lo <= 2 * 0x1p-24);  // (x ≈ 0.5 + 1.25e-9: at most the FP32 ulp above)
        CHECK_FALSE(contains(w, 0.5 - 0.5 / std::sqrt(2.0)));
      }
    }
  }
}

TEST_CASE("random problems: the reference lies inside, widths stay within a few rounding units",
          "[oracle][backward][enclosure]") {
  prop_n("reference inside, width bounded", 150, [] {
    BackwardSpec spec = *gen_backward_spec();
    spec.forward.values = ValueMode::Binades;
    spec.grads = ValueMode::Binades;
    spec.optimizer.max_norm = 0;
    BackwardCase c = build_backward_case(spec);
    const BackwardProblem p = c.view();
    const BackwardEnclosures enc = compute_backward_enclosures(p);
    const BackwardReference& ref = enc.reference;
    const DType acc = c.forward.options.policy.accumulation;
    const double u = float_traits(acc).unit_roundoff;
    const double eta = float_traits(acc).min_subnormal;
    const OutputLayout layout = make_output_layout(p.forward);
    const bool none = c.forward.options.pooling == PoolingMode::None;
    const bool mean = c.forward.options.pooling == PoolingMode::Mean;
    for (std::size_t k = 0; k < ref.run_row.size(); ++k) {
      const double n = static_cast<double>(ref.transpose.run_lengths[k]);
      const std::int64_t D = c.forward.dims[ref.run_table[k]];
      for (std::int64_t i = ref.run_col_offset[k]; i < ref.run_col_offset[k + 1]; ++i) {
        const Enclosure& g = enc.row_grad[i];
        if (g.lo == -std::numeric_limits<double>::infinity()) continue;  // overflow guard
        RC_ASSERT(contains(g, ref.row_grad[i]));
        // A = Σ|c_p·g_p| of this column, by hand from the transpose
        const std::int64_t d = i - ref.run_col_offset[k];
        double A = 0;
        for (std::int64_t j = ref.transpose.run_offsets[k]; j < ref.transpose.run_offsets[k + 1]; ++j) {
          const std::int64_t q = ref.transpose.sorted_positions[j];
          const std::int64_t bag = ref.transpose.position_bag[q];
          const double L = static_cast<double>(ref.repair.offsets[bag + 1] - ref.repair.offsets[bag]);
          const double s = c.forward.per_sample_weights.empty() ? 1.0 : c.forward.per_sample_weights[q];
          const double gq = none ? c.grad(q * D + d) : c.grad(layout.bag_output_offset(bag) + d);
          A += std::fabs(s * gq / (mean ? L : 1.0));
        }
        // radius = γ_k·A (any order in acc) + γ64(n+2)·A (the FP64 centre), k <= n + 2: never
        // more than 3·(n + 3)·u·A plus underflow terms (the centre term matters when acc = F64)
        RC_ASSERT((g.hi - g.lo) / 2 <= 3 * (n + 3) * u * A + 8 * (n + 1) * eta);
        const Enclosure& x = enc.exact[i];
        if (x.lo == -std::numeric_limits<double>::infinity()) continue;
        RC_ASSERT(contains(x, ref.updated[i]));
        RC_ASSERT(contains(enc.weights[i], round_to(c.forward.weights_dtype, ref.updated[i])));
      }
      if (!enc.momentum.empty() && std::isfinite(enc.momentum[k].lo))
        RC_ASSERT(contains(enc.momentum[k], ref.momentum[k]));
    }
  });
}

TEST_CASE("stored-row width: FP32 SGD with one lookup is at most 2 ulps of the result",
          "[oracle][backward][enclosure]") {
  // x = w − lr·G with G = g exact: the only roundings are lr·G and the subtraction in FP32.
  BackwardCase c;
  c.forward = single_table_case(DType::F32, DType::F32, PolicyKind::FbgemmCuda, PoolingMode::Sum,
                                2, 3, {{1}}, [](auto, auto d) { return 0.3 + d; });
  c.options.optimizer.learning_rate = 0.1;
  c.resize_grad_output();
  c.set_grad(0, 0.7);
  c.set_grad(1, -1.3);
  c.set_grad(2, 1e-3);
  const BackwardEnclosures enc = compute_backward_enclosures(c.view());
  for (std::size_t d = 0; d < 3; ++d) {
    const Enclosure& w = enc.weights[d];
    const double x = enc.reference.updated[d];
    INFO("column " << d << ": [" << w.lo << ", " << w.hi << "] around " << x);
    CHECK(contains(w, round_to(DType::F32, x)));
    const double ulp = std::ldexp(1.0, std::ilogb(x) - 23);
    CHECK(w.hi - w.lo <= 2 * ulp);
  }
}

TEST_CASE("special cases: non-finite input is unconstrained, psw outside bags is 0",
          "[oracle][backward][enclosure]") {
  BackwardCase c;
  c.forward = single_table_case(DType::F16, DType::F32, PolicyKind::SeedDefault, PoolingMode::Sum,
                                3, 2, {{1}, {2}}, [](auto r, auto) { return r + 1.0; });
  c.forward.indices = {0, 1, 2};  // position 0 belongs to no bag
  c.forward.offsets = {1, 2, 3};
  c.forward.per_sample_weights = {4, 1, 1};
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.reset_momentum();
  c.resize_grad_output();
  c.set_grad(0, std::numeric_limits<double>::quiet_NaN());
  c.set_grad(1, 1.0);
  c.set_grad(2, 1.0);
  c.set_grad(3, 1.0);
  const BackwardEnclosures enc = compute_backward_enclosures(c.view());
  // run 0 = row 1 (NaN grad): unconstrained; run 1 = row 2: finite
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(enc.weights[0].lo == -inf);
  CHECK(enc.weights[1].hi == inf);
  CHECK(enc.momentum[0].lo == -inf);
  CHECK(std::isfinite(enc.weights[2].lo));
  CHECK(std::isfinite(enc.momentum[1].hi));
  CHECK(enc.per_sample_weight_grad[0].lo == 0.0);
  CHECK(enc.per_sample_weight_grad[0].hi == 0.0);
  CHECK(enc.per_sample_weight_grad[1].lo == -inf);  // <NaN, W> : unconstrained
  // the reference's NaN row passes (anything does), the finite row is judged
  const ReferenceRun ref = run_reference(c);
  CHECK(judge_backward(c.view(), enc, ref.view()).passed());
}

TEST_CASE("an FP32 overflow in the optimizer makes the run unconstrained",
          "[oracle][backward][enclosure]") {
  // G = 2^100 (D = 2): Σ G² = 2^201 overflows FP32 (the FP64 reference does not).
  BackwardCase c;
  c.forward = single_table_case(DType::F32, DType::F32, PolicyKind::FbgemmCuda, PoolingMode::Sum,
                                2, 2, {{0}}, [](auto, auto) { return 1.0; });
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.reset_momentum();
  c.resize_grad_output();
  c.set_grad(0, 0x1p100);
  c.set_grad(1, 0x1p100);
  const BackwardEnclosures enc = compute_backward_enclosures(c.view());
  CHECK(enc.weights[0].lo == -std::numeric_limits<double>::infinity());
  CHECK(enc.momentum[0].hi == std::numeric_limits<double>::infinity());
  // and the FP32 emulation (momentum inf, mult 0) is accepted
  const BackwardEmulationResult e = emulate_backward(c.view());
  CHECK(std::isinf(e.momentum[0]));
  CHECK(judge_backward(c.view(), enc, e.view()).passed());
}

TEST_CASE("no lookups: empty reports pass, untouched weights are still checked",
          "[oracle][backward][enclosure]") {
  BackwardCase c;
  c.forward = single_table_case(DType::BF16, DType::F32, PolicyKind::SeedDefault, PoolingMode::Mean,
                                5, 3, {{}, {}}, [](auto r, auto d) { return r * d; });
  c.resize_grad_output();
  const BackwardProblem p = c.view();
  const BackwardEnclosures enc = compute_backward_enclosures(p);
  CHECK(enc.weights.empty());
  ReferenceRun r = run_reference(c);
  const BackwardCheckReport ok = judge_backward(p, enc, r.view());
  CHECK(ok.passed());
  store_from_double(DType::BF16, r.weights.data(), 7, 100.0);
  const BackwardCheckReport bad = judge_backward(p, enc, r.view());
  INFO(bad.summary());
  CHECK(bad.failures() == 1);
}
