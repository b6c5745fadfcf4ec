// The enclosure oracle for the TBE backward + exact optimizer (docs/backward.md "The computation",
// docs/oracle.md §B.0; derivation in docs/oracle.md "Backward"). For every touched row it
// encloses G_r, the new momentum and the stored weights that any conforming implementation may
// produce under the problem's policy (any summation order, chunking or second-level reduction),
// and checks that untouched rows and momenta are bitwise unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tbe/backward.h"
#include "tbe/oracle/forward_oracle.h"

namespace tbe::oracle {

/// Enclosures of one backward call, indexed like BackwardReference (per run k, column d at
/// reference.run_col_offset[k] + d).
struct BackwardEnclosures {
  BackwardReference reference;
  std::vector<Enclosure> row_grad;  ///< [Σ D_k] G_r in the policy's accumulation type
  std::vector<Enclosure> momentum;  ///< [R] stored FP32 momentum (Adagrad; else empty)
  /// [Σ D_k] stored weights: RNE -> both ends rounded to nearest; SR -> [RD(lo), RU(hi)] and the
  /// stored value must also be RD or RU of some point of the pre-rounding enclosure `exact`.
  std::vector<Enclosure> weights;
  std::vector<Enclosure> exact;     ///< [Σ D_k] updated value before storage rounding
  std::vector<Enclosure> per_sample_weight_grad;  ///< [N] (weighted only)
};

/// Enclosures of p (same errors as backward_reference_fp64).
BackwardEnclosures compute_backward_enclosures(const BackwardProblem& p);
/// The same from `reference` = backward_reference_fp64(p), computed by the caller (so a suite can
/// time the reference apart, or reuse it); the result is identical.
BackwardEnclosures compute_backward_enclosures(const BackwardProblem& p,
                                               BackwardReference reference);

/// A backward result copied to the host: the whole weights buffer after the call ([Σ E_t·D_t] of
/// the weights dtype), the whole momentum buffer (FP32 [Σ E_t]; nullptr for SGD) and the
/// per-sample-weight gradients (FP32 [N]; nullptr if not computed). `weights_before` and
/// `momentum_before` are p.forward.tables.weights and p.momentum (host).
struct BackwardResultView {
  const void* weights = nullptr;
  const float* momentum = nullptr;
  const float* per_sample_weight_grad = nullptr;
};

/// The judgement of one backward call: one CheckReport per checked tensor. Coordinates: for
/// weights, feature = table, row = row inside the table, column = d; for momentum, column = -1;
/// for per-sample-weight gradients, row = lookup position. Untouched rows/momenta that changed are
/// failures of the "weights.untouched" / "momentum.untouched" reports.
struct BackwardCheckReport {
  std::vector<CheckReport> reports;  ///< "weights", "weights.untouched", "momentum", ...
  bool passed() const;
  std::int64_t failures() const;
  std::string summary() const;  ///< one line per report
};

/// Judges `result` against `enc`. Never throws on bad values (NaN/Inf are failures); throws
/// InvalidArgument if a needed buffer is missing.
BackwardCheckReport judge_backward(const BackwardProblem& p, const BackwardEnclosures& enc,
                                   const BackwardResultView& result);

/// compute_backward_enclosures + judge_backward.
BackwardCheckReport check_backward(const BackwardProblem& p, const BackwardResultView& result);

/// Aggregate stochastic-rounding test (docs/oracle.md "B.7 Stochastic rounding"): over every
/// stored element whose reference value x is not representable and whose pre-rounding enclosure
/// (enc.exact) lies inside [RD(x), RU(x)], the signed rounding error
/// e = (stored - x) / (RU(x) - RD(x)) has mean within ±b_i (b_i: the enclosure's reach from x in
/// ulps: the kernel rounds its own pre-rounding value) and variance f(1 - f) under unbiased SR
/// (f = (x - RD(x)) / (RU(x) - RD(x))); z = sign(Σ e)·max(0, |Σ e| − Σ b_i) / sqrt(Σ f(1 - f)).
/// Passes iff |z| <= z_limit.
/// A kernel that rounds to nearest fails it on data whose fractions are skewed (e.g. updates of
/// 0.3 ulp), which is how the tests drive it.
struct StochasticRoundingTest {
  std::int64_t samples = 0;   ///< elements with a non-representable reference value
  std::int64_t excluded = 0;  ///< non-representable, but the pre-rounding enclosure passes a neighbour
  double bias_bound = 0;      ///< Σ b_i: how far Σ e's mean may be from 0 under unbiased SR
  double mean_error_ulps = 0; ///< Σ e / samples
  double variance = 0;        ///< Σ f(1 - f): the variance of Σ e under unbiased SR
  double z = 0;
  double z_limit = 5.0;
  bool passed() const;
  std::string summary() const;
};
StochasticRoundingTest stochastic_rounding_test(const BackwardProblem& p,
                                                const BackwardEnclosures& enc,
                                                const void* weights_after, double z_limit = 5.0);

}  // namespace tbe::oracle
