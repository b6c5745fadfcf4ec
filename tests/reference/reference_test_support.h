// Shared helpers of the reference tests: hand-built cases, a RapidCheck generator of VALID forward
// problems (by construction, never by discarding) with edge sizes, and counterexample printers.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tbe/forward.h"
#include "tbe/host_case.h"
#include "tbe/workloads.h"

namespace tbe_test {

using namespace tbe;

/// Forward in FP64 of an owning case.
inline std::vector<double> fwd64(ForwardCase& c, ForwardStats* st = nullptr) {
  return forward_reference_fp64(c.view(), st);
}

/// A single-table case with W[r][d] = value(r, d), non-VBE, FP32 storage and output, SUM.
template <class F>
ForwardCase one_table_case(std::int64_t E, std::int32_t D, std::int64_t B,
                           std::vector<std::int64_t> indices, std::vector<std::int64_t> offsets,
                           F value, DType wdt = DType::F32) {
  ForwardCase c;
  c.set_tables(wdt, {E}, {D});
  c.feature_table_map = {0};
  for (std::int64_t r = 0; r < E; ++r)
    for (std::int64_t d = 0; d < D; ++d) c.set_weight(0, r, d, value(r, d));
  c.indices = std::move(indices);
  c.offsets = std::move(offsets);
  c.batch_size = B;
  c.options.policy = make_policy(PolicyKind::SeedDefault, wdt, DType::F32);
  c.options.pooling = PoolingMode::Sum;
  c.options.bounds_check = BoundsCheckMode::Warning;
  return c;
}

/// What the generator may produce.
struct GenOptions {
  bool exact = true;           ///< small-integer fills and dyadic per-sample weights: FP64 sums exact
  bool allow_vbe = true;
  bool allow_weighted = true;
  bool allow_none = true;      ///< NONE pooling (forces one D and unweighted)
  bool allow_mean = true;
  bool force_sum = false;      ///< pooling SUM only
};

/// A generated valid case with a description of the random choices.
struct GenCase {
  ForwardCase c;
  std::uint64_t content_seed = 0;
};

inline std::int64_t num_bags(const ForwardCase& c) {
  return static_cast<std::int64_t>(c.offsets.size()) - 1;
}

/// Feature of every bag of a (VBE or not) case.
inline std::vector<std::int64_t> bag_features(const ForwardCase& c) {
  std::vector<std::int64_t> out;
  const std::int64_t T = c.num_features();
  for (std::int64_t f = 0; f < T; ++f) {
    std::int64_t n = c.batch_size;
    if (!c.vbe_batch_sizes.empty()) {
      n = 0;
      for (std::int64_t r = 0; r < c.vbe_ranks; ++r) n += c.vbe_batch_sizes[f * c.vbe_ranks + r];
    }
    out.insert(out.end(), static_cast<std::size_t>(n), f);
  }
  return out;
}

/// Structure from RapidCheck (shrinks), contents (rows, indices, weights) from a seeded tbe::Rng.
/// Edge sizes: L in {0, 1, 255, 256, 257}, odd D, D = 2048, tiny E (forces duplicates).
/// Work is bounded (Σ L·D <= ~1.5M) so 100 cases of a property run in well under a second.
inline rc::Gen<GenCase> gen_case(GenOptions opt = {}) {
  return rc::gen::exec([opt]() {
    GenCase g;
    ForwardCase& c = g.c;
    g.content_seed = *rc::gen::arbitrary<std::uint64_t>();
    tbe::Rng rng(g.content_seed, 7);

    std::vector<PoolingMode> poolings = {PoolingMode::Sum};
    if (!opt.force_sum) {
      if (opt.allow_mean) poolings.push_back(PoolingMode::Mean);
      if (opt.allow_none) poolings.push_back(PoolingMode::None);
    }
    const PoolingMode pooling = *rc::gen::elementOf(poolings);
    const bool none = pooling == PoolingMode::None;

    const int num_tables = *rc::gen::inRange(1, 4);
    std::vector<std::int64_t> rows(num_tables);
    std::vector<std::int32_t> dims(num_tables);
    for (int t = 0; t < num_tables; ++t) {
      rows[t] = *rc::gen::weightedOneOf<std::int64_t>(
          {{3, rc::gen::inRange<std::int64_t>(1, 4)}, {5, rc::gen::inRange<std::int64_t>(1, 60)}});
      dims[t] = *rc::gen::weightedOneOf<std::int32_t>(
          {{6, rc::gen::inRange<std::int32_t>(1, 10)},
           {3, rc::gen::elementOf(std::vector<std::int32_t>{3, 7, 17, 31, 33, 64, 127, 129})},
           {1, rc::gen::just<std::int32_t>(2048)}});
    }
    if (none) std::fill(dims.begin(), dims.end(), dims[0]);
    const DType wdt = *rc::gen::elementOf(std::vector<DType>{DType::F32, DType::F16, DType::BF16});
    const DType odt = *rc::gen::elementOf(std::vector<DType>{DType::F32, DType::F16, DType::BF16});
    c.set_tables(wdt, rows, dims);
    // Contents: small integers (exact sums everywhere) or uniform [-1, 1) rounded to storage.
    for (int t = 0; t < num_tables; ++t)
      for (std::int64_t r = 0; r < rows[t]; ++r)
        for (std::int64_t d = 0; d < dims[t]; ++d)
          c.set_weight(t, r, d,
                       opt.exact ? static_cast<double>(rng.uniform_int(17) - 8)
                                 : 2.0 * rng.uniform() - 1.0);

    const int T = *rc::gen::inRange(1, 5);
    c.feature_table_map.resize(T);
    for (int f = 0; f < T; ++f) c.feature_table_map[f] = *rc::gen::inRange(0, num_tables);

    const bool vbe = opt.allow_vbe && *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    std::int64_t K = 0;
    if (vbe) {
      c.vbe_ranks = *rc::gen::inRange(1, 4);
      c.vbe_batch_sizes.resize(static_cast<std::size_t>(T) * c.vbe_ranks);
      for (auto& b : c.vbe_batch_sizes) {
        b = *rc::gen::inRange(0, 4);
        K += b;
      }
      c.batch_size = 0;
    } else {
      c.batch_size = *rc::gen::weightedOneOf<std::int64_t>(
          {{1, rc::gen::just<std::int64_t>(0)}, {8, rc::gen::inRange<std::int64_t>(1, 5)}});
      K = T * c.batch_size;
    }
    const std::vector<std::int64_t> feats = bag_features(c);

    // Offsets: a possibly non-zero start (indices before it belong to no bag), then lengths.
    const std::int64_t lead = *rc::gen::weightedElement<std::int64_t>({{5, 0}, {1, 2}});
    c.offsets.assign(static_cast<std::size_t>(K) + 1, lead);
    std::int64_t budget = 1500000;  // Σ L·D
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t D = dims[c.feature_table_map[feats[k]]];
      std::int64_t L = *rc::gen::weightedOneOf<std::int64_t>(
          {{10, rc::gen::inRange<std::int64_t>(0, 6)},
           {2, rc::gen::elementOf(std::vector<std::int64_t>{0, 1, 255, 256, 257})}});
      if (L * D > budget) L = std::min<std::int64_t>(L, 2);
      budget -= L * D;
      c.offsets[k + 1] = c.offsets[k] + L;
    }
    const std::int64_t N = c.offsets[K];
    c.indices.assign(static_cast<std::size_t>(N), 0);
    for (std::int64_t q = 0; q < lead && q < N; ++q)
      c.indices[q] = static_cast<std::int64_t>(rng.uniform_int(1000)) - 500;  // never looked at
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t E = rows[c.feature_table_map[feats[k]]];
      for (std::int64_t q = c.offsets[k]; q < c.offsets[k + 1]; ++q) c.indices[q] = rng.uniform_int(E);
    }
    const bool weighted = opt.allow_weighted && !none && *rc::gen::arbitrary<bool>();
    if (weighted) {
      c.per_sample_weights.resize(static_cast<std::size_t>(N));
      for (auto& w : c.per_sample_weights)
        w = opt.exact ? static_cast<float>(static_cast<double>(rng.uniform_int(9)) * 0.5 - 2.0)
                      : static_cast<float>(0.5 + rng.uniform());
    }
    c.index_dtype = *rc::gen::elementOf(std::vector<DType>{DType::I32, DType::I64});
    c.options.pooling = pooling;
    c.options.bounds_check =
        *rc::gen::elementOf(std::vector<BoundsCheckMode>{BoundsCheckMode::Fatal,
                                                         BoundsCheckMode::Warning,
                                                         BoundsCheckMode::Ignore,
                                                         BoundsCheckMode::None});
    c.options.policy = make_policy(PolicyKind::SeedDefault, wdt, odt);
    return g;
  });
}

/// Prints a case for counterexamples: the structure always, the index stream when short.
inline void print_case(const ForwardCase& c, std::ostream& os) {
  auto list = [&os](const auto& v, std::size_t limit = 64) {
    os << "[";
    for (std::size_t i = 0; i < v.size() && i < limit; ++i) os << (i ? ", " : "") << +v[i];
    if (v.size() > limit) os << ", ... (" << v.size() << " total)";
    os << "]";
  };
  os << "ForwardCase{weights=" << to_string(c.weights_dtype) << " rows=";
  list(c.rows);
  os << " dims=";
  list(c.dims);
  os << " feature_table_map=";
  list(c.feature_table_map);
  os << " index_dtype=" << to_string(c.index_dtype) << " B=" << c.batch_size;
  if (!c.vbe_batch_sizes.empty()) {
    os << " vbe_ranks=" << c.vbe_ranks << " vbe_batch_sizes=";
    list(c.vbe_batch_sizes);
  }
  os << " offsets=";
  list(c.offsets);
  os << " indices=";
  list(c.indices);
  if (!c.per_sample_weights.empty()) {
    os << " per_sample_weights=";
    list(c.per_sample_weights);
  }
  os << " pooling=" << to_string(c.options.pooling)
     << " bounds_check=" << to_string(c.options.bounds_check)
     << " policy=" << to_string(c.options.policy) << "}";
}

inline void showValue(const GenCase& g, std::ostream& os) {
  os << "content_seed=" << g.content_seed << " ";
  print_case(g.c, os);
}

}  // namespace tbe_test
