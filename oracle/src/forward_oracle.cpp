// Forward enclosures, their judgement and the report (forward_oracle.h). The derivation of every
// constant below is in docs/oracle.md; section names are cited as [doc §...].
#include "tbe/oracle/forward_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "float_model.h"
#include "tbe/bounds_check.h"
#include "tbe/errors.h"

namespace tbe::oracle {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kU64 = DTypeTraits<DType::F64>::unit_roundoff;
constexpr double kMinSub64 = DTypeTraits<DType::F64>::min_subnormal;

/// γ(k) = k·u / (1 − k·u) (Higham (3.8)); +inf once k·u >= 1/2 (the bound is then useless and
/// the element is reported unconstrained).
double gamma_k(double k, double u) {
  const double ku = k * u;
  if (!(ku < 0.5)) return kInf;
  return ku / (1.0 - ku);
}

Enclosure unconstrained() { return {-kInf, kInf}; }
Enclosure nan_point() { return {kNaN, kNaN}; }

/// The per-problem constants of the rounding model [doc §2].
struct Model {
  DType acc = DType::F64;
  DType out = DType::F32;
  bool weighted = false;
  bool mean = false;
  double u = 0;          ///< unit roundoff of acc
  double eta = 0;        ///< underflow unit of acc (we use the smallest subnormal >= 2η)
  double max_acc = 0;    ///< largest finite acc value
  int digits = 0;        ///< p of acc
  int emin_sub = 0;      ///< exponent of acc's smallest subnormal
  int conv = 0;          ///< input conversions per term (0 for conforming policies) [doc §2.2]
  double lambda = 0;     ///< > 0: probabilistic bound with this λ [doc §9]
};

Model make_model(const ForwardProblem& p) {
  Model m;
  const PrecisionPolicy& pol = p.options.policy;
  m.acc = pol.accumulation;
  m.out = pol.output;
  m.weighted = p.lookups.weighted();
  m.mean = p.options.pooling == PoolingMode::Mean;
  const FloatTraits tr = float_traits(m.acc);
  m.u = tr.unit_roundoff;
  m.eta = tr.min_subnormal;
  m.max_acc = tr.max_finite;
  m.digits = tr.digits;
  m.emin_sub = tr.min_subnormal_exponent;
  m.conv = (detail::embeds(p.tables.dtype, m.acc) ? 0 : 1) +
           (m.weighted && !detail::embeds(DType::F32, m.acc) ? 1 : 0);
  return m;
}

/// Bounds that depend only on the bag (its length n = L) [doc §2.2, §2.3].
struct BagBound {
  double n = 0;
  double rel = 0;       ///< relative bound on the acc result, in units of A = Σ|t_p|
  double rel_guard = 0; ///< worst-case relative bound (the overflow guard never uses λ)
  double eta_abs = 0;   ///< absolute underflow bound of the acc result
  double rel64 = 0;     ///< relative bound of the FP64 centre
  double eta64 = 0;     ///< absolute bound of the FP64 centre (underflow; never reached)
  double inflate = 0;   ///< 1 + slack for the FP64 evaluation of the radius [doc §3]
  bool mean_exact_ok = false;  ///< MEAN: L is a power of two with 1/L and L acc values
  int log2_L = 0;
};

BagBound bag_bound(const Model& m, std::int64_t L) {
  BagBound b;
  const double n = static_cast<double>(L);
  b.n = n;
  int r = m.conv + (m.weighted ? 1 : 0) + (m.mean ? 2 : 0);
  if (m.mean && !detail::representable(m.acc, n)) ++r;  // L itself rounded into acc
  const double k = n - 1 + r;
  b.rel = gamma_k(k, m.u);
  b.rel_guard = b.rel;
  if (m.lambda > 0) {
    // Higham & Mary 2019, Thm 2.4: |θ_k| <= exp(λ√k·u + k·u²/(1−u)) − 1 with probability
    // >= 1 − 2·exp(−λ²(1−u)²/2); inflated by 4 FP64 ulps for its own evaluation.
    const double g = std::expm1(m.lambda * std::sqrt(k) * m.u + k * m.u * m.u / (1.0 - m.u));
    b.rel = std::min(b.rel, g * (1.0 + 0x1p-50));
  }
  if (m.mean && 1.0 / n < 2 * float_traits(m.acc).min_normal) {
    // fl(1/L) may be subnormal: its absolute error η becomes a relative error η·L of c.
    b.rel = b.rel + m.eta * n * (1.0 + b.rel) * 2.0;
    b.rel_guard = b.rel_guard + m.eta * n * (1.0 + b.rel_guard) * 2.0;
  }
  const int per_term_mults = m.conv + (m.weighted ? 1 : 0) + (m.mean ? 1 : 0);
  b.eta_abs = (n * per_term_mults + (m.mean ? 1 : 0)) * m.eta * (1.0 + b.rel);
  b.rel64 = gamma_k(n + 2, kU64);
  b.eta64 = (n + 3) * kMinSub64;
  b.inflate = 1.0 + 4.0 * gamma_k(n + 10, kU64);
  if (m.mean) {
    int e = 0;
    const double frac = std::frexp(n, &e);  // n = frac·2^e, frac in [1/2, 1)
    if (frac == 0.5) {
      b.log2_L = e - 1;
      b.mean_exact_ok =
          detail::representable(m.acc, n) && detail::representable(m.acc, 1.0 / n);
    }
  }
  return b;
}

/// Per-column accumulators of one bag.
struct ColumnAcc {
  double sum = 0;       ///< Σ u_p in index order (FP64), u_p = s_p·W_p exact
  double absum = 0;     ///< Σ |u_p| over finite u_p (FP64)
  double max_input = 0; ///< max |W|, |s| (only tracked when conversions happen)
  int min_lsb = std::numeric_limits<int>::max();  ///< min exponent of the lowest set bit
  bool all_repr = true; ///< every u_p (and W, s when converted) is an acc value
  bool nan = false, pinf = false, ninf = false;
};

/// Enclosure of a pooled element from its column accumulators [doc §2-§5].
Enclosure pooled_enclosure(const Model& m, const BagBound& b, const ColumnAcc& c,
                           double* reference) {
  const double L = b.n;
  if (c.nan || c.pinf || c.ninf) {
    *reference = c.nan || (c.pinf && c.ninf) ? kNaN : (c.pinf ? kInf : -kInf);
    // The finite part might overflow in acc with the opposite sign: then inf - inf = NaN is a
    // legal result too [doc §5].
    const double guard = c.absum * (1.0 + b.rel_guard) + b.eta_abs;
    if (!(guard < m.max_acc) || !(c.max_input <= m.max_acc)) return unconstrained();
    if (std::isnan(*reference)) return nan_point();
    return {*reference, *reference};
  }
  const double center = m.mean ? c.sum / L : c.sum;
  *reference = center;
  const double A = m.mean ? c.absum / L : c.absum;

  if (c.absum == 0.0) return {0.0, 0.0};  // every term is ±0: every order gives ±0

  // Overflow guard: every partial sum in any order is below A_u(1 + rel) + η-terms in magnitude.
  if (!(c.absum * (1.0 + b.rel_guard) + b.eta_abs < m.max_acc) || !(c.max_input <= m.max_acc))
    return unconstrained();

  // Exact case [doc §4]: every term and every partial sum in any order is an acc value.
  bool exact = false;
  if (c.all_repr && c.absum < std::ldexp(1.0, m.digits + c.min_lsb)) {
    exact = !m.mean || (b.mean_exact_ok && c.min_lsb - b.log2_L >= m.emin_sub);
  }
  if (exact) {
    const double v = round_to(m.out, center);
    return {v, v};
  }

  const double radius = (b.rel * A + b.eta_abs + b.rel64 * A + b.eta64) * b.inflate;
  if (!std::isfinite(radius)) return unconstrained();
  const double lo_acc = detail::next_down64(center - radius);
  const double hi_acc = detail::next_up64(center + radius);
  // No snapping of the ends to acc values: an implementation accumulating in a wider type than
  // the policy's (e.g. the FP64 reference under an FP32 policy) must pass too [doc §3].
  return {round_to(m.out, lo_acc), round_to(m.out, hi_acc)};
}

/// Repaired offsets/indices of p (FATAL with a violation throws BoundsCheckError).
RepairResult repaired_lookups(const ForwardProblem& p) {
  throw_if_error(validate(p));
  return repair(p);
}

void compute_pooled(const ForwardProblem& p, const RepairResult& rr, ForwardEnclosures& out,
                    double lambda) {
  Model m = make_model(p);
  m.lambda = lambda;
  const OutputLayout& layout = out.layout;
  const FloatLoader W(p.tables.dtype, p.tables.weights);
  const float* psw = p.lookups.per_sample_weights;
  const std::int64_t K = layout.num_bags;
  const bool track_inputs = m.conv > 0;

#pragma omp parallel
  {
    std::vector<ColumnAcc> cols(static_cast<std::size_t>(kMaxD));
#pragma omp for schedule(dynamic, 8)
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t f = layout.feature_of_bag(k);
      const std::int64_t t = p.tables.feature_table_map[f];
      const std::int64_t D = p.tables.dims[t];
      const std::int64_t base = p.tables.table_offsets[t];
      const std::int64_t o = layout.bag_output_offset(k);
      const std::int64_t s = rr.offsets[k], e = rr.offsets[k + 1];
      if (e <= s) {  // empty bag: exact zeros in every mode
        for (std::int64_t d = 0; d < D; ++d) {
          out.enclosures[o + d] = {0.0, 0.0};
          out.reference[o + d] = 0.0;
        }
        continue;
      }
      std::fill_n(cols.begin(), D, ColumnAcc{});
      for (std::int64_t q = s; q < e; ++q) {
        const std::int64_t row = base + rr.indices[q] * D;  // 64-bit element address
        const double sw = psw ? static_cast<double>(psw[q]) : 1.0;
        const bool sw_repr = !track_inputs || !psw || detail::representable(m.acc, sw);
        for (std::int64_t d = 0; d < D; ++d) {
          ColumnAcc& c = cols[d];
          const double w = W(row + d);
          const double u = sw * w;  // exact: 24-bit × 24-bit significands fit in 53
          c.sum += u;
          if (!std::isfinite(u)) {
            if (std::isnan(u)) c.nan = true;
            else if (u > 0) c.pinf = true;
            else c.ninf = true;
            continue;
          }
          c.absum += std::fabs(u);
          if (track_inputs) {
            c.max_input = std::max({c.max_input, std::fabs(w), std::fabs(sw)});
            if (!sw_repr || !detail::representable(m.acc, w)) c.all_repr = false;
          }
          if (u != 0.0) {
            if (c.all_repr && (psw || track_inputs) && !detail::representable(m.acc, u))
              c.all_repr = false;
            c.min_lsb = std::min(c.min_lsb, detail::lsb_exponent(u));
          }
        }
      }
      const BagBound b = bag_bound(m, e - s);
      for (std::int64_t d = 0; d < D; ++d)
        out.enclosures[o + d] = pooled_enclosure(m, b, cols[d], &out.reference[o + d]);
    }
  }
}

void compute_sequence(const ForwardProblem& p, const RepairResult& rr, ForwardEnclosures& out) {
  const OutputLayout& layout = out.layout;
  const FloatLoader W(p.tables.dtype, p.tables.weights);
  const DType out_t = p.options.policy.output;
  const std::int64_t K = layout.num_bags;
  const std::int64_t D = layout.total_dim;
  // Rows no bag covers stay [0, 0] (value-initialised).
#pragma omp parallel for schedule(dynamic, 8)
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t f = layout.feature_of_bag(k);
    const std::int64_t t = p.tables.feature_table_map[f];
    const std::int64_t base = p.tables.table_offsets[t];
    for (std::int64_t q = rr.offsets[k]; q < rr.offsets[k + 1]; ++q) {
      const std::int64_t row = base + rr.indices[q] * D;
      for (std::int64_t d = 0; d < D; ++d) {
        const double w = W(row + d);
        const double v = round_to(out_t, w);  // a copy: one rounding to the output type
        out.reference[q * D + d] = w;
        out.enclosures[q * D + d] = std::isnan(v) ? nan_point() : Enclosure{v, v};
      }
    }
  }
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string coord_text(const ElementCoord& w) {
  std::string s = "(";
  if (w.space == ElementCoord::Space::IkboLce) {
    return s + "candidate " + std::to_string(w.sample) + ", m " + std::to_string(w.row) + ", n " +
           std::to_string(w.column) + "; flat " + std::to_string(w.flat) + ")";
  }
  if (w.space == ElementCoord::Space::IkboAttention) {
    return s + "row " + std::to_string(w.row) + ", candidate " + std::to_string(w.sample) +
           ", head " + std::to_string(w.head) + ", d " + std::to_string(w.column) + "; flat " +
           std::to_string(w.flat) + ")";
  }
  if (w.table_row) {  // backward: a weight / momentum element of (table, row)
    s += "table " + std::to_string(w.feature) + ", row " + std::to_string(w.row);
    if (w.column >= 0) s += ", column " + std::to_string(w.column);
    return s + "; flat " + std::to_string(w.flat) + ")";
  }
  if (w.lookup_row) {  // NONE (or a per-sample-weight gradient): the row is a lookup position
    s += "row " + std::to_string(w.row);
    if (w.feature >= 0) {
      s += ", feature " + std::to_string(w.feature);
      if (w.rank >= 0) s += ", rank " + std::to_string(w.rank);
      s += ", sample " + std::to_string(w.sample);
    } else {
      s += ", no bag";
    }
  } else if (w.feature >= 0) {
    s += "feature " + std::to_string(w.feature);
    if (w.rank >= 0) s += ", rank " + std::to_string(w.rank);
    s += ", sample " + std::to_string(w.sample);
  }
  if (w.column >= 0) s += ", column " + std::to_string(w.column);  // -1: a per-lookup scalar
  s += "; flat " + std::to_string(w.flat) + ")";
  return s;
}

}  // namespace

ForwardEnclosures compute_forward_enclosures(const ForwardProblem& p) {
  return compute_forward_enclosures(p, EnclosureOptions{});
}

ForwardEnclosures compute_forward_enclosures(const ForwardProblem& p, const EnclosureOptions& o,
                                             double* lambda_out) {
  const bool prob = o.bound == EnclosureOptions::Bound::Probabilistic;
  if (prob && !(o.false_alarm_probability > 0.0 && o.false_alarm_probability < 1.0))
    throw InvalidArgument("false_alarm_probability",
                          "false_alarm_probability: " + std::to_string(o.false_alarm_probability) +
                              " is not in (0, 1)");
  const DType acc = p.options.policy.accumulation;
  if (acc != DType::F64 && acc != DType::F32 && acc != DType::F16 && acc != DType::BF16)
    throw InvalidArgument("options.policy.accumulation",
                          "options.policy.accumulation: " + to_string(acc) +
                              " is not a floating type (fp64, fp32, fp16, bf16)");
  const RepairResult rr = repaired_lookups(p);  // validate + bounds check (may throw)
  ForwardEnclosures out;
  out.layout = make_output_layout(p);
  double lambda = 0.0;
  if (prob && p.options.pooling != PoolingMode::None) {
    // Union bound over every term θ of every element: events = Σ_bags L·D.
    double events = 0.0;
    for (std::int64_t k = 0; k < out.layout.num_bags; ++k)
      events += static_cast<double>(rr.offsets[k + 1] - rr.offsets[k]) *
                static_cast<double>(p.tables.dim_of_feature(out.layout.feature_of_bag(k)));
    if (events > 0) {
      const double u = float_traits(p.options.policy.accumulation).unit_roundoff;
      // 2·events·exp(−λ²(1−u)²/2) <= P  <=>  λ >= sqrt(2·ln(2·events/P)) / (1−u)
      lambda = std::sqrt(2.0 * std::log(2.0 * events / o.false_alarm_probability)) / (1.0 - u);
      lambda *= 1.0 + 0x1p-40;  // round λ up
    }
  }
  if (lambda_out) *lambda_out = lambda;
  const auto numel = static_cast<std::size_t>(out.layout.numel);
  out.enclosures.assign(numel, Enclosure{0.0, 0.0});
  out.reference.assign(numel, 0.0);
  if (p.options.pooling == PoolingMode::None)
    compute_sequence(p, rr, out);
  else
    compute_pooled(p, rr, out, lambda);
  return out;
}

std::vector<Enclosure> forward_enclosures(const ForwardProblem& p) {
  return compute_forward_enclosures(p).enclosures;
}

void judge_element(ElementVerdict& v) {
  const double lo = v.enclosure.lo, hi = v.enclosure.hi, x = v.value;
  if (lo == -kInf && hi == kInf) {  // unconstrained: anything, NaN included
    v.inside = true;
    v.position = 0.0;
    return;
  }
  if (std::isnan(lo) || std::isnan(hi)) {  // the IEEE result is NaN
    v.inside = std::isnan(x);
    v.position = v.inside ? 0.0 : kInf;
    return;
  }
  if (std::isnan(x)) {
    v.inside = false;
    v.position = kInf;
    return;
  }
  v.inside = lo <= x && x <= hi;
  if (lo == hi) {  // a point (finite or infinite)
    v.position = v.inside ? 0.0 : (x > lo ? kInf : -kInf);
    return;
  }
  if (std::isinf(lo) || std::isinf(hi)) {  // half-infinite: no finite radius
    v.position = v.inside ? 0.0 : (x > hi ? kInf : -kInf);
    return;
  }
  const double mid = lo / 2 + hi / 2, rad = hi / 2 - lo / 2;  // no overflow near max_finite
  double pos = (x - mid) / rad;
  if (std::isnan(pos)) pos = x > mid ? kInf : -kInf;  // inf - mid / rad
  // Make the position agree with the exact inside test despite its own rounding.
  constexpr double one_up = 1.0 + 0x1p-52;  // nextafter(1, 2)
  if (v.inside) pos = std::clamp(pos, -1.0, 1.0);
  else if (std::fabs(pos) <= 1.0) pos = x > hi ? one_up : -one_up;
  v.position = pos;
}

CheckReport judge_forward(const ForwardProblem& p, const ForwardEnclosures& enc,
                          std::span<const double> values) {
  const std::int64_t n = static_cast<std::int64_t>(enc.enclosures.size());
  if (static_cast<std::int64_t>(values.size()) != n)
    throw InvalidArgument("values", "values: " + std::to_string(values.size()) +
                                        " elements, the output has " + std::to_string(n));
  const DType out_t = p.options.policy.output;
  CheckReport rep;
  rep.check = "forward";
  rep.policy = to_string(p.options.policy);
  rep.elements = n;

  std::int64_t failures = 0;
  std::int64_t best_flat = -1;
  double best_abs = -1.0;
#pragma omp parallel
  {
    std::int64_t my_flat = -1;
    double my_abs = -1.0;
#pragma omp for reduction(+ : failures) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      ElementVerdict v;
      v.enclosure = enc.enclosures[i];
      v.value = values[i];
      judge_element(v);
      if (std::isfinite(v.value) && !detail::representable(out_t, v.value)) {
        // not a value of the output type: the output was not rounded (or is corrupt)
        v.inside = false;
        v.position = v.value >= v.enclosure.lo ? kInf : -kInf;
      }
      if (!v.inside) ++failures;
      const double a = std::fabs(v.position);
      if (a > my_abs) {  // static schedule: indices ascend within a thread, keep the first
        my_abs = a;
        my_flat = i;
      }
    }
#pragma omp critical(tbe_oracle_worst)
    {
      if (my_flat >= 0 &&
          (my_abs > best_abs || (my_abs == best_abs && my_flat < best_flat))) {
        best_abs = my_abs;
        best_flat = my_flat;
      }
    }
  }
  rep.failures = failures;
  if (best_flat >= 0) {
    ElementVerdict& w = rep.worst;
    w.enclosure = enc.enclosures[best_flat];
    w.value = values[best_flat];
    w.reference = enc.reference[best_flat];
    judge_element(w);
    if (std::isfinite(w.value) && !detail::representable(out_t, w.value)) {
      w.inside = false;
      w.position = w.value >= w.enclosure.lo ? kInf : -kInf;
    }
    w.where = locate_output_element(p, enc.layout, best_flat);
  }
  return rep;
}

CheckReport check_forward_values(const ForwardProblem& p, std::span<const double> values) {
  return judge_forward(p, compute_forward_enclosures(p), values);
}

CheckReport check_forward(const ForwardProblem& p, const void* output) {
  const ForwardEnclosures enc = compute_forward_enclosures(p);
  const std::int64_t n = enc.layout.numel;
  if (n > 0 && output == nullptr)
    throw InvalidArgument("output", "output: null pointer for " + std::to_string(n) +
                                        " elements");
  std::vector<double> values(static_cast<std::size_t>(n));
  const DType out_t = p.options.policy.output;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) values[i] = load_as_double(out_t, output, i);
  return judge_forward(p, enc, values);
}

ElementCoord locate_output_element(const ForwardProblem& p, const OutputLayout& layout,
                                   std::int64_t flat) {
  ElementCoord c;
  c.flat = flat;
  if (flat < 0 || flat >= layout.numel || layout.total_dim <= 0) return c;
  const std::int64_t T = layout.num_features;
  const bool vbe = !layout.vbe_bag_offset.empty();
  const std::int64_t R = vbe && T > 0 ? static_cast<std::int64_t>(layout.vbe_bag_offset.size()) / T
                                      : 0;
  // Rank of bag k of feature f under VBE (last rank whose first bag is <= k).
  auto rank_of = [&](std::int64_t f, std::int64_t k) {
    const auto first = layout.vbe_bag_offset.begin() + f * R;
    return static_cast<std::int64_t>(std::upper_bound(first, first + R, k) - first) - 1;
  };

  if (p.options.pooling == PoolingMode::None) {
    const std::int64_t D = layout.total_dim;
    c.lookup_row = true;
    c.row = flat / D;
    c.column = flat % D;
    std::vector<std::int64_t> offsets;
    try {
      offsets = repair(p).offsets;
    } catch (const Error&) {  // FATAL with a violation: locate on the caller's offsets
      offsets.resize(static_cast<std::size_t>(p.lookups.num_offsets));
      for (std::int64_t i = 0; i < p.lookups.num_offsets; ++i)
        offsets[i] = load_index(p.lookups.index_dtype, p.lookups.offsets, i);
    }
    const std::int64_t K = static_cast<std::int64_t>(offsets.size()) - 1;
    const std::int64_t k =
        static_cast<std::int64_t>(std::upper_bound(offsets.begin(), offsets.end(), c.row) -
                                  offsets.begin()) - 1;
    if (k >= 0 && k < K && offsets[k] <= c.row && c.row < offsets[k + 1]) {
      c.feature = layout.feature_of_bag(k);
      c.sample = k - layout.feature_bag_offset[c.feature];
      if (vbe) c.rank = rank_of(c.feature, k);
    }
    return c;
  }

  if (!vbe) {
    const std::int64_t b = flat / layout.total_dim;
    const std::int64_t col = flat % layout.total_dim;
    const auto it = std::upper_bound(layout.feature_col_offset.begin(),
                                     layout.feature_col_offset.end(), col);
    c.feature = static_cast<std::int64_t>(it - layout.feature_col_offset.begin()) - 1;
    c.sample = b;
    c.row = b;
    c.column = col - layout.feature_col_offset[c.feature];
    return c;
  }
  // VBE: find the (rank, feature) block holding flat.
  for (std::int64_t f = 0; f < T; ++f) {
    const std::int64_t Df = layout.feature_col_offset[f + 1] - layout.feature_col_offset[f];
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t start = layout.vbe_output_offset[f * R + r];
      const std::int64_t size = static_cast<std::int64_t>(p.lookups.vbe_batch_sizes[f * R + r]) * Df;
      if (flat >= start && flat < start + size) {
        const std::int64_t local = flat - start;
        const std::int64_t k = layout.vbe_bag_offset[f * R + r] + local / Df;
        c.feature = f;
        c.rank = r;
        c.sample = k - layout.feature_bag_offset[f];
        c.column = local % Df;
        return c;
      }
    }
  }
  return c;
}

std::string CheckReport::summary() const {
  std::string s = check + " [" + policy + "]: " + std::to_string(failures) + "/" +
                  std::to_string(elements) + " outside";
  if (elements == 0) return s + " (empty output)";
  const ElementVerdict& w = worst;
  s += "; worst " + coord_text(w.where) + " value " + fmt("%.9g", w.value) + " in [" +
       fmt("%.9g", w.enclosure.lo) + ", " + fmt("%.9g", w.enclosure.hi) + "] at " +
       fmt("%+.3g", w.position) + " radius (reference " + fmt("%.17g", w.reference) + ")";
  return s;
}

}  // namespace tbe::oracle
