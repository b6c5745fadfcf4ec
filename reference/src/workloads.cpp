// Seeded, reproducible index generators and named workloads (workloads.h, docs/workloads.md).
//
// Reproducibility: every random decision draws from a counter-based stream Rng(seed, key) whose
// key names what is drawn (purpose, feature/table, bag/row). Bags, rows and VBE sizes are thus
// independent of evaluation order, so OpenMP thread count and schedule never change the output.
#include "tbe/workloads.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "parallel_internal.h"
#include "tbe/errors.h"

namespace tbe {

namespace {

// What a stream draws; part of its key so different purposes never share a stream.
enum class Purpose : std::uint64_t { Length = 1, Index, SampleWeight, Weight, VbeSize, Permutation };

std::uint64_t stream_key(Purpose purpose, std::uint64_t a, std::uint64_t b) {
  const std::uint64_t p = static_cast<std::uint64_t>(purpose);
  const std::uint64_t h = splitmix64_mix(p * kSplitMix64Gamma + a);
  return splitmix64_mix(h + b * 0xD1B54A32D192ED03ull);
}

// ---- bag contents ------------------------------------------------------------------------------

// A small open-addressing set of non-negative int64 (bag-local distinctness test).
class SmallSet {
 public:
  void reset(std::size_t expected) {
    std::size_t cap = 16;
    while (cap < 2 * expected + 2) cap *= 2;
    slots_.assign(cap, -1);
    mask_ = cap - 1;
  }
  // Inserts v; returns false if it was already present.
  bool insert(std::int64_t v) {
    std::size_t h = static_cast<std::size_t>(splitmix64_mix(static_cast<std::uint64_t>(v))) & mask_;
    while (slots_[h] != -1) {
      if (slots_[h] == v) return false;
      h = (h + 1) & mask_;
    }
    slots_[h] = v;
    return true;
  }

 private:
  std::vector<std::int64_t> slots_;
  std::size_t mask_ = 0;
};

// L distinct rows uniform in [0, E) in draw order (requires L <= E); partial Fisher-Yates when
// the bag covers a large part of the table, rejection otherwise.
void uniform_distinct(Rng& rng, std::int64_t E, std::int64_t L, std::int64_t* out, SmallSet& set) {
  if (2 * L > E) {
    std::vector<std::int64_t> pool(static_cast<std::size_t>(E));
    std::iota(pool.begin(), pool.end(), 0);
    for (std::int64_t j = 0; j < L; ++j) {
      std::swap(pool[j], pool[j + rng.uniform_int(E - j)]);
      out[j] = pool[j];
    }
    return;
  }
  set.reset(static_cast<std::size_t>(L));
  for (std::int64_t j = 0; j < L;) {
    const std::int64_t v = rng.uniform_int(E);
    if (set.insert(v)) out[j++] = v;
  }
}

// Truncated Zipf-like tail of the heavy-hitter generator: P(k) ∝ (k + q + H)^-s on [0, n),
// sampled by inverse CDF (binary search in the cumulative table).
struct TailCdf {
  std::vector<double> cdf;  // [n] cumulative, cdf.back() == 1
  std::int64_t sample(Rng& rng) const {
    const double u = rng.uniform();
    auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
    return std::min<std::int64_t>(it - cdf.begin(), static_cast<std::int64_t>(cdf.size()) - 1);
  }
};
TailCdf make_tail_cdf(std::int64_t n, double q, std::int64_t H, double s) {
  TailCdf t;
  t.cdf.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  double acc = 0.0;
  for (std::int64_t k = 0; k < n; ++k) {
    acc += std::pow(static_cast<double>(k) + q + static_cast<double>(H), -s);
    t.cdf[k] = acc;
  }
  for (double& c : t.cdf) c /= acc;
  if (n > 0) t.cdf.back() = 1.0;
  return t;
}

// Per-table generator state shared by all bags of the tables with the same E.
struct TableSampler {
  std::int64_t E = 1;
  const std::vector<std::int64_t>* permutation = nullptr;  // Zipf rank -> row
  const TailCdf* tail = nullptr;                            // HeavyHitters
  std::int64_t hot = 0;                                     // HeavyHitters: H, clipped to E
};

// Writes the L lookups of one bag.
void fill_bag(const WorkloadSpec& spec, const TableSampler& ts, Rng& rng, std::int64_t L,
              std::int64_t* out, SmallSet& set) {
  const std::int64_t E = ts.E;
  switch (spec.distribution) {
    case IndexDistribution::Uniform:
      for (std::int64_t j = 0; j < L; ++j) out[j] = rng.uniform_int(E);
      std::sort(out, out + L);
      return;
    case IndexDistribution::HotRow:
      if (L == 0) return;
      out[0] = 0;
      for (std::int64_t j = 1; j < L; ++j) out[j] = rng.uniform_int(E);
      std::sort(out, out + L);
      return;
    case IndexDistribution::Zipf: {
      // FBGEMM style: 3L ranks k >= 1, (k - 1) mod E, the first L distinct in draw order.
      std::int64_t kept = 0;
      if (L <= E) {
        set.reset(static_cast<std::size_t>(L));
        for (std::int64_t draw = 0; draw < 3 * L && kept < L; ++draw) {
          const std::int64_t rank = (rng.zipf(spec.zipf_alpha) - 1) % E;
          if (set.insert(rank)) out[kept++] = rank;
        }
      }
      if (kept < L) {
        // Fallback: uniform rows, distinct when the table is large enough (L <= E).
        if (L <= E) {
          uniform_distinct(rng, E, L, out, set);
        } else {
          for (std::int64_t j = 0; j < L; ++j) out[j] = rng.uniform_int(E);
        }
        return;  // uniform rows need no rank -> row map
      }
      for (std::int64_t j = 0; j < L; ++j) out[j] = (*ts.permutation)[out[j]];
      return;
    }
    case IndexDistribution::HeavyHitters:
      for (std::int64_t j = 0; j < L; ++j) {
        if (ts.hot >= E || rng.uniform() < spec.hot_probability) {
          out[j] = rng.uniform_int(ts.hot);  // one of the H hot ids 0 .. H-1
        } else {
          out[j] = ts.hot + ts.tail->sample(rng);
        }
      }
      return;
  }
}

std::int64_t draw_length(const WorkloadSpec& spec, double mean, Rng& rng) {
  switch (spec.lengths) {
    case LengthDistribution::Fixed: return std::max<std::int64_t>(std::llround(mean), 0);
    case LengthDistribution::Normal: {
      const double v = std::nearbyint(mean + spec.length_spread * rng.normal());
      return v <= 0 ? 0 : static_cast<std::int64_t>(v);
    }
    case LengthDistribution::Uniform: {
      const std::int64_t lo = static_cast<std::int64_t>(std::llround(mean - spec.length_spread));
      const std::int64_t hi = static_cast<std::int64_t>(std::llround(mean + spec.length_spread));
      const std::int64_t v = lo + rng.uniform_int(hi - lo + 1);
      return std::max<std::int64_t>(v, 0);
    }
  }
  return 0;
}

[[noreturn]] void bad_spec(const std::string& arg, const std::string& msg) {
  throw InvalidArgument(arg, arg + ": " + msg);
}

// Fills rows of one table, one stream per (table, row). Each 64-bit draw gives two values
// (two disjoint 24-bit fields; Rng::next_u64 is inline): this loop writes every table element,
// so it dominates generation time for large tables.
template <class Store>
void fill_table(const WorkloadSpec& spec, std::int64_t t, std::int64_t E, std::int64_t D,
                Store store) {
  const bool small_int = spec.fill == WeightFill::SmallInteger;
  // 24 random bits -> a value: an integer in [-8, 8] (bits mod 17, a tiny bias that does not
  // matter for fills), or a multiple of 2^-23 in [-1, 1), exact in FP32.
  auto value = [small_int](std::uint64_t bits24) -> float {
    if (small_int) return static_cast<float>(static_cast<std::int64_t>(bits24 % 17) - 8);
    return static_cast<float>(static_cast<double>(bits24) * 0x1p-23 - 1.0);
  };
#pragma omp parallel for schedule(static) if (detail::worth_parallel(E * D))
  for (std::int64_t r = 0; r < E; ++r) {
    // The row's stream: the plain splitmix64 sequence from the first draw of its keyed stream.
    Rng row_rng = Rng::from_state(
        Rng(spec.seed, stream_key(Purpose::Weight, static_cast<std::uint64_t>(t),
                                  static_cast<std::uint64_t>(r)))
            .next_u64());
    std::uint64_t u = 0;
    for (std::int64_t d = 0; d < D; ++d) {
      if ((d & 1) == 0) {
        u = row_rng.next_u64();
        store(r * D + d, value(u >> 40));
      } else {
        store(r * D + d, value((u >> 16) & 0xFFFFFFu));
      }
    }
  }
}

}  // namespace

// ---- generate ----------------------------------------------------------------------------------

ForwardCase generate(const WorkloadSpec& spec) {
  const std::int64_t T = spec.T;
  if (T < 0) bad_spec("T", "T = " + std::to_string(T) + " is negative");
  if (spec.B < 0) bad_spec("B", "B = " + std::to_string(spec.B) + " is negative");

  // Tables and feature -> table map.
  std::vector<std::int32_t> ftm = spec.feature_table_map;
  if (ftm.empty()) {
    ftm.resize(static_cast<std::size_t>(T));
    std::iota(ftm.begin(), ftm.end(), 0);
  }
  if (static_cast<std::int64_t>(ftm.size()) != T)
    bad_spec("feature_table_map", "length " + std::to_string(ftm.size()) + " != T = " +
                                      std::to_string(T));
  std::int64_t num_tables = 0;
  for (std::int32_t t : ftm) num_tables = std::max<std::int64_t>(num_tables, t + 1);
  if (!spec.table_rows.empty()) num_tables = static_cast<std::int64_t>(spec.table_rows.size());
  else if (!spec.table_dims.empty()) num_tables = static_cast<std::int64_t>(spec.table_dims.size());
  std::vector<std::int64_t> rows = spec.table_rows;
  std::vector<std::int32_t> dims = spec.table_dims;
  if (rows.empty()) rows.assign(static_cast<std::size_t>(num_tables), spec.E);
  if (dims.empty()) dims.assign(static_cast<std::size_t>(num_tables), spec.D);
  if (static_cast<std::int64_t>(rows.size()) != num_tables ||
      static_cast<std::int64_t>(dims.size()) != num_tables)
    bad_spec("table_dims", "table_rows has " + std::to_string(rows.size()) +
                               " entries, table_dims " + std::to_string(dims.size()));
  for (std::int64_t t = 0; t < num_tables; ++t) {
    if (rows[t] < 1) bad_spec("table_rows", "E = " + std::to_string(rows[t]) + " < 1");
    if (dims[t] < 1) bad_spec("table_dims", "D = " + std::to_string(dims[t]) + " < 1");
  }
  for (std::int64_t f = 0; f < T; ++f)
    if (ftm[f] < 0 || ftm[f] >= num_tables)
      bad_spec("feature_table_map", "feature " + std::to_string(f) + " maps to table " +
                                        std::to_string(ftm[f]) + " outside [0, " +
                                        std::to_string(num_tables) + ")");
  if (!spec.feature_L.empty() && static_cast<std::int64_t>(spec.feature_L.size()) != T)
    bad_spec("feature_L", "length " + std::to_string(spec.feature_L.size()) + " != T = " +
                              std::to_string(T));
  if (spec.distribution == IndexDistribution::Zipf && !(spec.zipf_alpha > 1.0))
    bad_spec("zipf_alpha", std::to_string(spec.zipf_alpha) + " must be > 1");

  ForwardCase c;
  c.options = spec.options;
  c.set_tables(spec.options.policy.weights, rows, dims);
  c.feature_table_map = ftm;
  c.index_dtype = spec.index_dtype;

  // Bags per feature (VBE: batch_sizes[f][r] uniform in [0, B], one stream per (f, r)).
  std::vector<std::int64_t> feature_bag_offset(static_cast<std::size_t>(T) + 1, 0);
  if (spec.vbe_ranks > 0) {
    const std::int64_t R = spec.vbe_ranks;
    c.vbe_ranks = spec.vbe_ranks;
    c.vbe_batch_sizes.resize(static_cast<std::size_t>(T * R));
    for (std::int64_t f = 0; f < T; ++f)
      for (std::int64_t r = 0; r < R; ++r) {
        Rng rng(spec.seed, stream_key(Purpose::VbeSize, static_cast<std::uint64_t>(f),
                                      static_cast<std::uint64_t>(r)));
        c.vbe_batch_sizes[f * R + r] = static_cast<std::int32_t>(rng.uniform_int(spec.B + 1));
      }
    c.batch_size = 0;
    for (std::int64_t f = 0; f < T; ++f) {
      std::int64_t n = 0;
      for (std::int64_t r = 0; r < R; ++r) n += c.vbe_batch_sizes[f * R + r];
      feature_bag_offset[f + 1] = feature_bag_offset[f] + n;
    }
  } else {
    c.batch_size = spec.B;
    for (std::int64_t f = 0; f < T; ++f) feature_bag_offset[f + 1] = feature_bag_offset[f] + spec.B;
  }
  const std::int64_t K = feature_bag_offset[T];
  // Feature of every bag ([K], int32 is plenty: T is small).
  std::vector<std::int32_t> bag_feature(static_cast<std::size_t>(K));
  for (std::int64_t f = 0; f < T; ++f)
    std::fill(bag_feature.begin() + feature_bag_offset[f],
              bag_feature.begin() + feature_bag_offset[f + 1], static_cast<std::int32_t>(f));

  // 1. Lengths, one stream per (feature, bag-in-feature); 2. prefix sum -> offsets.
  c.offsets.assign(static_cast<std::size_t>(K) + 1, 0);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(K))
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t f = bag_feature[k];
    const double mean = static_cast<double>(spec.feature_L.empty() ? spec.L : spec.feature_L[f]);
    Rng rng(spec.seed, stream_key(Purpose::Length, static_cast<std::uint64_t>(f),
                                  static_cast<std::uint64_t>(k - feature_bag_offset[f])));
    c.offsets[k + 1] = draw_length(spec, mean, rng);
  }
  for (std::int64_t k = 0; k < K; ++k) c.offsets[k + 1] += c.offsets[k];
  const std::int64_t N = c.offsets[K];
  c.indices.resize(static_cast<std::size_t>(N));
  if (spec.weighted) c.per_sample_weights.resize(static_cast<std::size_t>(N));

  // Shared per-E state: one Zipf rank -> row permutation per distinct E (shared by all tables of
  // that E), one heavy-hitter tail CDF per distinct E.
  std::map<std::int64_t, std::vector<std::int64_t>> permutations;
  std::map<std::int64_t, TailCdf> tails;
  std::vector<TableSampler> samplers(static_cast<std::size_t>(num_tables));
  for (std::int64_t t = 0; t < num_tables; ++t) {
    const std::int64_t E = rows[t];
    samplers[t].E = E;
    bool used = false;
    for (std::int32_t m : ftm) used = used || m == t;
    if (!used) continue;
    if (spec.distribution == IndexDistribution::Zipf) {
      auto [it, fresh] = permutations.try_emplace(E);
      if (fresh) {
        std::vector<std::int64_t>& perm = it->second;
        perm.resize(static_cast<std::size_t>(E));
        std::iota(perm.begin(), perm.end(), 0);
        Rng rng(spec.seed, stream_key(Purpose::Permutation, static_cast<std::uint64_t>(E), 0));
        for (std::int64_t i = E - 1; i > 0; --i) std::swap(perm[i], perm[rng.uniform_int(i + 1)]);
      }
      samplers[t].permutation = &it->second;
    } else if (spec.distribution == IndexDistribution::HeavyHitters) {
      const std::int64_t H = std::clamp<std::int64_t>(spec.hot_ids, 1, E);
      samplers[t].hot = H;
      auto [it, fresh] = tails.try_emplace(E);
      if (fresh) it->second = make_tail_cdf(E - H, spec.hh_q, H, spec.hh_s);
      samplers[t].tail = &it->second;
    }
  }

  // 3. Bag contents, one stream per (feature, bag-in-feature).
  const std::int64_t mean_L = std::max<std::int64_t>(spec.L, 1);
#pragma omp parallel if (detail::worth_parallel(K * mean_L))
  {
    SmallSet set;
#pragma omp for schedule(dynamic, 64)
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t f = bag_feature[k];
      const std::uint64_t b = static_cast<std::uint64_t>(k - feature_bag_offset[f]);
      const std::int64_t s = c.offsets[k], L = c.offsets[k + 1] - s;
      Rng rng(spec.seed, stream_key(Purpose::Index, static_cast<std::uint64_t>(f), b));
      fill_bag(spec, samplers[ftm[f]], rng, L, c.indices.data() + s, set);
      if (spec.weighted) {
        Rng wr(spec.seed, stream_key(Purpose::SampleWeight, static_cast<std::uint64_t>(f), b));
        // 24 random bits: uniform in [0.5, 1.5), exact in FP32.
        for (std::int64_t j = 0; j < L; ++j)
          c.per_sample_weights[s + j] =
              static_cast<float>(0.5 + static_cast<double>(wr.next_u64() >> 40) * 0x1p-24);
      }
    }
  }

  // 4. Table rows, one stream per (table, row), rounded once to the storage type.
  for (std::int64_t t = 0; t < num_tables; ++t) {
    const std::int64_t E = rows[t], D = dims[t];
    std::byte* base = c.weights.data() + c.table_offsets[t] * dtype_size(c.weights_dtype);
    switch (c.weights_dtype) {
      case DType::F32: {
        float* w = reinterpret_cast<float*>(base);
        fill_table(spec, t, E, D, [w](std::int64_t i, float v) { w[i] = v; });
        break;
      }
      case DType::F16: {
        Eigen::half* w = reinterpret_cast<Eigen::half*>(base);
        fill_table(spec, t, E, D, [w](std::int64_t i, float v) { w[i] = Eigen::half(v); });
        break;
      }
      case DType::BF16: {
        Eigen::bfloat16* w = reinterpret_cast<Eigen::bfloat16*>(base);
        fill_table(spec, t, E, D, [w](std::int64_t i, float v) { w[i] = Eigen::bfloat16(v); });
        break;
      }
      default:
        bad_spec("options.policy.weights", to_string(c.weights_dtype) + " is not a weight type");
    }
  }
  return c;
}

// ---- named workloads ---------------------------------------------------------------------------

namespace {

WorkloadSpec seed_large() {
  WorkloadSpec s;
  s.name = "seed-large";
  s.T = 32;
  s.E = 100000;
  s.D = 128;
  s.L = 20;
  s.B = 131072;
  s.distribution = IndexDistribution::Zipf;
  s.zipf_alpha = 1.15;
  s.options.pooling = PoolingMode::Sum;
  s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  return s;
}

}  // namespace

std::vector<std::string> named_workload_names() {
  return {"seed-large", "seed-large-fp16", "fbgemm-bench-default", "small-table", "hot-row",
          "prod-mixed"};
}

WorkloadSpec named_workload(const std::string& name, std::int64_t batch_size) {
  WorkloadSpec s;
  if (name == "seed-large") {
    s = seed_large();
  } else if (name == "seed-large-fp16") {
    s = seed_large();
    s.name = name;
    s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  } else if (name == "fbgemm-bench-default") {
    s.name = name;
    s.T = 32;
    s.E = 100000;
    s.D = 128;
    s.L = 20;
    s.B = 512;
    s.distribution = IndexDistribution::Uniform;
    s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  } else if (name == "small-table") {
    // Feature 0 reads a 48 x 96 table with L = 128 (more lookups than rows: every bag falls
    // back to uniform draws with duplicates, the histogram path's regime); features 1..31 are
    // seed-large features. FP16 storage for all tables (one weight dtype per call).
    s = seed_large();
    s.name = name;
    s.table_rows.assign(32, 100000);
    s.table_dims.assign(32, 128);
    s.table_rows[0] = 48;
    s.table_dims[0] = 96;
    s.feature_L.assign(32, 20);
    s.feature_L[0] = 128;
    s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  } else if (name == "hot-row") {
    // 4 features, every bag looks up row 0 of its table once: SL(row 0) = B >= 256.
    s.name = name;
    s.T = 4;
    s.E = 100000;
    s.D = 128;
    s.L = 20;
    s.B = 8192;
    s.distribution = IndexDistribution::HotRow;
    s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  } else if (name == "prod-mixed") {
    // The production-like shape of docs/workloads.md, scaled to fit host memory: 66 tables with E
    // log-spaced from 2 to 2^21 (the published 17M capped at 2M rows), D cycling {4, 8, 64, 128},
    // mean L log-spaced from 1 to 120 with a uniform +-25% spread, uniform rows (alpha 1.0),
    // FP16 weights, FP32 output, default B = 4096 (published 294912: pass it as batch_size).
    s.name = name;
    s.T = 66;
    s.B = 4096;
    s.distribution = IndexDistribution::Uniform;
    s.lengths = LengthDistribution::Uniform;
    s.table_rows.resize(66);
    s.table_dims.resize(66);
    s.feature_L.resize(66);
    const std::int32_t dim_cycle[4] = {4, 8, 64, 128};
    for (int t = 0; t < 66; ++t) {
      const double x = t / 65.0;
      s.table_rows[t] = static_cast<std::int64_t>(std::llround(std::pow(2.0, 1.0 + 20.0 * x)));
      s.table_dims[t] = dim_cycle[t % 4];
      s.feature_L[t] = static_cast<std::int64_t>(std::llround(std::pow(120.0, x)));
    }
    s.length_spread = 5.0;
    s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  } else {
    std::string known;
    for (const std::string& n : named_workload_names()) known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument("name", "named_workload: unknown workload '" + name + "' (known: " +
                                      known + ")");
  }
  if (batch_size > 0) s.B = batch_size;
  return s;
}

// ---- stats -------------------------------------------------------------------------------------

WorkloadStats workload_stats(const ForwardCase& c) {
  WorkloadStats st;
  const std::int64_t K = c.offsets.empty() ? 0 : static_cast<std::int64_t>(c.offsets.size()) - 1;
  st.bags = K;
  // Bag -> feature, via the same geometry as the output layout.
  std::vector<std::int64_t> feature_bag_offset(c.feature_table_map.size() + 1, 0);
  const std::int64_t T = c.num_features();
  for (std::int64_t f = 0; f < T; ++f) {
    std::int64_t n = c.batch_size;
    if (!c.vbe_batch_sizes.empty()) {
      n = 0;
      for (std::int64_t r = 0; r < c.vbe_ranks; ++r) n += c.vbe_batch_sizes[f * c.vbe_ranks + r];
    }
    feature_bag_offset[f + 1] = feature_bag_offset[f] + n;
  }
  // Linearized ids row_offset[table] + i of every lookup inside a bag.
  std::vector<std::int64_t> row_offset(c.rows.size() + 1, 0);
  for (std::size_t t = 0; t < c.rows.size(); ++t) row_offset[t + 1] = row_offset[t] + c.rows[t];
  std::vector<std::int64_t> ids;
  ids.reserve(c.indices.size());
  for (std::int64_t f = 0; f < T; ++f) {
    for (std::int64_t k = feature_bag_offset[f]; k < std::min(feature_bag_offset[f + 1], K); ++k) {
      const std::int64_t s = c.offsets[k], e = c.offsets[k + 1];
      if (e <= s) ++st.empty_bags;
      for (std::int64_t q = s; q < e; ++q)
        ids.push_back(row_offset[c.feature_table_map[f]] + c.indices[q]);
      st.lookup_elements += (e > s ? e - s : 0) * c.dims[c.feature_table_map[f]];
    }
  }
  st.lookups = static_cast<std::int64_t>(ids.size());
  std::sort(ids.begin(), ids.end());
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    ++st.unique_rows;
    const auto t = std::upper_bound(row_offset.begin(), row_offset.end(), ids[i]) - row_offset.begin() - 1;
    st.unique_row_elements += c.dims[static_cast<std::size_t>(t)];
    st.max_segment_length = std::max<std::int64_t>(st.max_segment_length, j - i);
    i = j;
  }
  return st;
}

}  // namespace tbe
