// Non-owning views of one TBE forward call and the validation that every backend runs first.
// Layout and semantics: docs/semantics.md "Inputs" (FBGEMM SplitTableBatchedEmbeddingBagsCodegen).
//
// Symbols: T features, B samples per feature (non-VBE), N = len(indices), E_t rows and D_t columns
// of table t, feature_table_map[f] = table of feature f, L = bag length.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tbe/errors.h"
#include "tbe/precision.h"
#include "tbe/types.h"

namespace tbe {

/// Largest supported D_t (columns of one table). Larger D is an InvalidArgument naming the limit.
inline constexpr std::int64_t kMaxD = 2048;

/// All embedding tables in one flat row-major buffer.
/// weights: dtype `dtype`, [Σ_t E_t·D_t] elements; table t starts at element table_offsets[t]
/// (64-bit: tables with E·D >= 2^31 are legal). Memory space: host for the reference backend and
/// the host interface; device for the CUDA device-level operator (optimized/).
struct TableBatchView {
  DType dtype = DType::F32;                       ///< F32, F16 or BF16
  const void* weights = nullptr;                  ///< [Σ_t E_t·D_t]
  std::span<const std::int64_t> rows;             ///< [num_tables] E_t >= 1
  std::span<const std::int32_t> dims;             ///< [num_tables] 1 <= D_t <= kMaxD
  std::span<const std::int64_t> table_offsets;    ///< [num_tables] element offset of table t
  std::span<const std::int32_t> feature_table_map;  ///< [T] values in [0, num_tables)
  std::int64_t num_features() const { return static_cast<std::int64_t>(feature_table_map.size()); }
  std::int64_t num_tables() const { return static_cast<std::int64_t>(rows.size()); }
  std::int64_t dim_of_feature(std::int64_t f) const { return dims[feature_table_map[f]]; }
};

/// The lookups of one batch, feature-major.
/// Non-VBE: offsets has T·B + 1 entries; bag (f, b) = indices[offsets[f·B+b] : offsets[f·B+b+1]].
/// VBE: vbe_batch_sizes holds [T][R] (feature-major, R = vbe_ranks); feature f owns
/// Σ_r batch_sizes[f][r] consecutive bags, rank-major inside the feature; offsets has
/// total_bags + 1 entries. `batch_size` is ignored under VBE.
struct LookupBatchView {
  DType index_dtype = DType::I64;                 ///< I32 or I64, for indices and offsets alike
  const void* indices = nullptr;                  ///< [N]
  std::int64_t num_indices = 0;                   ///< N
  const void* offsets = nullptr;                  ///< [T·B + 1] or [total_bags + 1]
  std::int64_t num_offsets = 0;
  const float* per_sample_weights = nullptr;      ///< [N] FP32 or nullptr (unweighted)
  std::int64_t batch_size = 0;                    ///< B (non-VBE)
  std::span<const std::int32_t> vbe_batch_sizes;  ///< [T·R] or empty (not VBE)
  std::int32_t vbe_ranks = 0;                     ///< R (VBE only)
  bool is_vbe() const { return !vbe_batch_sizes.empty(); }
  bool weighted() const { return per_sample_weights != nullptr; }
};

/// Options of a forward call.
struct ForwardOptions {
  PoolingMode pooling = PoolingMode::Sum;
  BoundsCheckMode bounds_check = BoundsCheckMode::Warning;
  PrecisionPolicy policy;  ///< policy.weights must equal tables.dtype; policy.output = output dtype
};

/// One forward call: tables + lookups + options.
struct ForwardProblem {
  TableBatchView tables;
  LookupBatchView lookups;
  ForwardOptions options;
};

/// Bag geometry derived from a validated problem (host-side, small: O(T·R)).
/// Pooled output: non-VBE [B, Σ_f D_f] row-major; VBE 1-D, for rank r, feature f, a row-major
/// [batch_sizes[f][r], D_f] block (rank-major, then feature, then sample). NONE: [N, D].
struct OutputLayout {
  std::int64_t num_features = 0;      ///< T
  std::int64_t num_bags = 0;          ///< T·B or Σ batch sizes
  std::int64_t numel = 0;             ///< elements of the output
  std::int64_t total_dim = 0;         ///< Σ_f D_f (pooled) or D (NONE)
  std::vector<std::int64_t> feature_col_offset;  ///< [T+1] exclusive prefix of D_f
  std::vector<std::int64_t> feature_bag_offset;  ///< [T+1] first bag of feature f
  /// VBE only, [T·R] feature-major: first bag of (f, r) and element offset of its output block.
  std::vector<std::int64_t> vbe_bag_offset;
  std::vector<std::int64_t> vbe_output_offset;
  /// Element offset of the output row of bag k (pooled modes); O(log(T·R)) under VBE.
  std::int64_t bag_output_offset(std::int64_t k) const;
  /// Feature of bag k.
  std::int64_t feature_of_bag(std::int64_t k) const;
};

/// Checks shapes, dtypes and limits of `p` (not index values: that is the bounds check's job).
/// Errors name argument, value and limit, e.g.
///   "offsets: length 8 != T·B + 1 = 9 (T=2, B=4)",
///   "vbe_batch_sizes: total bags 6 != len(offsets) - 1 = 5",
///   "tables.dims[0]: D = 4096 exceeds the limit 2048",
///   "options.pooling: NONE needs one D for every feature (feature 1 has D=8, feature 0 has D=4)",
///   "lookups.per_sample_weights: not allowed with pooling NONE".
/// Pure host code over the spans and scalars; never dereferences weights/indices/offsets.
Status validate(const ForwardProblem& p);

/// Output geometry of a problem that passed validate().
OutputLayout make_output_layout(const ForwardProblem& p);

}  // namespace tbe
