// Transpose of the lookups (backward.h transpose_lookups; FBGEMM transpose_embedding_input):
// (linearized id, position) pairs of the lookups inside bags, sorted by id then position (= a
// stable sort by id of the position-ordered stream), then run-length encoded.
#include <algorithm>
#include <utility>

#include "tbe/backward.h"

namespace tbe {

Transpose transpose_lookups(const ForwardProblem& p, const RepairResult& rr) {
  const TableBatchView& tb = p.tables;
  const OutputLayout layout = make_output_layout(p);
  const std::int64_t N = p.lookups.num_indices;
  const std::int64_t T = layout.num_features;

  // row_offset[t] = Σ_{t' < t} E_t' (int64: the linearized id space of every table).
  std::vector<std::int64_t> row_offset(static_cast<std::size_t>(tb.num_tables()), 0);
  for (std::int64_t t = 1; t < tb.num_tables(); ++t)
    row_offset[t] = row_offset[t - 1] + tb.rows[t - 1];

  Transpose tr;
  tr.position_bag.assign(static_cast<std::size_t>(N), -1);
  std::vector<std::pair<std::int64_t, std::int64_t>> keyed;  // (linearized id, position)
  keyed.reserve(static_cast<std::size_t>(N));
  for (std::int64_t f = 0; f < T; ++f) {
    const std::int64_t base = row_offset[tb.feature_table_map[f]];
    for (std::int64_t k = layout.feature_bag_offset[f]; k < layout.feature_bag_offset[f + 1]; ++k) {
      for (std::int64_t q = rr.offsets[k]; q < rr.offsets[k + 1]; ++q) {
        tr.position_bag[q] = k;
        keyed.emplace_back(base + rr.indices[q], q);
      }
    }
  }
  // Positions are unique, so ordering by (id, position) is the stable sort by id.
  std::sort(keyed.begin(), keyed.end());

  tr.sorted_positions.resize(keyed.size());
  tr.run_offsets.push_back(0);
  for (std::size_t i = 0; i < keyed.size(); ++i) {
    tr.sorted_positions[i] = keyed[i].second;
    if (i == 0 || keyed[i].first != keyed[i - 1].first) {
      if (i > 0) tr.run_offsets.push_back(static_cast<std::int64_t>(i));
      tr.linear_ids.push_back(keyed[i].first);
    }
  }
  if (!keyed.empty()) tr.run_offsets.push_back(static_cast<std::int64_t>(keyed.size()));
  tr.run_lengths.resize(tr.linear_ids.size());
  for (std::size_t r = 0; r < tr.linear_ids.size(); ++r)
    tr.run_lengths[r] = tr.run_offsets[r + 1] - tr.run_offsets[r];
  return tr;
}

}  // namespace tbe
