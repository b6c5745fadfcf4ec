// Test support for tests/oracle: a compact, printable description of a random forward problem
// (CaseSpec) that RapidCheck generates and shrinks, and the deterministic builder that expands it
// into a ForwardCase (big arrays come from a seeded tbe::Rng stream, so RapidCheck only has to
// handle the structure). Problems are valid by construction (no discarding).
#pragma once

#include <catch2/catch.hpp>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "tbe/case_builder.h"
#include "tbe/host_case.h"
#include "tbe/precision.h"
#include "tbe/rng.h"

namespace tbe::oracle::testing {

/// The case builders' seeded generator: tbe::Rng's plain splitmix64 sequence from the printable
/// seed (Rng::from_state), with the draws the builders use.
class CaseRng {
 public:
  explicit CaseRng(std::uint64_t seed) : rng_(Rng::from_state(seed)) {}
  std::uint64_t next() { return rng_.next_u64(); }
  /// Integer in [lo, hi] (hi <= lo gives lo) by one draw mod (hi - lo + 1): the slight bias does
  /// not matter for test data, and a seed keeps rebuilding the same case.
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  double unit() { return rng_.uniform(); }  ///< [0, 1), 53 bits
  bool coin(double p_true = 0.5) { return unit() < p_true; }

 private:
  Rng rng_;
};

/// How weight values are drawn.
enum class ValueMode : int {
  SmallIntegers = 0,  ///< integers in [-8, 8]: every result exact
  Binades = 1,        ///< random sign and significand, exponents spread over many binades
  Cancellation = 2,   ///< ±2^e0·(1 + small): long bags cancel heavily
  NearUnderflow = 3,  ///< magnitudes near the type's smallest subnormal/normal
};
/// How per-sample weights are drawn (None = unweighted).
enum class SampleWeightMode : int { None = 0, NearOne = 1, Binades = 2, PowersOfTwo = 3, Tiny = 4 };

/// A printable recipe for one forward problem.
struct CaseSpec {
  std::uint64_t seed = 1;
  PolicyKind policy = PolicyKind::SeedDefault;
  DType weights = DType::F32;
  DType output = DType::F32;
  PoolingMode pooling = PoolingMode::Sum;
  BoundsCheckMode bounds_check = BoundsCheckMode::Warning;
  DType index_dtype = DType::I64;
  int num_tables = 1;
  int num_features = 1;           ///< T
  std::vector<int> dims;          ///< [num_tables]
  std::vector<int> rows;          ///< [num_tables] E (small: duplicates)
  bool vbe = false;
  int ranks = 1;                  ///< R (VBE)
  int batch = 1;                  ///< B (non-VBE) / max batch size per (f, r) (VBE)
  int bag_length_mode = 0;        ///< 0 small, 1 edges {0,1,2,255,256,257}, 2 random <= 600, 3 mix
  ValueMode values = ValueMode::Binades;
  int exponent_spread = 20;       ///< binades spanned by Binades mode
  SampleWeightMode sample_weights = SampleWeightMode::None;
  bool inject_bad = false;        ///< a few bad indices / offsets (repaired under WARNING/IGNORE)
};


inline void showValue(const CaseSpec& s, std::ostream& os) {
  os << "CaseSpec{seed=" << s.seed << ", policy=" << to_string(s.policy)
     << ", w=" << to_string(s.weights) << ", out=" << to_string(s.output)
     << ", pooling=" << to_string(s.pooling) << ", bounds=" << to_string(s.bounds_check)
     << ", index=" << to_string(s.index_dtype) << ", tables=" << s.num_tables
     << ", T=" << s.num_features << ", dims=[";
  for (int d : s.dims) os << d << ",";
  os << "], rows=[";
  for (int r : s.rows) os << r << ",";
  os << "], vbe=" << s.vbe << ", R=" << s.ranks << ", B=" << s.batch
     << ", L-mode=" << s.bag_length_mode << ", values=" << static_cast<int>(s.values)
     << ", spread=" << s.exponent_spread << ", psw=" << static_cast<int>(s.sample_weights)
     << ", bad=" << s.inject_bad << "}";
}
inline std::ostream& operator<<(std::ostream& os, const CaseSpec& s) {
  showValue(s, os);
  return os;
}

/// Exponent range [lo, hi] of finite normal-ish values we draw for storage type t (kept well
/// below overflow of an FP32 accumulator after ~600 terms times sample weights <= 2^8).
inline void exponent_range(DType t, int* lo, int* hi) {
  switch (t) {
    case DType::F16: *lo = -24; *hi = 12; break;
    case DType::BF16: *lo = -133; *hi = 100; break;
    default: *lo = -149; *hi = 100; break;
  }
}

/// A value of type t drawn per `mode` (rounded into t by set_weight anyway).
inline double draw_value(CaseRng& g, DType t, ValueMode mode, int e0, int spread) {
  int elo, ehi;
  exponent_range(t, &elo, &ehi);
  const double sign = g.coin() ? -1.0 : 1.0;
  switch (mode) {
    case ValueMode::SmallIntegers: return static_cast<double>(g.range(-8, 8));
    case ValueMode::Binades: {
      const int e = std::clamp<int>(e0 + static_cast<int>(g.range(0, spread)), elo, ehi);
      return sign * std::ldexp(1.0 + g.unit(), e);
    }
    case ValueMode::Cancellation: {
      const int e = std::clamp<int>(e0, elo, ehi);
      const double small = std::ldexp(g.unit(), -static_cast<int>(g.range(1, 20)));
      return sign * std::ldexp(1.0 + small, e);
    }
    case ValueMode::NearUnderflow: {
      const int e = elo + static_cast<int>(g.range(0, 30));
      return sign * std::ldexp(1.0 + g.unit(), e);
    }
  }
  return 0.0;
}

inline float draw_sample_weight(CaseRng& g, SampleWeightMode mode) {
  const double sign = g.coin(0.3) ? -1.0 : 1.0;
  switch (mode) {
    case SampleWeightMode::None: return 1.0f;
    case SampleWeightMode::NearOne: return static_cast<float>(sign * (1.0 + (g.unit() - 0.5) * 1e-3));
    case SampleWeightMode::Binades:
      return static_cast<float>(sign * std::ldexp(1.0 + g.unit(), static_cast<int>(g.range(-20, 8))));
    case SampleWeightMode::PowersOfTwo:
      return static_cast<float>(sign * std::ldexp(1.0, static_cast<int>(g.range(-6, 6))));
    case SampleWeightMode::Tiny:
      return static_cast<float>(sign * std::ldexp(1.0 + g.unit(), static_cast<int>(g.range(-60, -20))));
  }
  return 1.0f;
}

inline std::int64_t draw_bag_length(CaseRng& g, int mode) {
  static constexpr std::int64_t kEdges[] = {0, 1, 2, 255, 256, 257};
  switch (mode) {
    case 0: return g.range(0, 6);
    case 1: return kEdges[g.range(0, 5)];
    case 2: return g.range(0, 600);
    default: {
      const auto r = g.range(0, 9);
      if (r < 6) return g.range(0, 5);
      if (r < 8) return kEdges[g.range(0, 5)];
      return g.range(0, 600);
    }
  }
}

/// Expands a spec into a valid forward case (laid out by tbe::build_case; the draws, in order:
/// e0, every weight, the map, VBE sizes, the leading gap, every bag, per-sample weights, faults).
inline ForwardCase build_case(const CaseSpec& s) {
  CaseRng g(s.seed);
  tbe::ForwardCaseSpec spec;
  spec.weights = s.weights;
  spec.rows.assign(s.rows.begin(), s.rows.end());
  spec.dims.assign(s.dims.begin(), s.dims.end());
  int elo, ehi;
  exponent_range(s.weights, &elo, &ehi);
  const int e0_lo = std::max(elo, -40);
  const int e0 = static_cast<int>(
      g.range(e0_lo, std::max(e0_lo, std::min(ehi - s.exponent_spread, 20))));
  std::vector<std::vector<double>> values(s.num_tables);  // [t][r·D_t + d]
  for (int t = 0; t < s.num_tables; ++t)
    for (int r = 0; r < s.rows[t]; ++r)
      for (int d = 0; d < s.dims[t]; ++d)
        values[t].push_back(draw_value(g, s.weights, s.values, e0, s.exponent_spread));
  spec.fill = [&](std::int64_t t, std::int64_t r, std::int64_t d) {
    return values[t][r * s.dims[t] + d];
  };
  spec.feature_table_map.resize(s.num_features);
  for (int f = 0; f < s.num_features; ++f)
    spec.feature_table_map[f] = static_cast<std::int32_t>(g.range(0, s.num_tables - 1));
  // Bags: feature-major; VBE rank-major inside a feature.
  std::int64_t num_bags = 0;
  if (s.vbe) {
    spec.vbe_ranks = s.ranks;
    spec.vbe_batch_sizes.resize(static_cast<std::size_t>(s.num_features) * s.ranks);
    for (auto& b : spec.vbe_batch_sizes) {
      b = static_cast<std::int32_t>(g.range(0, s.batch));
      num_bags += b;
    }
  } else {
    spec.batch_size = s.batch;
    num_bags = static_cast<std::int64_t>(s.num_features) * s.batch;
  }
  const std::int64_t B = s.batch;
  if (g.coin(0.1))  // offsets[0] > 0: indices before it belong to no bag
    spec.leading.assign(static_cast<std::size_t>(g.range(1, 3)), 0);
  std::int64_t N = static_cast<std::int64_t>(spec.leading.size());
  for (std::int64_t k = 0; k < num_bags; ++k) {
    std::int64_t f;
    if (s.vbe) {
      std::int64_t acc = 0;
      f = 0;
      for (int ff = 0; ff < s.num_features; ++ff) {
        std::int64_t nb = 0;
        for (int r = 0; r < s.ranks; ++r) nb += spec.vbe_batch_sizes[ff * s.ranks + r];
        if (k < acc + nb) { f = ff; break; }
        acc += nb;
      }
    } else {
      f = k / B;
    }
    const std::int64_t E = s.rows[spec.feature_table_map[f]];
    const std::int64_t L = draw_bag_length(g, s.bag_length_mode);
    std::vector<std::int64_t>& bag = spec.bags.emplace_back();
    for (std::int64_t q = 0; q < L; ++q) bag.push_back(g.range(0, E - 1));
    N += L;
  }
  if (s.sample_weights != SampleWeightMode::None) {
    spec.per_sample_weights.resize(N);
    for (auto& w : spec.per_sample_weights) w = draw_sample_weight(g, s.sample_weights);
  }
  spec.index_dtype = s.index_dtype;
  spec.options.pooling = s.pooling;
  spec.options.bounds_check = s.bounds_check;
  spec.options.policy = make_policy(s.policy, s.weights, s.output);
  ForwardCase c = tbe::build_case(spec);
  if (s.inject_bad && N > 0) {  // only under WARNING / IGNORE (the generator guarantees it)
    const auto bad = g.range(1, 3);
    for (std::int64_t i = 0; i < bad; ++i) {
      const auto q = g.range(0, N - 1);
      c.indices[q] = g.coin() ? -1 : 1000000;  // never a valid row (E <= 9)
    }
    if (num_bags > 1 && g.coin()) {  // a decreasing offset (a bad bag)
      const auto k = g.range(1, num_bags - 1);
      c.offsets[k] = c.offsets[k] + g.range(1, 5);
    }
  }
  return c;
}

/// RapidCheck generator of specs: T, mixed D (incl. 1 and odd), small E, every L edge, weighted
/// or not, SUM/MEAN/NONE, VBE sometimes, all weight/output types, both policies.
inline rc::Gen<CaseSpec> gen_case_spec() {
  return rc::gen::exec([] {
    CaseSpec s;
    s.seed = *rc::gen::arbitrary<std::uint64_t>();
    s.policy = *rc::gen::element(PolicyKind::SeedDefault, PolicyKind::FbgemmCuda);
    s.weights = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
    s.output = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
    s.pooling = *rc::gen::element(PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None);
    s.index_dtype = *rc::gen::element(DType::I32, DType::I64);
    s.num_tables = *rc::gen::inRange(1, 4);
    s.num_features = *rc::gen::inRange(1, 5);
    static const int kDims[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33};
    const int shared_dim = *rc::gen::elementOf(std::vector<int>(std::begin(kDims), std::end(kDims)));
    for (int t = 0; t < s.num_tables; ++t) {
      s.dims.push_back(s.pooling == PoolingMode::None
                           ? shared_dim
                           : *rc::gen::elementOf(std::vector<int>(std::begin(kDims), std::end(kDims))));
      s.rows.push_back(*rc::gen::inRange(1, 10));
    }
    s.vbe = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    s.ranks = s.vbe ? *rc::gen::inRange(1, 4) : 1;
    s.batch = *rc::gen::weightedElement<int>({{1, 0}, {3, 1}, {3, 2}, {3, 3}, {2, 4}, {2, 5}});
    s.bag_length_mode = *rc::gen::weightedElement<int>({{1, 0}, {2, 1}, {2, 2}, {3, 3}});
    s.values = *rc::gen::element(ValueMode::SmallIntegers, ValueMode::Binades,
                                 ValueMode::Cancellation, ValueMode::NearUnderflow);
    s.exponent_spread = *rc::gen::inRange(0, 40);
    s.sample_weights = s.pooling == PoolingMode::None
                           ? SampleWeightMode::None
                           : *rc::gen::element(SampleWeightMode::None, SampleWeightMode::NearOne,
                                               SampleWeightMode::Binades,
                                               SampleWeightMode::PowersOfTwo,
                                               SampleWeightMode::Tiny);
    s.bounds_check = *rc::gen::weightedElement<BoundsCheckMode>(
        {{4, BoundsCheckMode::Warning}, {1, BoundsCheckMode::Ignore},
         {1, BoundsCheckMode::Fatal}, {1, BoundsCheckMode::None}});
    const bool repairing = s.bounds_check == BoundsCheckMode::Warning ||
                           s.bounds_check == BoundsCheckMode::Ignore;
    s.inject_bad = repairing && *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
    return s;
  });
}

/// rc::prop with `max_success` cases unless RC_PARAMS sets max_success explicitly (RC_PARAMS
/// "seed=..." replays a failure; RapidCheck prints the seed and the shrunk counterexample).
template <typename Testable>
void prop_n(const std::string& description, int max_success, Testable&& testable) {
  SECTION(description) {
    rc::detail::TestParams params = rc::detail::configuration().testParams;
    const char* env = std::getenv("RC_PARAMS");
    if (env == nullptr || std::string(env).find("max_success") == std::string::npos)
      params.maxSuccess = max_success;
    rc::detail::TestMetadata metadata;
    metadata.id = description;
    metadata.description = description;
    const auto result =
        rc::detail::checkTestable(std::forward<Testable>(testable), metadata, params);
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    if (result.template is<rc::detail::SuccessResult>()) {
      SUCCEED(ss.str());
    } else {
      INFO(ss.str() << "\n");
      FAIL();
    }
  }
}

/// A hand-made case: one table E x D of `w`, T = 1, bags as given (B = bags.size()), filled with
/// fill(r, d) (rounded into w), under make_policy(kind, w, out).
template <class Fill>
ForwardCase single_table_case(DType w, DType out, PolicyKind kind, PoolingMode pooling,
                              std::int64_t E, std::int32_t D,
                              const std::vector<std::vector<std::int64_t>>& bags, Fill fill) {
  tbe::ForwardCaseSpec spec;
  spec.weights = w;
  spec.rows = {E};
  spec.dims = {D};
  spec.fill = [&](std::int64_t, std::int64_t r, std::int64_t d) { return fill(r, d); };
  spec.feature_table_map = {0};
  spec.batch_size = static_cast<std::int64_t>(bags.size());
  spec.bags = bags;
  spec.options.pooling = pooling;
  spec.options.bounds_check = BoundsCheckMode::Fatal;
  spec.options.policy = make_policy(kind, w, out);
  return tbe::build_case(spec);
}

}  // namespace tbe::oracle::testing
