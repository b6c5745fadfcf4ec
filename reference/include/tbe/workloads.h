// Seeded, reproducible index generators and named workloads (docs/workloads.md).
// Every generator is bit-for-bit reproducible on CPU for a given seed, independent of the number
// of OpenMP threads: each bag draws from its own counter-based stream keyed by (seed, feature, bag).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tbe/host_case.h"
#include "tbe/rng.h"  // tbe::Rng, the generators' streams (users of workloads.h draw from it too)

namespace tbe {

/// How row ids of one bag are drawn.
enum class IndexDistribution : std::uint8_t {
  Uniform,       ///< L draws uniform in [0, E) (duplicates allowed), bag sorted ascending
  Zipf,          ///< FBGEMM style: 3L Zipf(alpha) ranks k>=1, (k-1) mod E, first L distinct in draw
                 ///< order, mapped through one random injective rank->row map; uniform fallback
  HeavyHitters,  ///< with prob Σh one of H hot ids, else H + k, p(k) ∝ (k + q + H)^-s on [0, E-H)
  /// (added) "hot-row": every non-empty bag looks up row 0 once plus L-1 uniform draws, sorted
  /// ascending, so row 0 has segment length SL = number of non-empty bags.
  HotRow,
};

/// How bag lengths are drawn around the mean L.
enum class LengthDistribution : std::uint8_t {
  Fixed,    ///< every bag has L lookups
  Normal,   ///< round(N(L, sigma)), clipped at 0 (gives empty bags)
  Uniform,  ///< uniform integer in [L - spread, L + spread], clipped at 0
};

/// How table rows are filled.
enum class WeightFill : std::uint8_t {
  Uniform,       ///< uniform in [-1, 1), rounded to the storage type
  SmallInteger,  ///< integers in [-8, 8]: sums are exact in every accumulation type (bit-exact cases)
};

/// Everything that defines a generated forward case. Per-table and per-feature vectors may be
/// given (mixed shapes); if empty they are filled from the homogeneous scalars.
struct WorkloadSpec {
  std::string name = "custom";
  std::int64_t T = 1;        ///< features
  std::int64_t E = 1000;     ///< rows per table (homogeneous)
  std::int32_t D = 64;       ///< columns per table (homogeneous)
  std::int64_t L = 10;       ///< mean bag length
  std::int64_t B = 16;       ///< batch size (non-VBE); per-rank upper bound under VBE
  std::vector<std::int64_t> table_rows;          ///< optional [num_tables]
  std::vector<std::int32_t> table_dims;          ///< optional [num_tables]
  std::vector<std::int32_t> feature_table_map;   ///< optional [T]; default identity
  std::vector<std::int64_t> feature_L;           ///< optional [T] mean L per feature
  IndexDistribution distribution = IndexDistribution::Uniform;
  double zipf_alpha = 1.15;
  // heavy hitters + truncated Zipf
  std::int64_t hot_ids = 8;        ///< H
  double hot_probability = 0.3;    ///< Σh
  double hh_q = 1.0;
  double hh_s = 1.1;
  LengthDistribution lengths = LengthDistribution::Fixed;
  double length_spread = 0.0;      ///< sigma (Normal) or half-width (Uniform)
  std::int32_t vbe_ranks = 0;      ///< 0: not VBE; else R ranks, batch_sizes[f][r] in [0, B]
  bool weighted = false;           ///< per-sample weights uniform in [0.5, 1.5)
  WeightFill fill = WeightFill::Uniform;
  ForwardOptions options;          ///< pooling, bounds check, policy (policy.weights = storage)
  DType index_dtype = DType::I64;
  std::uint64_t seed = 1;
};

/// Generates the case. Deterministic in spec (including seed).
ForwardCase generate(const WorkloadSpec& spec);

/// Named workloads of docs/workloads.md: "seed-large", "seed-large-fp16", "fbgemm-bench-default",
/// "small-table", "hot-row", "prod-mixed". `batch_size` > 0 overrides B (e.g. 8192 for the
/// scaled-down seed-large). Throws InvalidArgument for an unknown name (listing the known ones).
WorkloadSpec named_workload(const std::string& name, std::int64_t batch_size = 0);
std::vector<std::string> named_workload_names();

/// Summary of a case's index stream: unique (table,row) pairs and the largest segment length,
/// and the row elements a forward reads (each row counted with its table's D: mixed-D workloads).
struct WorkloadStats {
  std::int64_t lookups = 0;
  std::int64_t bags = 0;
  std::int64_t empty_bags = 0;
  std::int64_t unique_rows = 0;
  std::int64_t max_segment_length = 0;
  std::int64_t lookup_elements = 0;      ///< Σ over the lookups inside bags of D_t
  std::int64_t unique_row_elements = 0;  ///< Σ over the unique (table, row) pairs of D_t
};
WorkloadStats workload_stats(const ForwardCase& c);

}  // namespace tbe
