// Owning host containers for one TBE forward call (tests, tools, benchmarks, case files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tbe/problem.h"

namespace tbe {

/// A whole forward call held on the host. Indices and offsets are kept as int64 masters;
/// view() produces the ForwardProblem in `index_dtype` (int32 mirrors are rebuilt by view()).
struct ForwardCase {
  // --- tables ---
  DType weights_dtype = DType::F32;
  std::vector<std::byte> weights;              ///< [Σ_t E_t·D_t] elements of weights_dtype
  std::vector<std::int64_t> rows;              ///< [num_tables] E_t
  std::vector<std::int32_t> dims;              ///< [num_tables] D_t
  std::vector<std::int64_t> table_offsets;     ///< [num_tables] element offsets (prefix of E·D)
  std::vector<std::int32_t> feature_table_map; ///< [T]
  // --- lookups ---
  DType index_dtype = DType::I64;
  std::vector<std::int64_t> indices;           ///< [N]
  std::vector<std::int64_t> offsets;           ///< [num_bags + 1]
  std::vector<float> per_sample_weights;       ///< [N] or empty (unweighted)
  std::int64_t batch_size = 0;                 ///< B (non-VBE)
  std::vector<std::int32_t> vbe_batch_sizes;   ///< [T·R] or empty
  std::int32_t vbe_ranks = 0;
  // --- options ---
  ForwardOptions options;

  /// Sets rows/dims/table_offsets and allocates zeroed weights of `dtype`.
  void set_tables(DType dtype, std::vector<std::int64_t> rows_per_table,
                  std::vector<std::int32_t> dims_per_table);
  /// Element (t, r, d) of the tables as FP64 (exact: every storage type embeds in FP64).
  double weight(std::int64_t t, std::int64_t r, std::int64_t d) const;
  /// Stores round_to(weights_dtype, v) at (t, r, d).
  void set_weight(std::int64_t t, std::int64_t r, std::int64_t d, double v);
  std::int64_t num_features() const { return static_cast<std::int64_t>(feature_table_map.size()); }

  /// Non-owning view; valid until this object is modified. Throws InvalidArgument if
  /// index_dtype is I32 and an index/offset does not fit in int32 (naming the position).
  ForwardProblem view();

 private:
  std::vector<std::int32_t> indices32_, offsets32_;
};

/// Reads element i of a host buffer of type t as FP64 (exact for every DType).
double load_as_double(DType t, const void* data, std::int64_t i);
/// Stores round_to(t, v) (integers: checked conversion) at element i.
void store_from_double(DType t, void* data, std::int64_t i, double v);
/// Reads element i of an index buffer (I32 or I64) as int64.
std::int64_t load_index(DType t, const void* data, std::int64_t i);

}  // namespace tbe
