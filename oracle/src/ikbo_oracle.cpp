// IKBO enclosures, their judgement and coordinates (ikbo_oracle.h). Derivation: docs/oracle.md
// "IKBO" (section numbers cited as [IKBO §n]).
#include "tbe/oracle/ikbo_oracle.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "float_model.h"
#include "tbe/errors.h"
#include "tbe/precision.h"

namespace tbe::oracle {

namespace {

using ikbo::AttentionProblem;
using ikbo::LceProblem;
using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using StridedMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kU64 = DTypeTraits<DType::F64>::unit_roundoff;

double gamma_k(double k, double u) {
  if (k <= 0) return 0.0;
  const double ku = k * u;
  if (!(ku < 0.5)) return kInf;
  return ku / (1.0 - ku);
}

Enclosure unconstrained() { return {-kInf, kInf}; }

/// [RN_st(down(c − R)), RN_st(up(c + R))]: outward FP64 ends, then the monotone output rounding.
Enclosure outward(DType st, double c, double R) {
  if (!std::isfinite(c) || !std::isfinite(R)) return unconstrained();
  return {round_to(st, std::nextafter(c - R, -kInf)), round_to(st, std::nextafter(c + R, kInf))};
}

/// n storage elements as FP64 (exact).
std::vector<double> load_all(DType st, const void* data, std::int64_t n) {
  std::vector<double> out(static_cast<std::size_t>(n));
  const FloatLoader L(st, data);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) out[i] = L(i);
  return out;
}

/// Accumulation-side constants of a policy [IKBO §1].
struct AccModel {
  double u = 0;          ///< effective unit roundoff: 2·u(acc), admits truncating accumulators
  double u_acc = 0;      ///< u(acc)
  double omega = 0;      ///< largest finite acc value
  int prod = 0;          ///< 1 if a product of two storage values is rounded in acc
  double eta_prod = 0;   ///< absolute error of a product that underflows in acc (0 if none can)
};
AccModel acc_model(const ikbo::IkboPolicy& pol) {
  AccModel m;
  const FloatTraits ta = float_traits(pol.accumulation);
  m.u_acc = ta.unit_roundoff;
  m.u = 2.0 * ta.unit_roundoff;
  m.omega = ta.max_finite;
  const FloatTraits ts = float_traits(pol.storage);
  // A product of two p-bit significands has <= 2p bits: exact in acc iff 2p <= p_acc.
  m.prod = 2 * ts.digits <= ta.digits ? 0 : 1;
  // Smallest non-zero product min_subnormal(st)^2 underflows in acc iff below acc's normal range.
  const double smallest = ts.min_subnormal * ts.min_subnormal;
  m.eta_prod = smallest < ta.min_normal ? ta.min_subnormal : 0.0;
  return m;
}

/// Judges values against enclosures: the rule of judge_forward (inside, and a value of st).
template <class Locate>
CheckReport judge_values(const char* check, const std::string& policy, DType st,
                         const IkboEnclosures& enc, std::span<const double> values,
                         Locate&& locate) {
  const auto n = static_cast<std::int64_t>(enc.enclosures.size());
  if (static_cast<std::int64_t>(values.size()) != n)
    throw InvalidArgument("values", "values: " + std::to_string(values.size()) +
                                        " elements, the output has " + std::to_string(n));
  CheckReport rep;
  rep.check = check;
  rep.policy = policy;
  rep.elements = n;
  auto verdict = [&](std::int64_t i) {
    ElementVerdict v;
    v.enclosure = enc.enclosures[i];
    v.value = values[i];
    v.reference = enc.reference[i];
    judge_element(v);
    if (std::isfinite(v.value) && !detail::representable(st, v.value)) {
      v.inside = false;  // not a value of the storage type: not rounded, or corrupt
      v.position = v.value >= v.enclosure.lo ? kInf : -kInf;
    }
    return v;
  };
  std::int64_t failures = 0, best_flat = -1;
  double best_abs = -1.0;
#pragma omp parallel
  {
    std::int64_t my_flat = -1;
    double my_abs = -1.0;
#pragma omp for reduction(+ : failures) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const ElementVerdict v = verdict(i);
      if (!v.inside) ++failures;
      const double a = std::fabs(v.position);
      if (a > my_abs) {
        my_abs = a;
        my_flat = i;
      }
    }
#pragma omp critical(tbe_oracle_ikbo_worst)
    {
      if (my_flat >= 0 && (my_abs > best_abs || (my_abs == best_abs && my_flat < best_flat))) {
        best_abs = my_abs;
        best_flat = my_flat;
      }
    }
  }
  rep.failures = failures;
  if (best_flat >= 0) {
    rep.worst = verdict(best_flat);
    rep.worst.where = locate(best_flat);
  }
  return rep;
}

std::vector<double> read_output(DType st, const void* out, std::int64_t n) {
  if (n > 0 && out == nullptr)
    throw InvalidArgument("out", "out: null pointer for " + std::to_string(n) + " elements");
  return n > 0 ? load_all(st, out, n) : std::vector<double>{};
}

}  // namespace

// ---- LCE [IKBO §2] ------------------------------------------------------------------------------

IkboEnclosures compute_lce_enclosures(const LceProblem& p) {
  throw_if_error(ikbo::validate(p));
  throw_if_error(ikbo::validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U));
  const DType st = p.policy.storage;
  const AccModel am = acc_model(p.policy);
  const ikbo::LceRounding rounding = p.policy.lce_rounding;
  const std::int64_t B = p.B, M = p.M, N = p.N, Kc = p.K_c, Ku = p.K_u, MN = M * N;
  IkboEnclosures out;
  out.enclosures.assign(static_cast<std::size_t>(B * MN), Enclosure{0.0, 0.0});
  out.reference.assign(static_cast<std::size_t>(B * MN), 0.0);
  if (B == 0) return out;

  const std::vector<double> wc = load_all(st, p.w_c, M * Kc), wu = load_all(st, p.w_u, M * Ku);
  const Eigen::Map<const RowMat> Wc(wc.data(), M, Kc), Wu(wu.data(), M, Ku);
  const RowMat Wc_abs = Wc.cwiseAbs(), Wu_abs = Wu.cwiseAbs();

  // User parts per used user: value and Σ|w·e| [U, M, N].
  std::vector<char> used(static_cast<std::size_t>(p.U), 0);
  for (std::int64_t b = 0; b < B; ++b) used[p.cand_to_user[b]] = 1;
  std::vector<double> uval(Ku > 0 ? static_cast<std::size_t>(p.U * MN) : 0),
      uabs(Ku > 0 ? static_cast<std::size_t>(p.U * MN) : 0);
  if (Ku > 0) {
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t u = 0; u < p.U; ++u) {
      if (!used[u]) continue;
      const std::vector<double> e = load_all(st, static_cast<const std::byte*>(p.e_u) +
                                                     u * Ku * N * dtype_size(st), Ku * N);
      const Eigen::Map<const RowMat> E(e.data(), Ku, N);
      Eigen::Map<RowMat>(uval.data() + u * MN, M, N).noalias() = Wu * E;
      Eigen::Map<RowMat>(uabs.data() + u * MN, M, N).noalias() = Wu_abs * E.cwiseAbs();
    }
  }

  // Relative bounds [IKBO §2.2]: k = additions + product roundings along a term's path.
  const double K_all = static_cast<double>(Kc + Ku);
  const double rel_once = gamma_k(K_all + am.prod, am.u);  // one accumulator or two + one add
  const double rel_c = gamma_k(static_cast<double>(Kc - 1 + am.prod), am.u);
  const double rel_u = gamma_k(static_cast<double>(Ku - 1 + am.prod), am.u);
  // UserRounded [IKBO §2.5]: the candidate reduction plus the add of the stored user value, K_c
  // additions (also the user value entering the candidate accumulator as one more term).
  const double rel_cu = gamma_k(static_cast<double>(Kc + am.prod), am.u);
  const double rel64 = gamma_k(K_all + 2, kU64);          // the FP64 centre (any order)
  const double inflate = 1.0 + 4.0 * gamma_k(K_all + 10, kU64);

  // One part (or the whole sum) in acc: centre y, Σ|terms| A, k-bound rel, n terms.
  auto part = [&](double y, double A, double rel, double nterms) -> Enclosure {
    if (!std::isfinite(A) || !std::isfinite(y)) return unconstrained();
    const double eta = nterms * am.eta_prod * (1.0 + rel);
    if (!(A * (1.0 + rel) + eta < am.omega)) return unconstrained();  // acc may overflow
    const double R = (rel * A + eta + rel64 * A) * inflate;
    return outward(st, y, R);
  };

  // UserRounded [IKBO §2.5]: y = RN_st(fl_acc(Ĉ + v)) with v = RN_st(Û) in [v_lo, v_hi] (the
  // user part's storage enclosure) and |fl_acc(Ĉ + v) − (C + v)| <= rel_cu·(Σ|c terms| + |v|).
  // The bound is monotone in v, so the ends use v_lo and v_hi; RN_st is monotone.
  auto user_rounded = [&](double c, double ac, double uv, double au) -> Enclosure {
    const Enclosure ev = Ku > 0 ? part(uv, au, rel_u, static_cast<double>(Ku))
                                : Enclosure{0.0, 0.0};
    if (!std::isfinite(ev.lo) || !std::isfinite(ev.hi) || !std::isfinite(c) ||
        !std::isfinite(ac))
      return unconstrained();  // a user value that may be ±inf in storage: no finite bound
    const double vmax = std::max(std::fabs(ev.lo), std::fabs(ev.hi));
    const double eta = static_cast<double>(Kc) * am.eta_prod * (1.0 + rel_cu);
    if (!((ac + vmax) * (1.0 + rel_cu) + eta < am.omega)) return unconstrained();
    // acc-side error, the FP64 centre's error on C, and the FP64 evaluation of c + v ± R
    // (two roundings of magnitude <= |c| + vmax + R each: 4·u64 covers them).
    const double R0 = rel_cu * (ac + vmax) + eta + rel64 * ac;
    const double R = (R0 + 4.0 * kU64 * (std::fabs(c) + vmax + R0)) * inflate;
    return {round_to(st, std::nextafter(c + ev.lo - R, -kInf)),
            round_to(st, std::nextafter(c + ev.hi + R, kInf))};
  };

#pragma omp parallel
  {
    RowMat C(M, N), Cabs(M, N);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
      const std::vector<double> e = load_all(st, static_cast<const std::byte*>(p.e_c) +
                                                     b * Kc * N * dtype_size(st), Kc * N);
      const Eigen::Map<const RowMat> E(e.data(), Kc, N);
      C.noalias() = Wc * E;
      Cabs.noalias() = Wc_abs * E.cwiseAbs();
      const std::int64_t u = p.cand_to_user[b];
      for (std::int64_t i = 0; i < MN; ++i) {
        const double c = C.data()[i], ac = Cabs.data()[i];
        const double uv = Ku > 0 ? uval[u * MN + i] : 0.0, au = Ku > 0 ? uabs[u * MN + i] : 0.0;
        const std::int64_t o = b * MN + i;
        out.reference[o] = c + uv;
        if (rounding == ikbo::LceRounding::RoundOnce) {
          out.enclosures[o] = part(c + uv, ac + au, rel_once, K_all);
          continue;
        }
        if (rounding == ikbo::LceRounding::UserRounded) {
          out.enclosures[o] = user_rounded(c, ac, uv, au);
          continue;
        }
        // Published [IKBO §2.3]: RN(RN(Ĉ) + RN(Û)) is monotone in Ĉ and Û.
        const Enclosure ec = part(c, ac, rel_c, static_cast<double>(Kc));
        const Enclosure eu = Ku > 0 ? part(uv, au, rel_u, static_cast<double>(Ku))
                                    : Enclosure{0.0, 0.0};
        if (std::isinf(ec.lo) && std::isinf(ec.hi)) {
          out.enclosures[o] = unconstrained();
        } else if (std::isinf(eu.lo) && std::isinf(eu.hi)) {
          out.enclosures[o] = unconstrained();
        } else {
          // Sums of two storage values: fl64 then RN_st equals RN_st of the exact sum (53 >= 2p+2).
          out.enclosures[o] = {round_to(st, ec.lo + eu.lo), round_to(st, ec.hi + eu.hi)};
          if (std::isnan(out.enclosures[o].lo) || std::isnan(out.enclosures[o].hi))
            out.enclosures[o] = unconstrained();  // inf - inf in the storage add
        }
      }
    }
  }
  return out;
}

std::vector<Enclosure> lce_enclosures(const LceProblem& p) {
  return compute_lce_enclosures(p).enclosures;
}

ElementCoord locate_lce_element(const LceProblem& p, std::int64_t flat) {
  ElementCoord c;
  c.space = ElementCoord::Space::IkboLce;
  c.flat = flat;
  const std::int64_t MN = p.M * p.N;
  if (flat < 0 || MN <= 0 || flat >= p.B * MN) return c;
  c.sample = flat / MN;
  c.row = (flat % MN) / p.N;
  c.column = flat % p.N;
  return c;
}

CheckReport judge_lce(const LceProblem& p, const IkboEnclosures& enc,
                      std::span<const double> values) {
  return judge_values("ikbo-lce", ikbo::to_string(p.policy), p.policy.storage, enc, values,
                      [&](std::int64_t f) { return locate_lce_element(p, f); });
}

CheckReport check_lce_values(const LceProblem& p, std::span<const double> values) {
  return judge_lce(p, compute_lce_enclosures(p), values);
}

CheckReport check_lce(const LceProblem& p, const void* out) {
  const IkboEnclosures enc = compute_lce_enclosures(p);
  const std::vector<double> v =
      read_output(p.policy.storage, out, static_cast<std::int64_t>(enc.enclosures.size()));
  return judge_lce(p, enc, v);
}

// ---- Attention [IKBO §3] ------------------------------------------------------------------------

IkboEnclosures compute_attention_enclosures(const AttentionProblem& p) {
  throw_if_error(ikbo::validate(p));
  throw_if_error(ikbo::validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U));
  const DType st = p.policy.storage;
  const AccModel am = acc_model(p.policy);
  const double u = am.u, ua = am.u_acc;
  const double u_st = float_traits(st).unit_roundoff;
  const double e_exp = 4.0 * ua;   // exp (exp2.approx: 2 ulps) [IKBO §3.2]
  const double u_div = 4.0 * ua;   // acc / l (approximate division or l's reciprocal times acc)
  // Absolute error per P term: P rounded to storage may be subnormal (half its smallest
  // subnormal), exp may flush results below 2^-126 to zero.
  const double p_abs = float_traits(st).min_subnormal + 0x1p-125;
  const double scale = ikbo::attention_scale(p);
  const std::int64_t H = p.H, Dh = p.Dh, ns = p.n_seed, HD = H * Dh;
  const std::int64_t keys = p.total_keys();
  IkboEnclosures out;
  const auto numel = static_cast<std::size_t>(ikbo::attention_output_numel(p));
  out.enclosures.assign(numel, Enclosure{0.0, 0.0});
  out.reference.assign(numel, 0.0);
  if (p.B == 0) return out;
  const std::vector<double> k64 = load_all(st, p.k, keys * HD), v64 = load_all(st, p.v, keys * HD);
  std::vector<double> kabs(k64.size()), vabs(v64.size());
  for (std::size_t i = 0; i < k64.size(); ++i) {
    kabs[i] = std::fabs(k64[i]);
    vabs[i] = std::fabs(v64[i]);
  }
  // Logit: Dh - 1 additions, the scale (and log2 e) multiplications, products if rounded.
  const double ks = static_cast<double>(Dh + 1 + am.prod);

#pragma omp parallel
  {
    RowMat dots, adots, W, O, OV;
    std::vector<double> qabs(static_cast<std::size_t>(ns * HD));
    std::vector<double> s, D, vmax;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < p.B; ++b) {
      const auto [k0, k1] = ikbo::attention_key_range(p, p.cand_to_user[b]);
      const std::int64_t n = k1 - k0;
      if (n == 0) continue;  // empty range: exactly 0 [IKBO §3.5] (already [0, 0], reference 0)
      const std::vector<double> q64 = load_all(
          st, static_cast<const std::byte*>(p.q) + b * ns * HD * dtype_size(st), ns * HD);
      for (std::int64_t i = 0; i < ns * HD; ++i) qabs[i] = std::fabs(q64[i]);
      s.resize(static_cast<std::size_t>(n));
      D.resize(static_cast<std::size_t>(n));
      vmax.resize(static_cast<std::size_t>(Dh));
      for (std::int64_t h = 0; h < H; ++h) {
        const Eigen::OuterStride<> os(HD);
        const StridedMap Q(q64.data() + h * Dh, ns, Dh, os), Qa(qabs.data() + h * Dh, ns, Dh, os);
        const StridedMap Kh(k64.data() + k0 * HD + h * Dh, n, Dh, os),
            Ka(kabs.data() + k0 * HD + h * Dh, n, Dh, os);
        const StridedMap Vh(v64.data() + k0 * HD + h * Dh, n, Dh, os),
            Va(vabs.data() + k0 * HD + h * Dh, n, Dh, os);
        dots.noalias() = Q * Kh.transpose();   // [n_seed, n]
        adots.noalias() = Qa * Ka.transpose(); // [n_seed, n] Σ_d |q_d k_jd|
        for (std::int64_t d = 0; d < Dh; ++d) vmax[d] = Va.col(d).maxCoeff();
        W.resize(ns, n);
        std::vector<double> row_rel(static_cast<std::size_t>(ns)), row_abs(row_rel.size());
        std::vector<char> row_valid(row_rel.size(), 1);
        for (std::int64_t i = 0; i < ns; ++i) {
          // Logits, their error bounds and the exact softmax weights (FP64) [IKBO §3.1].
          double smax = -kInf, amax = 0.0, Dmax = 0.0;
          for (std::int64_t j = 0; j < n; ++j) {
            s[j] = scale * dots(i, j);
            const double a = scale * adots(i, j);
            D[j] = gamma_k(ks, u) * a;
            smax = std::max(smax, s[j]);
            amax = std::max(amax, a);
            Dmax = std::max(Dmax, D[j]);
          }
          row_valid[i] = std::isfinite(amax) && amax < 0x1p100 && std::isfinite(Dmax);
          double l = 0.0;
          for (std::int64_t j = 0; j < n; ++j) {
            W(i, j) = std::exp(s[j] - smax);
            l += W(i, j);
          }
          W.row(i) /= l;
          // Rescalings of the running maximum: at most the keys that may be records in
          // ascending or descending order (the computed logits lie within ±Dmax) [IKBO §3.3].
          auto records = [&](bool ascending) {
            double run = -kInf;
            std::int64_t r = 0;
            for (std::int64_t t = 0; t < n; ++t) {
              const std::int64_t j = ascending ? t : n - 1 - t;
              if (t > 0 && s[j] >= run - 2 * Dmax) ++r;
              run = std::max(run, s[j]);
            }
            return r;
          };
          const double nresc = static_cast<double>(std::max(records(true), records(false)));
          const double arg = 8.0 * ua * (amax + Dmax);  // argument error of one exp [IKBO §3.2]
          const double kappa = std::expm1(nresc * (arg + std::log1p(e_exp)));
          double Ra = 0.0;  // max_j relative error of a P term (acc or l side)
          for (std::int64_t j = 0; j < n; ++j)
            Ra = std::max(Ra, std::expm1(D[j] + arg));
          Ra = (1.0 + Ra) * (1.0 + e_exp) * (1.0 + u_st) * (1.0 + kappa) - 1.0;
          const double g_pv = gamma_k(static_cast<double>(n) + nresc + 2, u);
          const double g_l = gamma_k(static_cast<double>(n) + nresc + 1, u);
          const double Ra2 = (1.0 + Ra) * (1.0 + g_pv) - 1.0;
          const double Rl = (1.0 + Ra) * (1.0 + g_l) - 1.0;
          const double abs_n = 2.0 * static_cast<double>(n) * p_abs *
                               std::exp(2.0 * Dmax + 1e-3) * (1.0 + kappa);
          const double den = 1.0 - Rl - abs_n;
          if (!(den > 0.5)) row_valid[i] = 0;
          row_rel[i] = (Ra2 + Rl) / den;
          row_abs[i] = abs_n / den;
          // FP64 centre: logits (Dh + 3)·u64·amax each side, weights, PV sums [IKBO §3.4].
          row_rel[i] += 4.0 * (2.0 * (Dh + 3) * amax + 2.0 * n + 10.0) * kU64 / den;
        }
        O.noalias() = W * Vh;               // [n_seed, Dh] centre
        OV.noalias() = W * Va;              // Σ_j w_j |v_jd|
        for (std::int64_t i = 0; i < ns; ++i)
          for (std::int64_t d = 0; d < Dh; ++d) {
            const std::int64_t o = ((b * ns + i) * H + h) * Dh + d;
            const double c = O(i, d), V = OV(i, d);
            out.reference[o] = c;
            if (!row_valid[i] || !(static_cast<double>(n) * vmax[d] < am.omega / 4)) {
              out.enclosures[o] = unconstrained();
              continue;
            }
            const double err = row_rel[i] * V + row_abs[i] * (vmax[d] + V);
            const double R = (err * (1.0 + u_div) + u_div * (V + err)) * (1.0 + 0x1p-40);
            out.enclosures[o] = outward(st, c, R);
          }
      }
    }
  }
  return out;
}

std::vector<Enclosure> attention_enclosures(const AttentionProblem& p) {
  return compute_attention_enclosures(p).enclosures;
}

ElementCoord locate_attention_element(const AttentionProblem& p, std::int64_t flat) {
  ElementCoord c;
  c.space = ElementCoord::Space::IkboAttention;
  c.flat = flat;
  const std::int64_t HD = p.H * p.Dh;
  if (flat < 0 || HD <= 0 || flat >= ikbo::attention_output_numel(p)) return c;
  c.row = flat / HD;
  c.sample = c.row / p.n_seed;
  c.head = (flat % HD) / p.Dh;
  c.column = flat % p.Dh;
  return c;
}

CheckReport judge_attention(const AttentionProblem& p, const IkboEnclosures& enc,
                            std::span<const double> values) {
  return judge_values("ikbo-attention", ikbo::to_string(p.policy), p.policy.storage, enc, values,
                      [&](std::int64_t f) { return locate_attention_element(p, f); });
}

CheckReport check_attention_values(const AttentionProblem& p, std::span<const double> values) {
  return judge_attention(p, compute_attention_enclosures(p), values);
}

CheckReport check_attention(const AttentionProblem& p, const void* out) {
  const IkboEnclosures enc = compute_attention_enclosures(p);
  const std::vector<double> v =
      read_output(p.policy.storage, out, static_cast<std::int64_t>(enc.enclosures.size()));
  return judge_attention(p, enc, v);
}

}  // namespace tbe::oracle
