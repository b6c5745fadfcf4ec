// validate(): shape/dtype/limit checks shared by every backend, and the output geometry.
#include "tbe/problem.h"

#include <algorithm>
#include <limits>
#include <string>

// GCC 12 reports a false -Wrestrict inside libstdc++ for chains of std::string operator+
// (GCC bug 105329); the messages below are built that way on purpose, for readability.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace tbe {

namespace {

using std::to_string;

bool is_storage_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

std::string s(std::int64_t v) { return std::to_string(v); }

}  // namespace

Status validate(const ForwardProblem& p) {
  const TableBatchView& tb = p.tables;
  const LookupBatchView& lk = p.lookups;
  const ForwardOptions& op = p.options;

  // --- dtypes -------------------------------------------------------------------------------
  if (!is_storage_type(tb.dtype))
    return Status::Invalid("tables.dtype", "tables.dtype: " + tbe::to_string(tb.dtype) +
                                               " is not a weight type (allowed: fp32, fp16, bf16)");
  if (op.policy.weights != tb.dtype)
    return Status::Invalid("options.policy.weights",
                           "options.policy.weights: " + tbe::to_string(op.policy.weights) +
                               " != tables.dtype " + tbe::to_string(tb.dtype));
  if (!is_storage_type(op.policy.output))
    return Status::Invalid("options.policy.output",
                           "options.policy.output: " + tbe::to_string(op.policy.output) +
                               " is not an output type (allowed: fp32, fp16, bf16)");
  if (!is_index(lk.index_dtype))
    return Status::Invalid("lookups.index_dtype",
                           "lookups.index_dtype: " + tbe::to_string(lk.index_dtype) +
                               " is not an index type (allowed: int32, int64)");

  // --- tables -------------------------------------------------------------------------------
  const std::int64_t num_tables = tb.num_tables();
  if (static_cast<std::int64_t>(tb.dims.size()) != num_tables)
    return Status::Invalid("tables.dims", "tables.dims: length " + s(tb.dims.size()) +
                                              " != len(tables.rows) = " + s(num_tables));
  if (static_cast<std::int64_t>(tb.table_offsets.size()) != num_tables)
    return Status::Invalid("tables.table_offsets",
                           "tables.table_offsets: length " + s(tb.table_offsets.size()) +
                               " != len(tables.rows) = " + s(num_tables));
  for (std::int64_t t = 0; t < num_tables; ++t) {
    const std::string it = "[" + s(t) + "]";
    const std::int64_t E = tb.rows[t], D = tb.dims[t];
    if (E < 1)
      return Status::Invalid("tables.rows" + it,
                             "tables.rows" + it + ": E = " + s(E) + " is below the minimum 1");
    if (D < 1)
      return Status::Invalid("tables.dims" + it,
                             "tables.dims" + it + ": D = " + s(D) + " is below the minimum 1");
    if (D > kMaxD)
      return Status::Invalid("tables.dims" + it, "tables.dims" + it + ": D = " + s(D) +
                                                     " exceeds the limit " + s(kMaxD));
    if (E > std::numeric_limits<std::int64_t>::max() / D)
      return Status::Invalid("tables.rows" + it, "tables.rows" + it + ": E·D = " + s(E) + "·" +
                                                     s(D) + " overflows int64");
    if (tb.table_offsets[t] < 0 ||
        tb.table_offsets[t] > std::numeric_limits<std::int64_t>::max() - E * D)
      return Status::Invalid("tables.table_offsets" + it,
                             "tables.table_offsets" + it + ": offset " + s(tb.table_offsets[t]) +
                                 " is negative or overflows int64 with E·D = " + s(E * D));
  }
  const std::int64_t T = tb.num_features();
  for (std::int64_t f = 0; f < T; ++f) {
    const std::int64_t t = tb.feature_table_map[f];
    if (t < 0 || t >= num_tables)
      return Status::Invalid("tables.feature_table_map[" + s(f) + "]",
                             "tables.feature_table_map[" + s(f) + "]: table " + s(t) +
                                 " is outside [0, num_tables=" + s(num_tables) + ")");
  }

  // --- lookups ------------------------------------------------------------------------------
  const std::int64_t N = lk.num_indices;
  if (N < 0)
    return Status::Invalid("lookups.num_indices",
                           "lookups.num_indices: N = " + s(N) + " is negative");
  if (lk.index_dtype == DType::I32 && N > std::numeric_limits<std::int32_t>::max())
    return Status::Invalid("lookups.num_indices",
                           "lookups.num_indices: N = " + s(N) +
                               " exceeds the int32 offset limit " +
                               s(std::numeric_limits<std::int32_t>::max()));
  if (N > 0 && lk.indices == nullptr)
    return Status::Invalid("lookups.indices",
                           "lookups.indices: null pointer with N = " + s(N) + " indices");
  if (N > 0 && tb.weights == nullptr)
    return Status::Invalid("tables.weights",
                           "tables.weights: null pointer with N = " + s(N) + " lookups");

  std::int64_t num_bags = 0;
  if (lk.is_vbe()) {
    const std::int64_t R = lk.vbe_ranks;
    if (R < 1)
      return Status::Invalid("lookups.vbe_ranks", "lookups.vbe_ranks: R = " + s(R) +
                                                      " is below the minimum 1 under VBE");
    if (static_cast<std::int64_t>(lk.vbe_batch_sizes.size()) != T * R)
      return Status::Invalid("vbe_batch_sizes",
                             "vbe_batch_sizes: length " + s(lk.vbe_batch_sizes.size()) +
                                 " != T·R = " + s(T * R) + " (T=" + s(T) + ", R=" + s(R) + ")");
    for (std::size_t i = 0; i < lk.vbe_batch_sizes.size(); ++i) {
      if (lk.vbe_batch_sizes[i] < 0)
        return Status::Invalid("vbe_batch_sizes[" + s(i) + "]",
                               "vbe_batch_sizes[" + s(i) + "]: batch size " +
                                   s(lk.vbe_batch_sizes[i]) + " is negative (feature " +
                                   s(i / R) + ", rank " + s(i % R) + ")");
      num_bags += lk.vbe_batch_sizes[i];
    }
    if (num_bags != lk.num_offsets - 1)
      return Status::Invalid("vbe_batch_sizes", "vbe_batch_sizes: total bags " + s(num_bags) +
                                                    " != len(offsets) - 1 = " +
                                                    s(lk.num_offsets - 1));
  } else {
    const std::int64_t B = lk.batch_size;
    if (B < 0)
      return Status::Invalid("lookups.batch_size",
                             "lookups.batch_size: B = " + s(B) + " is negative");
    if (lk.vbe_ranks != 0 && T > 0)
      return Status::Invalid("vbe_batch_sizes",
                             "vbe_batch_sizes: empty but lookups.vbe_ranks = " + s(lk.vbe_ranks) +
                                 " (VBE needs T·R = " + s(T * lk.vbe_ranks) + " batch sizes)");
    if (B > 0 && T > (std::numeric_limits<std::int64_t>::max() - 1) / B)
      return Status::Invalid("lookups.batch_size",
                             "lookups.batch_size: T·B = " + s(T) + "·" + s(B) + " overflows int64");
    num_bags = T * B;
    if (lk.num_offsets != num_bags + 1)
      return Status::Invalid("offsets", "offsets: length " + s(lk.num_offsets) +
                                            " != T·B + 1 = " + s(num_bags + 1) + " (T=" + s(T) +
                                            ", B=" + s(B) + ")");
  }
  if (lk.offsets == nullptr)
    return Status::Invalid("offsets", "offsets: null pointer (needs " + s(num_bags + 1) +
                                          " entries)");

  // --- pooling ------------------------------------------------------------------------------
  if (op.pooling == PoolingMode::None) {
    for (std::int64_t f = 1; f < T; ++f) {
      if (tb.dim_of_feature(f) != tb.dim_of_feature(0))
        return Status::Invalid("options.pooling",
                               "options.pooling: NONE needs one D for every feature (feature " +
                                   s(f) + " has D=" + s(tb.dim_of_feature(f)) +
                                   ", feature 0 has D=" + s(tb.dim_of_feature(0)) + ")");
    }
    if (lk.weighted())
      return Status::Invalid("lookups.per_sample_weights",
                             "lookups.per_sample_weights: not allowed with pooling NONE");
  }
  return Status::Ok();
}

OutputLayout make_output_layout(const ForwardProblem& p) {
  const TableBatchView& tb = p.tables;
  const LookupBatchView& lk = p.lookups;
  OutputLayout L;
  const std::int64_t T = tb.num_features();
  L.num_features = T;
  const bool none = p.options.pooling == PoolingMode::None;

  // Column offsets: pooled rows are [Σ_f D_f]; NONE rows are [D] shared by all features, so
  // every feature's columns start at 0 there.
  L.feature_col_offset.assign(T + 1, 0);
  for (std::int64_t f = 0; f < T; ++f)
    L.feature_col_offset[f + 1] = L.feature_col_offset[f] + (none ? 0 : tb.dim_of_feature(f));
  L.total_dim = none ? (T > 0 ? tb.dim_of_feature(0) : 0) : L.feature_col_offset[T];

  L.feature_bag_offset.assign(T + 1, 0);
  if (lk.is_vbe()) {
    const std::int64_t R = lk.vbe_ranks;
    L.vbe_bag_offset.assign(T * R, 0);
    L.vbe_output_offset.assign(T * R, 0);
    // Bags: feature-major, rank-major inside the feature.
    std::int64_t bag = 0;
    for (std::int64_t f = 0; f < T; ++f) {
      L.feature_bag_offset[f] = bag;
      for (std::int64_t r = 0; r < R; ++r) {
        L.vbe_bag_offset[f * R + r] = bag;
        bag += lk.vbe_batch_sizes[f * R + r];
      }
    }
    L.feature_bag_offset[T] = bag;
    L.num_bags = bag;
    // Output: rank-major, then feature, then sample; block (r, f) is [batch_sizes[f][r], D_f].
    std::int64_t out = 0;
    for (std::int64_t r = 0; r < R; ++r) {
      for (std::int64_t f = 0; f < T; ++f) {
        L.vbe_output_offset[f * R + r] = out;
        out += static_cast<std::int64_t>(lk.vbe_batch_sizes[f * R + r]) * tb.dim_of_feature(f);
      }
    }
    L.numel = none ? lk.num_indices * L.total_dim : out;
  } else {
    const std::int64_t B = lk.batch_size;
    for (std::int64_t f = 0; f <= T; ++f) L.feature_bag_offset[f] = f * B;
    L.num_bags = T * B;
    L.numel = none ? lk.num_indices * L.total_dim : B * L.total_dim;
  }
  return L;
}

std::int64_t OutputLayout::feature_of_bag(std::int64_t k) const {
  // Last feature whose first bag is <= k (skips features with zero bags).
  auto it = std::upper_bound(feature_bag_offset.begin(), feature_bag_offset.end() - 1, k);
  return static_cast<std::int64_t>(it - feature_bag_offset.begin()) - 1;
}

std::int64_t OutputLayout::bag_output_offset(std::int64_t k) const {
  const std::int64_t f = feature_of_bag(k);
  if (vbe_bag_offset.empty()) {
    const std::int64_t B = num_features > 0 ? num_bags / num_features : 0;
    const std::int64_t b = k - f * B;
    return b * total_dim + feature_col_offset[f];
  }
  const std::int64_t R = static_cast<std::int64_t>(vbe_bag_offset.size()) / num_features;
  const auto first = vbe_bag_offset.begin() + f * R;
  // Last rank of feature f whose first bag is <= k (empty ranks share their start with the next).
  const std::int64_t r =
      static_cast<std::int64_t>(std::upper_bound(first, first + R, k) - first) - 1;
  const std::int64_t D = feature_col_offset[f + 1] - feature_col_offset[f];
  return vbe_output_offset[f * R + r] + (k - vbe_bag_offset[f * R + r]) * D;
}

}  // namespace tbe
