// The explicit forward-case builder (case_builder.h).
#include "tbe/case_builder.h"

#include <string>

#include "tbe/errors.h"

namespace tbe {
namespace {

[[noreturn]] void bad_spec(const std::string& field, const std::string& msg) {
  throw InvalidArgument(field, "build_case: " + field + ": " + msg);
}

// Bags the geometry has: T·B, or Σ vbe_batch_sizes under VBE.
std::int64_t geometry_bags(const ForwardCaseSpec& s) {
  const std::int64_t T = static_cast<std::int64_t>(s.feature_table_map.size());
  if (s.vbe_ranks == 0) return T * s.batch_size;
  if (static_cast<std::int64_t>(s.vbe_batch_sizes.size()) != T * s.vbe_ranks)
    bad_spec("vbe_batch_sizes", std::to_string(s.vbe_batch_sizes.size()) + " entries != T·R = " +
                                    std::to_string(T * s.vbe_ranks));
  std::int64_t n = 0;
  for (std::int32_t b : s.vbe_batch_sizes) n += b;
  return n;
}

}  // namespace

void build_lookups(const ForwardCaseSpec& spec, ForwardCase& c) {
  c.feature_table_map = spec.feature_table_map;
  c.index_dtype = spec.index_dtype;
  c.batch_size = spec.vbe_ranks == 0 ? spec.batch_size : 0;
  c.vbe_ranks = spec.vbe_ranks;
  c.vbe_batch_sizes = spec.vbe_batch_sizes;
  if (!spec.offsets.empty()) {
    if (!spec.bags.empty() || !spec.leading.empty())
      bad_spec("offsets", "raw offsets given together with bags or leading indices");
    c.indices = spec.indices;
    c.offsets = spec.offsets;
  } else {
    const std::int64_t K = geometry_bags(spec);
    if (static_cast<std::int64_t>(spec.bags.size()) != K)
      bad_spec("bags", std::to_string(spec.bags.size()) + " bags != " + std::to_string(K) +
                           " bags of the geometry");
    c.indices = spec.leading;
    c.offsets.assign(1, static_cast<std::int64_t>(spec.leading.size()));
    c.offsets.reserve(static_cast<std::size_t>(K) + 1);
    for (const std::vector<std::int64_t>& bag : spec.bags) {
      c.indices.insert(c.indices.end(), bag.begin(), bag.end());
      c.offsets.push_back(static_cast<std::int64_t>(c.indices.size()));
    }
  }
  const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
  if (!spec.per_sample_weights.empty() &&
      static_cast<std::int64_t>(spec.per_sample_weights.size()) != N)
    bad_spec("per_sample_weights", std::to_string(spec.per_sample_weights.size()) +
                                       " weights != N = " + std::to_string(N));
  c.per_sample_weights = spec.per_sample_weights;
  for (const OffsetFault& f : spec.offset_faults) {
    const std::int64_t last = static_cast<std::int64_t>(c.offsets.size()) - 1;
    const std::int64_t k = f.k < 0 ? last : f.k;
    if (k > last) continue;
    c.offsets[k] = f.relative_to_n ? N + f.value : f.value;
  }
  c.options = spec.options;
}

ForwardCase build_case(const ForwardCaseSpec& spec) {
  if (spec.rows.size() != spec.dims.size())
    bad_spec("dims", std::to_string(spec.dims.size()) + " entries != len(rows) = " +
                         std::to_string(spec.rows.size()));
  ForwardCase c;
  c.set_tables(spec.weights, spec.rows, spec.dims);
  if (spec.fill)
    for (std::size_t t = 0; t < spec.rows.size(); ++t)
      for (std::int64_t r = 0; r < spec.rows[t]; ++r)
        for (std::int32_t d = 0; d < spec.dims[t]; ++d) {
          const auto tt = static_cast<std::int64_t>(t);
          c.set_weight(tt, r, d, spec.fill(tt, r, d));
        }
  build_lookups(spec, c);
  return c;
}

}  // namespace tbe
