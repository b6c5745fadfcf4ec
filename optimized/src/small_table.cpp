// Host side of the small-table histogram path: eligibility, saved-counts layout, device metadata
// (docs/small-table.md).
#include "src/small_table.h"

#include <sstream>
#include <string>

#include <cuda_runtime_api.h>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "tbe/cuda/check.h"
#include "tbe/cuda/workspace.h"

namespace tbe::cuda::detail {
namespace {

using Limits = tuning::SmallTable;

std::string fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

/// Mean L of every feature's bags, from the device offsets (offsets[f·B] for f = 0..T).
std::vector<double> measured_bag_lengths(const ForwardProblem& p) {
  const std::int64_t T = p.tables.num_features(), B = p.lookups.batch_size;
  std::vector<double> L(static_cast<std::size_t>(T), 0.0);
  if (B == 0 || T == 0) return L;
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(T + 1));
  dispatch::dispatch_index(p.lookups.index_dtype, "lookups.index_dtype", [&](auto idx) {
    using Idx = dispatch::storage_t<decltype(idx)::value>;
    std::vector<Idx> v(static_cast<std::size_t>(T + 1));
    cuda_check(cudaMemcpy2D(v.data(), sizeof(Idx), p.lookups.offsets, B * sizeof(Idx),
                            sizeof(Idx), static_cast<std::size_t>(T + 1), cudaMemcpyDeviceToHost),
               "small-table path: read the feature boundaries of lookups.offsets");
    for (std::int64_t f = 0; f <= T; ++f) bounds[f] = static_cast<std::int64_t>(v[f]);
  });
  for (std::int64_t f = 0; f < T; ++f)
    L[f] = static_cast<double>(bounds[f + 1] - bounds[f]) / static_cast<double>(B);
  return L;
}

}  // namespace

std::vector<SmallTableFeature> small_table_eligibility(const ForwardProblem& p,
                                                       const SmallTableTuning& tuning) {
  const std::int64_t T = p.tables.num_features();
  std::vector<SmallTableFeature> out(static_cast<std::size_t>(T));
  const PrecisionPolicy& pol = p.options.policy;
  std::string common;  // a reason shared by every feature
  if (tuning.mode == SmallTableTuning::Mode::Off)
    common = "the small-table path is off (SmallTableTuning::Mode::Off)";
  else if (p.options.pooling == PoolingMode::None)
    common = "options.pooling is NONE (the path pools: SUM or MEAN)";
  else if (p.lookups.is_vbe())
    common = "VBE lookups (the path needs B bags per feature)";
  else if (p.lookups.weighted())
    common = "per-sample weights (the path counts unweighted lookups)";
  else if (p.tables.dtype != DType::F16)
    common = "tables.dtype is " + to_string(p.tables.dtype) + ", not fp16";
  else if (pol.accumulation != DType::F32)
    common = "options.policy.accumulation is " + to_string(pol.accumulation) + ", not fp32";
  else if (!dispatch::contains(dispatch::kCompiledSmallTable,
                               {p.tables.dtype, pol.accumulation, pol.output}))
    common = "options.policy.output " + to_string(pol.output) + " has no small-table kernel";
  std::vector<double> L;
  bool need_l = common.empty() && tuning.mode == SmallTableTuning::Mode::Auto;
  for (std::int64_t f = 0; f < T; ++f) {
    SmallTableFeature& d = out[f];
    d.feature = static_cast<std::int32_t>(f);
    const std::string who = "feature " + std::to_string(f) + ": ";
    if (!common.empty()) {
      d.reason = who + common;
      continue;
    }
    const std::int32_t t = p.tables.feature_table_map[f];
    const std::int64_t E = p.tables.rows[t];
    const std::int32_t D = p.tables.dims[t];
    std::int64_t sharer = -1;  // another feature on the same table
    for (std::int64_t h = 0; h < T && sharer < 0; ++h)
      if (h != f && p.tables.feature_table_map[h] == t) sharer = h;
    if (sharer >= 0) {
      d.reason = who + "table " + std::to_string(t) + " is shared with feature " +
                 std::to_string(sharer) + " (the backward's histogram covers one feature)";
    } else if (E > Limits::kMaxRows) {
      d.reason = who + "E = " + std::to_string(E) + " exceeds " + std::to_string(Limits::kMaxRows);
    } else if (E < 1) {
      d.reason = who + "E = 0";
    } else if (D < Limits::kMinDim || D > Limits::kMaxDim) {
      d.reason = who + "D = " + std::to_string(D) + " is outside [" +
                 std::to_string(Limits::kMinDim) + ", " + std::to_string(Limits::kMaxDim) + "]";
    } else if (need_l) {
      if (tuning.expected_bag_length <= 0 && L.empty()) L = measured_bag_lengths(p);
      const double l = tuning.expected_bag_length > 0 ? tuning.expected_bag_length : L[f];
      if (l < Limits::kMinExpectedBagLength)
        d.reason = who + "expected L = " + fmt(l) + " is below " +
                   fmt(Limits::kMinExpectedBagLength);
    }
    d.eligible = d.reason.empty();
  }
  return out;
}

std::vector<SmallFeatureMeta> small_table_meta(const ForwardProblem& p,
                                               const std::vector<SmallTableFeature>& decision) {
  const OutputLayout layout = make_output_layout(p);
  std::vector<std::int64_t> table_row_offset(p.tables.num_tables());
  std::int64_t K = 0;
  for (std::int64_t t = 0; t < p.tables.num_tables(); ++t) {
    table_row_offset[t] = K;
    K += p.tables.rows[t];
  }
  std::vector<SmallFeatureMeta> meta;
  for (const SmallTableFeature& d : decision) {
    if (!d.eligible) continue;
    const std::int32_t t = p.tables.feature_table_map[d.feature];
    meta.push_back(SmallFeatureMeta{p.tables.table_offsets[t],
                                    layout.feature_bag_offset[d.feature],
                                    layout.feature_col_offset[d.feature], table_row_offset[t],
                                    static_cast<std::int32_t>(p.tables.rows[t]),
                                    p.tables.dims[t]});
  }
  return meta;
}

std::int64_t small_table_padded_bags(std::int64_t batch_size) { return (batch_size + 15) / 16 * 16; }

std::size_t small_table_counts_bytes(std::int64_t num_small, std::int64_t batch_size) {
  if (num_small == 0) return 0;
  WorkspaceLayout L;
  L.add(static_cast<std::size_t>(num_small) * Limits::kMaxRows *
        static_cast<std::size_t>(small_table_padded_bags(batch_size)) * sizeof(std::uint16_t));
  L.add(static_cast<std::size_t>(num_small) * sizeof(std::uint32_t));
  return L.total;
}

CountsView small_table_counts_view(void* base, std::int64_t num_small, std::int64_t batch_size) {
  CountsView v;
  v.padded_bags = small_table_padded_bags(batch_size);
  v.counts = static_cast<std::uint16_t*>(base);
  v.invalid = reinterpret_cast<std::uint32_t*>(
      static_cast<char*>(base) +
      align_up(static_cast<std::size_t>(num_small) * Limits::kMaxRows *
               static_cast<std::size_t>(v.padded_bags) * sizeof(std::uint16_t)));
  return v;
}

}  // namespace tbe::cuda::detail
