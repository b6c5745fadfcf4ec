// Backward enclosures, their judgement and the SR z-test (backward_oracle.h). The derivation of
// every bound below is in docs/oracle.md "Backward"; section names are cited as [doc §B...].
#include "tbe/oracle/backward_oracle.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "float_model.h"
#include "tbe/backward_case.h"
#include "tbe/errors.h"
#include "tbe/host_case.h"

namespace tbe::oracle {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kU64 = DTypeTraits<DType::F64>::unit_roundoff;
constexpr double kMinSub64 = DTypeTraits<DType::F64>::min_subnormal;
constexpr double kTiny = 0x1p-900;  ///< below this an FMA remainder may be inexact (underflow)

double gamma_k(double k, double u) {
  const double ku = k * u;
  if (!(ku < 0.5)) return kInf;
  return ku / (1.0 - ku);
}

Enclosure unconstrained() { return {-kInf, kInf}; }
bool is_unconstrained(const Enclosure& e) { return e.lo == -kInf && e.hi == kInf; }

// ---- directed rounding of exact results [doc §B.3] ------------------------------------------------

/// An exact real x = s + e with s = RN64(x); only the sign of e is used. `known` is false when the
/// remainder may be inexact (results near FP64 underflow): then x is only known to lie between
/// the FP64 neighbours of s.
struct Exact {
  double s = 0, e = 0;
  bool known = true;
};

Exact add_exact(double a, double b) {  // TwoSum (Knuth): exact for finite a + b
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
Exact mul_exact(double a, double b) {
  const double s = a * b;
  if (a == 0.0 || b == 0.0) return {s, 0.0};
  if (std::fabs(s) < kTiny) return {s, 0.0, false};
  return {s, std::fma(a, b, -s)};  // the product error, exact above underflow
}
Exact div_exact(double a, double b) {
  const double s = a / b;
  if (a == 0.0) return {s, 0.0};
  if (std::fabs(s) < kTiny || std::fabs(a) < kTiny) return {s, 0.0, false};
  const double r = std::fma(-s, b, a);  // a − s·b, exact for a correctly rounded quotient
  return {s, b > 0 ? r : -r};           // sign(a/b − s) = sign(r / b)
}
Exact sqrt_exact(double a) {
  const double s = std::sqrt(a);
  if (a == 0.0) return {s, 0.0};
  if (a < kTiny) return {s, 0.0, false};
  return {s, std::fma(-s, s, a)};  // a − s², exact for a correctly rounded square root
}

/// Largest value of t <= x and smallest >= x for the exact x. No value of t lies strictly
/// between s and its FP64 neighbour on e's side, so RD_t(x) = RD_t(nextdown(s)) when e < 0.
double rd(DType t, const Exact& x) {
  double s = x.s;
  if (!x.known || x.e < 0) s = detail::next_down64(s);
  if (std::isnan(s)) return -kInf;
  return detail::round_down(t, s);
}
double ru(DType t, const Exact& x) {
  double s = x.s;
  if (!x.known || x.e > 0) s = detail::next_up64(s);
  if (std::isnan(s)) return kInf;
  return detail::round_up(t, s);
}

/// Interval arithmetic with one rounding to `t` per operation (every value of an interval is a
/// possible operand; results enclose RN_t(op) for every operand pair, and any wider evaluation).
/// `bad` records an overflow (an infinite end): the run is then unconstrained [doc §B.5].
struct IvArith {
  DType t = DType::F32;
  bool bad = false;

  Enclosure check(Enclosure r) {
    if (!std::isfinite(r.lo) || !std::isfinite(r.hi)) bad = true;
    return r;
  }
  Enclosure add(Enclosure a, Enclosure b) {
    return check({rd(t, add_exact(a.lo, b.lo)), ru(t, add_exact(a.hi, b.hi))});
  }
  Enclosure sub(Enclosure a, Enclosure b) {
    return check({rd(t, add_exact(a.lo, -b.hi)), ru(t, add_exact(a.hi, -b.lo))});
  }
  /// A point operand (lo and hi the same bits) has one corner, not two: the same products,
  /// half the roundings.
  Enclosure mul(Enclosure a, Enclosure b) {
    double lo = kInf, hi = -kInf;
    auto corners = [](const Enclosure& e) {
      return std::bit_cast<std::uint64_t>(e.lo) == std::bit_cast<std::uint64_t>(e.hi) ? 1 : 2;
    };
    const int na = corners(a), nb = corners(b);
    const double xs[2] = {a.lo, a.hi}, ys[2] = {b.lo, b.hi};
    for (int i = 0; i < na; ++i)
      for (int j = 0; j < nb; ++j) {
        const Exact p = mul_exact(xs[i], ys[j]);
        lo = std::min(lo, rd(t, p));
        hi = std::max(hi, ru(t, p));
      }
    return check({lo, hi});
  }
  /// b must not contain 0.
  Enclosure div(Enclosure a, Enclosure b) {
    if (!(b.lo > 0 || b.hi < 0)) {
      bad = true;
      return unconstrained();
    }
    double lo = kInf, hi = -kInf;
    for (double x : {a.lo, a.hi})
      for (double y : {b.lo, b.hi}) {
        const Exact q = div_exact(x, y);
        lo = std::min(lo, rd(t, q));
        hi = std::max(hi, ru(t, q));
      }
    return check({lo, hi});
  }
  /// a.lo >= 0 (a sum of squares and momenta).
  Enclosure sqrt(Enclosure a) {
    if (!(a.lo >= 0)) {
      bad = true;
      return unconstrained();
    }
    return check({rd(t, sqrt_exact(a.lo)), ru(t, sqrt_exact(a.hi))});
  }

  /// Σ_d y_d² (optionally divided by n), the y_d intervals of t-values, summed in t in any order:
  /// a reduction of n non-negative terms with k = n − 1 + 1 (square) [+ 2 (1/n)] roundings
  /// [doc §B.4]. Exact (a point) when every square and partial sum is a value of t.
  Enclosure sum_of_squares(const Enclosure* y, std::int64_t n, bool mean) {
    const FloatTraits tr = float_traits(t);
    double s_lo = 0, s_hi = 0;
    bool points = true, all_repr = true;
    int min_lsb = INT_MAX;
    for (std::int64_t d = 0; d < n; ++d) {
      const double a = y[d].lo * y[d].lo, b = y[d].hi * y[d].hi;  // exact: FP32 operands
      const double lo = (y[d].lo <= 0 && y[d].hi >= 0) ? 0.0 : std::min(a, b);
      const double hi = std::max(a, b);
      s_lo += lo;
      s_hi += hi;
      if (lo != hi) points = false;
      if (hi != 0) {
        if (!detail::representable(t, hi)) all_repr = false;
        min_lsb = std::min(min_lsb, detail::lsb_exponent(hi));
      }
    }
    int log2n = 0;
    const bool pow2 = std::frexp(static_cast<double>(n), &log2n) == 0.5;
    log2n -= 1;
    if (points && all_repr && (!mean || pow2) &&
        (s_hi == 0 || (s_hi < std::ldexp(1.0, tr.digits + min_lsb) &&
                       min_lsb - (mean ? log2n : 0) >= tr.min_subnormal_exponent))) {
      const double v = mean ? s_hi / static_cast<double>(n) : s_hi;  // exact
      return check({v, v});
    }
    const double k = static_cast<double>(n - 1 + 1 + (mean ? 2 : 0));
    const double g = gamma_k(k, tr.unit_roundoff);
    const double eta = (static_cast<double>(n) + (mean ? 1 : 0)) * tr.min_subnormal * (1 + g);
    const double slack = gamma_k(static_cast<double>(n) + 10, kU64);  // FP64 evaluation
    double lo = s_lo * (1 - g) * (1 - slack), hi = s_hi * (1 + g) * (1 + slack);
    if (mean) {
      lo /= static_cast<double>(n);
      hi /= static_cast<double>(n);
    }
    lo = std::max(0.0, detail::next_down64(lo * (1 - slack) - eta));
    hi = detail::next_up64(hi * (1 + slack) + eta);
    return check({detail::round_down(t, lo), detail::round_up(t, hi)});
  }
};

// ---- reductions in the accumulation type [doc §B.1, §B.2] -------------------------------------------

/// The accumulation model of the policy.
struct AccModel {
  DType acc = DType::F64;
  double u = 0, eta = 0, max_acc = 0;
  int digits = 0;
};
AccModel make_acc(DType acc) {
  const FloatTraits tr = float_traits(acc);
  return {acc, tr.unit_roundoff, tr.min_subnormal, tr.max_finite, tr.digits};
}

/// Terms of one reduction: Σ|t|, exactness data, non-finite flag.
struct TermStats {
  double absum = 0;
  int min_lsb = INT_MAX;
  bool all_repr = true;  ///< every term (and intermediate, see callers) is a value of acc
  bool nonfinite = false;
  void add(DType acc, double t) {
    if (!std::isfinite(t)) {
      nonfinite = true;
      return;
    }
    absum += std::fabs(t);
    if (t != 0.0) {
      min_lsb = std::min(min_lsb, detail::lsb_exponent(t));
      if (!detail::representable(acc, t)) all_repr = false;
    }
  }
};

/// Enclosure of a reduction of n terms computed in acc with k = n − 1 + extra roundings and at
/// most n_eta underflowing products, around the FP64 centre `center` (error <= γ64(n+2)·A)
/// [doc §B.1]. `exact_ok`: the per-term operations are exact whenever the terms are acc values.
/// The factors that depend on (n, extra, n_eta) only are computed once per reduction shape (a run's
/// D columns share them); enclose() evaluates the same expressions in the same order as one
/// call with all arguments would.
struct ReductionBound {
  AccModel m;
  double g = 0, eta = 0, g64 = 0, floor64 = 0, widen = 0;
  bool exact_ok = false;
  ReductionBound(const AccModel& model, double n, double extra, double n_eta, bool exact)
      : m(model),
        g(gamma_k(n - 1 + extra, model.u)),
        eta(n_eta * model.eta * (1 + g)),
        g64(gamma_k(n + 2, kU64)),
        floor64((n + 3) * kMinSub64),
        widen(1 + 4 * gamma_k(n + 10, kU64)),
        exact_ok(exact) {}
  Enclosure enclose(double center, const TermStats& st) const {
    if (st.nonfinite || !std::isfinite(center)) return unconstrained();
    if (!(st.absum * (1 + g) + eta < m.max_acc)) return unconstrained();
    if (st.absum == 0.0) return {0.0, 0.0};
    if (exact_ok && st.all_repr && st.absum < std::ldexp(1.0, m.digits + st.min_lsb))
      return {center, center};
    const double A = st.absum;
    const double R = (g * A + eta + g64 * A + floor64) * widen;
    if (!std::isfinite(R)) return unconstrained();
    return {detail::next_down64(center - R), detail::next_up64(center + R)};
  }
};

Enclosure reduction_enclosure(const AccModel& m, double center, const TermStats& st, double n,
                              double extra, double n_eta, bool exact_ok) {
  return ReductionBound(m, n, extra, n_eta, exact_ok).enclose(center, st);
}

bool is_pow2(double L) {
  int e = 0;
  return L > 0 && std::frexp(L, &e) == 0.5;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

// ---- enclosures --------------------------------------------------------------------------------------

BackwardEnclosures compute_backward_enclosures(const BackwardProblem& p) {
  return compute_backward_enclosures(p, backward_reference_fp64(p));  // validate + bounds check
}

BackwardEnclosures compute_backward_enclosures(const BackwardProblem& p,
                                               BackwardReference reference) {
  BackwardEnclosures enc;
  enc.reference = std::move(reference);
  const BackwardReference& ref = enc.reference;
  const Transpose& tr = ref.transpose;
  const ForwardProblem& fp = p.forward;
  const TableBatchView& tb = fp.tables;
  const PrecisionPolicy& pol = fp.options.policy;
  const OutputLayout layout = make_output_layout(fp);
  const std::vector<std::int64_t>& off = ref.repair.offsets;
  const bool none = fp.options.pooling == PoolingMode::None;
  const bool mean = fp.options.pooling == PoolingMode::Mean;
  const float* psw = fp.lookups.per_sample_weights;
  const bool weighted = psw != nullptr;
  const AccModel am = make_acc(pol.accumulation);
  const DType out_t = pol.output;
  const DType opt_t = pol.optimizer_state;  // the optimizer's arithmetic type (F32) [doc §B.3]
  const DType wt = tb.dtype;
  const bool sr = pol.write_back == RoundingMode::Stochastic && wt != DType::F32;
  // Inputs that do not embed in acc are converted: one more rounding per term [doc §B.1].
  const int conv_g = (detail::embeds(out_t, am.acc) ? 0 : 1) +
                     (weighted && !detail::embeds(DType::F32, am.acc) ? 1 : 0);
  const int conv_dot = (detail::embeds(out_t, am.acc) ? 0 : 1) + (detail::embeds(wt, am.acc) ? 0 : 1);

  const OptimizerConfig& oc = p.options.optimizer;
  const bool adagrad = oc.kind == OptimizerKind::ExactRowwiseAdagrad;
  const double lr = effective_hyper_parameter(oc.learning_rate);
  const double eps = effective_hyper_parameter(oc.eps);
  const double wd = effective_hyper_parameter(oc.weight_decay);
  const double max_norm = effective_hyper_parameter(oc.max_norm);
  const double max_grad = effective_hyper_parameter(oc.max_gradient);
  // FP32 grad_output (the common case) is read directly; other types through load_as_double.
  const float* grad32 =
      out_t == DType::F32 ? static_cast<const float*>(p.grad_output) : nullptr;
  auto grad = [&](std::int64_t i) {
    const double g = grad32 != nullptr ? static_cast<double>(grad32[i])
                                       : load_as_double(out_t, p.grad_output, i);
    if (max_grad > 0.0) {
      if (g > max_grad) return max_grad;
      if (g < -max_grad) return -max_grad;
    }
    return g;
  };
  const FloatLoader W(wt, tb.weights);

  std::vector<std::int64_t> bag_out(static_cast<std::size_t>(none ? 0 : layout.num_bags));
  if (!none)
    for (std::int64_t k = 0; k < layout.num_bags; ++k) bag_out[k] = layout.bag_output_offset(k);

  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());
  const std::int64_t cols = ref.run_col_offset[R];
  enc.row_grad.assign(static_cast<std::size_t>(cols), Enclosure{});
  enc.exact.assign(static_cast<std::size_t>(cols), Enclosure{});
  enc.weights.assign(static_cast<std::size_t>(cols), Enclosure{});
  if (adagrad) enc.momentum.assign(static_cast<std::size_t>(R), Enclosure{});

  const std::int64_t work = (static_cast<std::int64_t>(tr.sorted_positions.size()) + R) *
                           std::max<std::int64_t>(cols / std::max<std::int64_t>(R, 1), 1);
#pragma omp parallel if (detail::worth_parallel(work))
  {
    std::vector<TermStats> st(static_cast<std::size_t>(kMaxD));
    std::vector<Enclosure> G32(static_cast<std::size_t>(kMaxD)), gp(static_cast<std::size_t>(kMaxD)),
        x(static_cast<std::size_t>(kMaxD));
#pragma omp for schedule(dynamic, 8)
    for (std::int64_t k = 0; k < R; ++k) {
      const std::int64_t t = ref.run_table[k];
      const std::int64_t D = tb.dims[t];
      const std::int64_t row = tb.table_offsets[t] + ref.run_row[k] * D;
      const std::int64_t c0 = ref.run_col_offset[k];
      const std::int64_t n = tr.run_lengths[k];

      // G_r: a reduction of SL terms c_p·g_p in acc [doc §B.1].
      std::fill_n(st.begin(), D, TermStats{});
      bool exact_ok = conv_g == 0;
      for (std::int64_t i = tr.run_offsets[k]; i < tr.run_offsets[k + 1]; ++i) {
        const std::int64_t q = tr.sorted_positions[i];
        if (none) {
          for (std::int64_t d = 0; d < D; ++d) st[d].add(am.acc, grad(q * D + d));
          continue;
        }
        const std::int64_t bag = tr.position_bag[q];
        const double L = static_cast<double>(off[bag + 1] - off[bag]);
        const double sw = weighted ? static_cast<double>(psw[q]) : 1.0;
        if (mean && !is_pow2(L)) exact_ok = false;
        for (std::int64_t d = 0; d < D; ++d) {
          const double g = grad(bag_out[bag] + d);
          const double wg = sw * g;  // exact in FP64
          double term = wg;
          if (mean) {
            term = wg / L;
            if (exact_ok && (!detail::representable(am.acc, g / L) ||
                             !detail::representable(am.acc, sw / L)))
              exact_ok = false;
          }
          if (weighted && exact_ok && std::isfinite(wg) && !detail::representable(am.acc, wg))
            exact_ok = false;
          st[d].add(am.acc, term);
        }
      }
      const double extra = (weighted ? 1 : 0) + (mean ? 2 : 0) + conv_g;
      const double n_eta = static_cast<double>(n) * ((weighted ? 1 : 0) + (mean ? 1 : 0) + conv_g);
      bool run_bad = false;
      const ReductionBound bound(am, static_cast<double>(n), extra, n_eta, exact_ok);
      for (std::int64_t d = 0; d < D; ++d) {
        const Enclosure e = bound.enclose(ref.row_grad[c0 + d], st[d]);
        enc.row_grad[c0 + d] = e;
        if (is_unconstrained(e)) run_bad = true;
        // The optimizer reads G in its own type: RN_opt(Ĝ) [doc §B.3].
        G32[d] = {detail::round_down(opt_t, e.lo), detail::round_up(opt_t, e.hi)};
      }

      // The optimizer in opt_t, one rounding per operation [doc §B.3].
      IvArith A{opt_t};
      Enclosure m_new{};
      if (!adagrad) {
        for (std::int64_t d = 0; d < D; ++d) {
          const double w = W(row + d);
          x[d] = A.sub({w, w}, A.mul({lr, lr}, G32[d]));
        }
      } else {
        const WeightDecayMode mode = oc.weight_decay_mode;
        for (std::int64_t d = 0; d < D; ++d) {
          const double w = W(row + d);
          gp[d] = mode == WeightDecayMode::L2 ? A.add(G32[d], A.mul({wd, wd}, {w, w})) : G32[d];
        }
        const Enclosure msq = A.sum_of_squares(gp.data(), D, /*mean=*/true);
        const double m_old = static_cast<double>(p.momentum[tr.linear_ids[k]]);
        if (!std::isfinite(m_old)) run_bad = true;
        m_new = A.add({m_old, m_old}, msq);
        const Enclosure den = A.add(A.sqrt(m_new), {eps, eps});
        const Enclosure mult = A.div({lr, lr}, den);
        Enclosure corr{1.0, 1.0};
        if (mode == WeightDecayMode::L2) corr = A.sub({1.0, 1.0}, A.mul(mult, {wd, wd}));
        if (mode == WeightDecayMode::Decoupled)
          corr = A.sub({1.0, 1.0}, A.mul({lr, lr}, {wd, wd}));
        for (std::int64_t d = 0; d < D; ++d) {
          const double w = W(row + d);
          x[d] = A.sub(A.mul(corr, {w, w}), A.mul(mult, G32[d]));
        }
      }
      // max_norm: ‖x‖ computed in opt_t; scale by max_norm/‖x‖ only if ‖x‖ > max_norm [doc §B.3].
      if (max_norm > 0.0 && !A.bad) {
        const Enclosure norm = A.sqrt(A.sum_of_squares(x.data(), D, /*mean=*/false));
        if (norm.hi > max_norm) {
          // only norms above max_norm scale: divide by [max(norm.lo, max_norm), norm.hi]
          const Enclosure scale =
              A.div({max_norm, max_norm}, {std::max(norm.lo, max_norm), norm.hi});
          // Scaling happens only when the computed norm exceeds max_norm, so scale <= 1; the
          // unscaled row stays possible while norm.lo <= max_norm.
          const Enclosure s{scale.lo, norm.lo > max_norm ? scale.hi : 1.0};
          for (std::int64_t d = 0; d < D; ++d) x[d] = A.mul(x[d], s);
        }
      }
      for (std::int64_t d = 0; d < D; ++d)
        if (!std::isfinite(W(row + d))) run_bad = true;
      run_bad = run_bad || A.bad;

      if (adagrad) enc.momentum[k] = run_bad ? unconstrained() : m_new;
      for (std::int64_t d = 0; d < D; ++d) {
        if (run_bad) {
          enc.exact[c0 + d] = unconstrained();
          enc.weights[c0 + d] = unconstrained();
          continue;
        }
        enc.exact[c0 + d] = x[d];
        // Storage [doc §B.3]: FP32 rows are already opt_t values; RNE and SR are monotone
        // per end; SR may pick either neighbour of any point of x.
        if (wt == DType::F32 || wt == opt_t)
          enc.weights[c0 + d] = x[d];
        else if (sr)
          enc.weights[c0 + d] = {round_down_to(wt, x[d].lo), round_up_to(wt, x[d].hi)};
        else
          enc.weights[c0 + d] = {round_to(wt, x[d].lo), round_to(wt, x[d].hi)};
      }
    }
  }

  // Per-sample-weight gradients: a reduction of D products in acc, times 1/L, stored FP32
  // [doc §B.2]. Positions outside every bag are exactly 0.
  if (weighted) {
    const std::int64_t N = fp.lookups.num_indices;
    enc.per_sample_weight_grad.assign(static_cast<std::size_t>(N), Enclosure{0.0, 0.0});
#pragma omp parallel for schedule(dynamic, 256) if (detail::worth_parallel(N * layout.total_dim))
    for (std::int64_t q = 0; q < N; ++q) {
      const std::int64_t bag = tr.position_bag[q];
      if (bag < 0) continue;
      const std::int64_t t = tb.feature_table_map[layout.feature_of_bag(bag)];
      const std::int64_t D = tb.dims[t];
      const std::int64_t row = tb.table_offsets[t] + ref.repair.indices[q] * D;
      const double L = static_cast<double>(off[bag + 1] - off[bag]);
      TermStats ts;
      bool exact_ok = conv_dot == 0 && (!mean || is_pow2(L));
      for (std::int64_t d = 0; d < D; ++d) {
        const double g = grad(bag_out[bag] + d);
        const double prod = g * W(row + d);  // exact in FP64
        ts.add(am.acc, prod);
        if (mean && exact_ok && std::isfinite(prod) &&
            (!detail::representable(am.acc, prod / L) || !detail::representable(am.acc, g / L)))
          exact_ok = false;
      }
      const double extra = 1 + (mean ? 2 : 0) + conv_dot;
      const double n_eta = static_cast<double>(D) * (1 + (mean ? 1 : 0) + conv_dot) + (mean ? 1 : 0);
      TermStats scaled = ts;  // Σ|t|/L is the A of the scaled result
      if (mean) {
        scaled.absum = ts.absum / L * (1 + 2 * kU64);
        int e = 0;
        std::frexp(L, &e);
        if (exact_ok && scaled.min_lsb != INT_MAX) scaled.min_lsb -= e - 1;  // L = 2^(e-1)
      }
      const Enclosure e = reduction_enclosure(am, ref.per_sample_weight_grad[q], scaled,
                                              static_cast<double>(D), extra, n_eta, exact_ok);
      enc.per_sample_weight_grad[q] =
          is_unconstrained(e) ? e : Enclosure{round_to(DType::F32, e.lo), round_to(DType::F32, e.hi)};
    }
  }
  return enc;
}

// ---- judgement -----------------------------------------------------------------------------------------

namespace {

/// Accumulates verdicts of one report: failures and the worst (largest |position|, first on ties).
struct ReportBuilder {
  CheckReport rep;
  double best_abs = -1.0;
  ReportBuilder(std::string check, std::string policy) {
    rep.check = std::move(check);
    rep.policy = std::move(policy);
  }
  void add(const ElementVerdict& v) {
    ++rep.elements;
    if (!v.inside) ++rep.failures;
    const double a = std::fabs(v.position);
    if (a > best_abs) {
      best_abs = a;
      rep.worst = v;
    }
  }
  /// Folds in the builder of the elements that follow this one's: the report that adding them
  /// here one by one builds (counts add up, the worst stays the first largest).
  void merge(const ReportBuilder& next) {
    rep.elements += next.rep.elements;
    rep.failures += next.rep.failures;
    if (next.best_abs > best_abs) {
      best_abs = next.best_abs;
      rep.worst = next.rep.worst;
    }
  }
};

/// body(i, b) adds the verdicts of item i to b, for i in [0, n): in parallel over fixed chunks of
/// `chunk` items merged in order, so `into` gets the report of a serial loop for any thread
/// count. `work`: element operations in all (small loops stay on the calling thread).
template <class Body>
void add_in_parallel(ReportBuilder& into, std::int64_t n, std::int64_t chunk, std::int64_t work,
                     Body&& body) {
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<ReportBuilder> parts(static_cast<std::size_t>(chunks), ReportBuilder({}, {}));
#pragma omp parallel for schedule(dynamic, 1) if (detail::worth_parallel(work))
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t end = std::min(n, (c + 1) * chunk);
    for (std::int64_t i = c * chunk; i < end; ++i) body(i, parts[static_cast<std::size_t>(c)]);
  }
  for (const ReportBuilder& part : parts) into.merge(part);
}

/// A bitwise comparison of an untouched element: the enclosure is the point `before`; a change
/// is placed at ±inf (bitwise: a NaN payload or a -0 for +0 is a change too).
ElementVerdict untouched_verdict(double before, double after, bool changed) {
  ElementVerdict v;
  v.enclosure = {before, before};
  v.value = after;
  v.reference = before;
  v.inside = !changed;
  v.position = !changed ? 0.0 : (std::isnan(after) || after >= before ? kInf : -kInf);
  return v;
}

}  // namespace

BackwardCheckReport judge_backward(const BackwardProblem& p, const BackwardEnclosures& enc,
                                   const BackwardResultView& result) {
  const ForwardProblem& fp = p.forward;
  const TableBatchView& tb = fp.tables;
  const DType wt = tb.dtype;
  const std::size_t wsz = dtype_size(wt);
  const BackwardReference& ref = enc.reference;
  const Transpose& tr = ref.transpose;
  const bool adagrad = p.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad;
  const std::int64_t elements = total_weight_elements(tb);
  const std::int64_t rows = total_rows(tb);
  if (elements > 0 && result.weights == nullptr)
    throw InvalidArgument("result.weights", "result.weights: null pointer (needs " +
                                                std::to_string(elements) + " elements of " +
                                                to_string(wt) + ")");
  if (adagrad && rows > 0 && (result.momentum == nullptr || p.momentum == nullptr))
    throw InvalidArgument("result.momentum", "result.momentum: null pointer with optimizer "
                                             "rowwise_adagrad (needs Σ E_t = " +
                                                 std::to_string(rows) + " FP32 values)");
  const std::string policy = to_string(fp.options.policy) + " " + to_string(p.options.optimizer.kind);
  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());
  BackwardCheckReport out;

  // weights of touched rows: inside the enclosure (a stored value is a value of wt by type).
  ReportBuilder w("weights", policy);
  std::vector<std::pair<std::int64_t, std::int64_t>> touched(static_cast<std::size_t>(R));  // [a, b)
  add_in_parallel(w, R, 256, static_cast<std::int64_t>(enc.weights.size()), [&](std::int64_t k, ReportBuilder& b) {
    const std::int64_t t = ref.run_table[k];
    const std::int64_t D = tb.dims[t];
    const std::int64_t row = tb.table_offsets[t] + ref.run_row[k] * D;
    touched[static_cast<std::size_t>(k)] = {row, row + D};
    for (std::int64_t d = 0; d < D; ++d) {
      ElementVerdict v;
      v.enclosure = enc.weights[ref.run_col_offset[k] + d];
      v.reference = ref.updated[ref.run_col_offset[k] + d];
      v.value = load_as_double(wt, result.weights, row + d);
      judge_element(v);
      v.where.feature = t;
      v.where.row = ref.run_row[k];
      v.where.column = d;
      v.where.flat = row + d;
      v.where.table_row = true;
      b.add(v);
    }
  });
  out.reports.push_back(w.rep);

  // weights of untouched rows (and gaps between tables): bitwise unchanged.
  auto locate = [&](std::int64_t flat, ElementCoord& c) {
    c.flat = flat;
    c.table_row = true;
    for (std::int64_t t = 0; t < tb.num_tables(); ++t) {
      const std::int64_t a = tb.table_offsets[t], D = tb.dims[t];
      if (flat >= a && flat < a + tb.rows[t] * D) {
        c.feature = t;
        c.row = (flat - a) / D;
        c.column = (flat - a) % D;
        return;
      }
    }
  };
  ReportBuilder wu("weights.untouched", policy);
  std::sort(touched.begin(), touched.end());
  const auto* before = static_cast<const unsigned char*>(tb.weights);
  const auto* after = static_cast<const unsigned char*>(result.weights);
  std::int64_t pos = 0;
  auto check_gap = [&](std::int64_t a, std::int64_t b) {
    if (b <= a) return;
    wu.rep.elements += b - a;
    if (wu.best_abs < 0) {  // the first untouched element stands as the worst until one changed
      wu.rep.worst = untouched_verdict(load_as_double(wt, before, a), load_as_double(wt, after, a),
                                       std::memcmp(before + a * wsz, after + a * wsz, wsz) != 0);
      locate(a, wu.rep.worst.where);
      wu.best_abs = 0;
    }
    if (before == after || std::memcmp(before + a * wsz, after + a * wsz, (b - a) * wsz) == 0)
      return;
    for (std::int64_t i = a; i < b; ++i) {
      if (std::memcmp(before + i * wsz, after + i * wsz, wsz) == 0) continue;
      ++wu.rep.failures;
      if (wu.best_abs < kInf) {  // keep the first changed element as the worst
        wu.rep.worst = untouched_verdict(load_as_double(wt, before, i), load_as_double(wt, after, i), true);
        locate(i, wu.rep.worst.where);
        wu.best_abs = kInf;
      }
    }
  };
  if (elements > 0) {
    for (const auto& [a, b] : touched) {
      check_gap(pos, a);
      pos = std::max(pos, b);
    }
    check_gap(pos, elements);
  }
  out.reports.push_back(wu.rep);

  if (adagrad) {
    ReportBuilder m("momentum", policy);
    std::vector<char> is_touched(static_cast<std::size_t>(rows), 0);
    add_in_parallel(m, R, 4096, R, [&](std::int64_t k, ReportBuilder& b) {
      const std::int64_t id = tr.linear_ids[k];
      is_touched[id] = 1;  // a run's row is its own: distinct bytes
      ElementVerdict v;
      v.enclosure = enc.momentum[k];
      v.reference = ref.momentum[k];
      v.value = result.momentum[id];
      judge_element(v);
      v.where.feature = ref.run_table[k];
      v.where.row = ref.run_row[k];
      v.where.flat = id;
      v.where.table_row = true;
      b.add(v);
    });
    out.reports.push_back(m.rep);
    ReportBuilder mu("momentum.untouched", policy);
    std::vector<std::int64_t> row_offset(static_cast<std::size_t>(tb.num_tables()) + 1, 0);
    for (std::int64_t t = 0; t < tb.num_tables(); ++t) row_offset[t + 1] = row_offset[t] + tb.rows[t];
    for (std::int64_t id = 0; id < rows; ++id) {
      if (is_touched[id]) continue;
      ++mu.rep.elements;
      const bool changed = std::memcmp(&p.momentum[id], &result.momentum[id], sizeof(float)) != 0;
      if (changed) ++mu.rep.failures;
      if ((changed && mu.best_abs < kInf) || mu.best_abs < 0) {  // first change, else first
        ElementVerdict v = untouched_verdict(p.momentum[id], result.momentum[id], changed);
        const auto t = std::upper_bound(row_offset.begin(), row_offset.end(), id) - row_offset.begin() - 1;
        v.where.feature = t;
        v.where.row = id - row_offset[t];
        v.where.flat = id;
        v.where.table_row = true;
        mu.rep.worst = v;
        mu.best_abs = changed ? kInf : 0;
      }
    }
    out.reports.push_back(mu.rep);
  }

  if (fp.lookups.weighted() && result.per_sample_weight_grad != nullptr) {
    ReportBuilder g("per_sample_weight_grad", policy);
    const OutputLayout layout = make_output_layout(fp);
    const std::int64_t N = fp.lookups.num_indices;
    add_in_parallel(g, N, 2048, N, [&](std::int64_t q, ReportBuilder& b) {
      ElementVerdict v;
      v.enclosure = enc.per_sample_weight_grad[q];
      v.reference = ref.per_sample_weight_grad[q];
      v.value = result.per_sample_weight_grad[q];
      judge_element(v);
      v.where.lookup_row = true;
      v.where.row = q;
      v.where.flat = q;
      const std::int64_t bag = tr.position_bag[q];
      if (bag >= 0) {
        v.where.feature = layout.feature_of_bag(bag);
        v.where.sample = bag - layout.feature_bag_offset[v.where.feature];
      }
      b.add(v);
    });
    out.reports.push_back(g.rep);
  }
  return out;
}

BackwardCheckReport check_backward(const BackwardProblem& p, const BackwardResultView& result) {
  return judge_backward(p, compute_backward_enclosures(p), result);
}

bool BackwardCheckReport::passed() const {
  for (const auto& r : reports)
    if (!r.passed()) return false;
  return true;
}

std::int64_t BackwardCheckReport::failures() const {
  std::int64_t n = 0;
  for (const auto& r : reports) n += r.failures;
  return n;
}

std::string BackwardCheckReport::summary() const {
  std::string s;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (i > 0) s += '\n';
    s += reports[i].summary();
  }
  return s;
}

// ---- stochastic rounding z-test ----------------------------------------------------------------------

StochasticRoundingTest stochastic_rounding_test(const BackwardProblem& p,
                                                const BackwardEnclosures& enc,
                                                const void* weights_after, double z_limit) {
  StochasticRoundingTest st;
  st.z_limit = z_limit;
  const TableBatchView& tb = p.forward.tables;
  const DType wt = tb.dtype;
  if (wt == DType::F32) return st;  // FP32 rows are never stochastically rounded
  if (weights_after == nullptr && !enc.reference.updated.empty())
    throw InvalidArgument("weights_after", "weights_after: null pointer");
  const BackwardReference& ref = enc.reference;
  const double max_finite = float_traits(wt).max_finite;
  // Per element, computed in parallel over the runs of a block of about kBlock elements, then
  // summed on this thread in element order: the sums of a serial loop for any thread count.
  struct Term {
    double e = 0, var = 0, slack = 0;
    enum : std::uint8_t { None, Excluded, Sample } kind = None;
  };
  constexpr std::int64_t kBlock = 1 << 20;
  const std::int64_t R = static_cast<std::int64_t>(ref.run_row.size());
  std::vector<Term> terms;
  double sum_e = 0, sum_var = 0, slack = 0;
  for (std::int64_t k0 = 0; k0 < R;) {
    const std::int64_t c0 = ref.run_col_offset[k0];
    std::int64_t k1 = k0 + 1;
    while (k1 < R && ref.run_col_offset[k1 + 1] - c0 <= kBlock) ++k1;
    const std::int64_t n = ref.run_col_offset[k1] - c0;
    terms.assign(static_cast<std::size_t>(n), Term{});
#pragma omp parallel for schedule(dynamic, 64) if (detail::worth_parallel(n))
    for (std::int64_t k = k0; k < k1; ++k) {
      const std::int64_t t = ref.run_table[k];
      const std::int64_t D = tb.dims[t];
      const std::int64_t row = tb.table_offsets[t] + ref.run_row[k] * D;
      for (std::int64_t d = 0; d < D; ++d) {
        const std::int64_t i = ref.run_col_offset[k] + d;
        Term& term = terms[static_cast<std::size_t>(i - c0)];
        const double x = ref.updated[i];
        if (!std::isfinite(x) || std::fabs(x) > max_finite) continue;
        const double lo = round_down_to(wt, x), hi = round_up_to(wt, x);
        if (lo == hi) continue;  // representable: no rounding
        // The kernel rounds its own pre-rounding value y, somewhere in enc.exact[i] [doc §B.7].
        // If that enclosure reaches past a neighbour of x (cancellation: FP32 error of w − lr·G
        // larger than an ulp of the tiny result), y may round to a third value: no sample.
        const Enclosure& pre = enc.exact[static_cast<std::size_t>(i)];
        if (pre.lo < lo || pre.hi > hi) {
          term.kind = Term::Excluded;
          continue;
        }
        const double ulp = hi - lo;
        const double f = (x - lo) / ulp;
        const double v = load_as_double(wt, weights_after, row + d);
        term.e = (v - x) / ulp;
        term.var = f * (1 - f);
        term.slack = std::max(x - pre.lo, pre.hi - x) / ulp;  // |E e − 0| <= |y − x| / ulp
        term.kind = Term::Sample;
      }
    }
    for (const Term& term : terms) {
      if (term.kind == Term::Excluded) ++st.excluded;
      if (term.kind != Term::Sample) continue;
      sum_e += term.e;
      sum_var += term.var;
      slack += term.slack;
      ++st.samples;
    }
    k0 = k1;
  }
  if (st.samples > 0) st.mean_error_ulps = sum_e / static_cast<double>(st.samples);
  st.variance = sum_var;
  st.bias_bound = slack;
  // Σ e has mean Σ (y − x)/ulp, within ±slack: only the part of |Σ e| beyond it is evidence.
  const double excess = std::max(0.0, std::fabs(sum_e) - slack);
  const double signed_excess = sum_e < 0 ? -excess : excess;
  st.z = sum_var > 0 ? signed_excess / std::sqrt(sum_var) : (excess == 0 ? 0.0 : kInf);
  return st;
}

bool StochasticRoundingTest::passed() const { return std::fabs(z) <= z_limit; }

std::string StochasticRoundingTest::summary() const {
  if (samples == 0) return "stochastic rounding z-test: no non-representable element (vacuous)";
  return "stochastic rounding z-test: " + std::to_string(samples) + " elements" +
         (excluded > 0 ? " (" + std::to_string(excluded) + " excluded: pre-rounding enclosure past a neighbour)" : std::string()) +
         ", mean error " + fmt("%+.4f", mean_error_ulps) + " ulp, bias bound " +
         fmt("%.3g", bias_bound) + ", z = " + fmt("%+.2f", z) + " (limit " + fmt("%.2f", z_limit) +
         "): " + (passed() ? "pass" : "FAIL");
}

}  // namespace tbe::oracle
