// The backends with planted bugs (faulty_backend.h).
#include "fuzz/faulty_backend.h"

#include <cmath>
#include <cstdint>

#include "tbe/bounds_check.h"
#include "tbe/host_case.h"

namespace tbe::fuzz {
namespace {

// Element i of `data` (dtype t) stored as v + 1 + |v|.
void plant(DType t, void* data, std::int64_t i) {
  const double v = load_as_double(t, data, i);
  store_from_double(t, data, i, v + 1.0 + std::abs(v));
}

}  // namespace

ForwardStats FaultyBackend::forward(const ForwardProblem& p, void* output,
                                    const ForwardStrategy& strategy) {
  ForwardStats st = inner_->forward(p, output, strategy);
  if (p.options.pooling == PoolingMode::None) return st;
  bool long_bag = false;
  for (std::int64_t k = 0; k + 1 < p.lookups.num_offsets && !long_bag; ++k)
    long_bag = load_index(p.lookups.index_dtype, p.lookups.offsets, k + 1) -
                   load_index(p.lookups.index_dtype, p.lookups.offsets, k) >= 256;
  if (long_bag && make_output_layout(p).numel > 0) {
    const DType t = p.options.policy.output;
    store_from_double(t, output, 0, load_as_double(t, output, 0) + 1.0);
  }
  return st;
}

BackwardStats FaultyBackend::backward(const BackwardProblem& p, const BackwardOutputs& out,
                                      const BackwardStrategy& s) {
  BackwardStats st = inner_->backward(p, out, s);  // validated and bounds-checked by now
  const ForwardProblem& f = p.forward;
  const Transpose tr = transpose_lookups(f, tbe::repair(f));
  // linearized id -> (table, row): row offsets are the exclusive prefix of E_t
  std::vector<std::int64_t> row_offset(static_cast<std::size_t>(f.tables.num_tables()) + 1, 0);
  for (std::int64_t t = 0; t < f.tables.num_tables(); ++t)
    row_offset[t + 1] = row_offset[t] + f.tables.rows[t];
  for (std::size_t k = 0; k < tr.linear_ids.size(); ++k) {
    if (tr.run_lengths[k] < 256) continue;
    const std::int64_t id = tr.linear_ids[k];
    std::int64_t t = 0;
    while (row_offset[t + 1] <= id) ++t;
    plant(f.tables.dtype, out.weights,
          f.tables.table_offsets[t] + (id - row_offset[t]) * f.tables.dims[t]);
  }
  return st;
}

void FaultyIkboBackend::lce(const ikbo::LceProblem& p, void* out) {
  inner_->lce(p, out);
  if (p.K_c % 8 != 0 && p.B >= 2) plant(p.policy.storage, out, p.B * p.M * p.N - 1);
}

void FaultyIkboBackend::attention(const ikbo::AttentionProblem& p, void* out) {
  inner_->attention(p, out);
  for (std::int64_t b = 0; b < p.B; ++b) {
    const auto [first, last] = ikbo::attention_key_range(p, p.cand_to_user[b]);
    if (last - first > 64) {
      plant(p.policy.storage, out, b * p.n_seed * p.H * p.Dh);
      return;
    }
  }
}

}  // namespace tbe::fuzz
