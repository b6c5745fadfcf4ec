// Owning host containers (host_case.h) and typed element access.
#include "tbe/host_case.h"

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <limits>

#include "tbe/errors.h"
#include "round_internal.h"

namespace tbe {

double load_as_double(DType t, const void* data, std::int64_t i) {
  switch (t) {
    case DType::F16:
      return static_cast<float>(static_cast<const Eigen::half*>(data)[i]);
    case DType::BF16:
      return static_cast<float>(static_cast<const Eigen::bfloat16*>(data)[i]);
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::F64: return static_cast<const double*>(data)[i];
    case DType::I32: return static_cast<const std::int32_t*>(data)[i];
    case DType::I64: return static_cast<double>(static_cast<const std::int64_t*>(data)[i]);
  }
  return 0.0;
}

void store_from_double(DType t, void* data, std::int64_t i, double v) {
  switch (t) {
    case DType::F16:
      static_cast<Eigen::half*>(data)[i] = detail::half_rne(v);
      return;
    case DType::BF16:
      static_cast<Eigen::bfloat16*>(data)[i] = detail::bfloat16_rne(v);
      return;
    case DType::F32: static_cast<float*>(data)[i] = static_cast<float>(v); return;
    case DType::F64: static_cast<double*>(data)[i] = v; return;
    case DType::I32:
    case DType::I64: {
      // Checked conversion: integral and inside the type's range (2^63 itself is out of range).
      const double lo = t == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
      const double hi = t == DType::I32 ? 2147483648.0 : 9223372036854775808.0;
      if (!(v >= lo && v < hi) || std::trunc(v) != v)
        throw InvalidArgument("value", "store_from_double: " + std::to_string(v) +
                                           " is not an exact " + to_string(t) + " value");
      if (t == DType::I32)
        static_cast<std::int32_t*>(data)[i] = static_cast<std::int32_t>(v);
      else
        static_cast<std::int64_t*>(data)[i] = static_cast<std::int64_t>(v);
      return;
    }
  }
}

std::int64_t load_index(DType t, const void* data, std::int64_t i) {
  if (t == DType::I32) return static_cast<const std::int32_t*>(data)[i];
  return static_cast<const std::int64_t*>(data)[i];
}

void ForwardCase::set_tables(DType dtype, std::vector<std::int64_t> rows_per_table,
                             std::vector<std::int32_t> dims_per_table) {
  if (rows_per_table.size() != dims_per_table.size())
    throw InvalidArgument("dims_per_table", "set_tables: dims_per_table has " +
                                                std::to_string(dims_per_table.size()) +
                                                " entries != len(rows_per_table) = " +
                                                std::to_string(rows_per_table.size()));
  weights_dtype = dtype;
  options.policy.weights = dtype;
  rows = std::move(rows_per_table);
  dims = std::move(dims_per_table);
  table_offsets.assign(rows.size(), 0);
  std::int64_t total = 0;
  for (std::size_t t = 0; t < rows.size(); ++t) {
    table_offsets[t] = total;
    total += rows[t] * static_cast<std::int64_t>(dims[t]);
  }
  weights.assign(static_cast<std::size_t>(total) * dtype_size(dtype), std::byte{0});
}

double ForwardCase::weight(std::int64_t t, std::int64_t r, std::int64_t d) const {
  return load_as_double(weights_dtype, weights.data(), table_offsets[t] + r * dims[t] + d);
}

void ForwardCase::set_weight(std::int64_t t, std::int64_t r, std::int64_t d, double v) {
  store_from_double(weights_dtype, weights.data(), table_offsets[t] + r * dims[t] + d, v);
}

namespace {
void narrow_to_int32(const std::vector<std::int64_t>& src, std::vector<std::int32_t>& dst,
                     const char* name) {
  dst.resize(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src[i] < std::numeric_limits<std::int32_t>::min() ||
        src[i] > std::numeric_limits<std::int32_t>::max())
      throw InvalidArgument(name, std::string(name) + "[" + std::to_string(i) + "]: value " +
                                      std::to_string(src[i]) + " does not fit int32");
    dst[i] = static_cast<std::int32_t>(src[i]);
  }
}
}  // namespace

ForwardProblem ForwardCase::view() {
  ForwardProblem p;
  p.tables.dtype = weights_dtype;
  p.tables.weights = weights.empty() ? nullptr : weights.data();
  p.tables.rows = rows;
  p.tables.dims = dims;
  p.tables.table_offsets = table_offsets;
  p.tables.feature_table_map = feature_table_map;

  p.lookups.index_dtype = index_dtype;
  if (index_dtype == DType::I32) {
    narrow_to_int32(indices, indices32_, "lookups.indices");
    narrow_to_int32(offsets, offsets32_, "offsets");
    p.lookups.indices = indices32_.data();
    p.lookups.offsets = offsets32_.data();
  } else {
    indices32_.clear();
    offsets32_.clear();
    p.lookups.indices = indices.data();
    p.lookups.offsets = offsets.data();
  }
  p.lookups.num_indices = static_cast<std::int64_t>(indices.size());
  p.lookups.num_offsets = static_cast<std::int64_t>(offsets.size());
  p.lookups.per_sample_weights = per_sample_weights.empty() ? nullptr : per_sample_weights.data();
  p.lookups.batch_size = batch_size;
  p.lookups.vbe_batch_sizes = vbe_batch_sizes;
  p.lookups.vbe_ranks = vbe_ranks;
  p.options = options;
  return p;
}

}  // namespace tbe
