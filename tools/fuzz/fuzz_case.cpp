// The case representation of tbe-fuzz (fuzz_case.h).
#include "fuzz/fuzz_case.h"

#include <sstream>

namespace tbe::fuzz {

const char* to_string(Invalid i) {
  switch (i) {
    case Invalid::None: return "none";
    case Invalid::OffsetsShort: return "offsets-short";
    case Invalid::OffsetsLong: return "offsets-long";
    case Invalid::DimTooBig: return "dim-2049";
    case Invalid::DimZero: return "dim-0";
    case Invalid::RowsZero: return "rows-0";
    case Invalid::FeatureMap: return "feature-map";
    case Invalid::PolicyWeights: return "policy-weights";
    case Invalid::NoneWeighted: return "none-weighted";
    case Invalid::NoneMixedD: return "none-mixed-d";
    case Invalid::VbeTotals: return "vbe-totals";
    case Invalid::NegativeBatch: return "negative-batch";
  }
  return "?";
}

void build(const FuzzCase& fc, Built& out) {
  ForwardCase& c = out.c;
  c = ForwardCase{};
  const Tables& tb = *fc.tables;
  c.weights_dtype = tb.dtype;
  c.rows = tb.rows;
  c.dims = tb.dims;
  c.table_offsets = tb.offsets;
  ForwardCaseSpec spec;
  spec.feature_table_map = fc.ftm;
  spec.batch_size = fc.B;
  spec.vbe_ranks = fc.R;
  spec.vbe_batch_sizes = fc.vbe;
  spec.index_dtype = fc.index_dtype;
  spec.leading = fc.lead;
  const bool weighted = fc.weighted || fc.invalid == Invalid::NoneWeighted;
  if (weighted) spec.per_sample_weights.assign(fc.lead.size(), 1.0f);
  spec.bags.reserve(fc.bags.size());
  for (const Bag& b : fc.bags) {
    spec.bags.push_back(b.idx);
    if (weighted)
      spec.per_sample_weights.insert(spec.per_sample_weights.end(), b.w.begin(), b.w.end());
  }
  spec.offset_faults = fc.faults;
  spec.options.pooling = fc.pooling;
  spec.options.bounds_check = fc.bounds;
  spec.options.policy = fc.policy;
  build_lookups(spec, c);
  const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
  switch (fc.invalid) {
    case Invalid::None: break;
    case Invalid::OffsetsShort: c.offsets.pop_back(); break;
    case Invalid::OffsetsLong: c.offsets.push_back(N); break;
    case Invalid::DimTooBig: c.dims[0] = 2049; break;
    case Invalid::DimZero: c.dims[0] = 0; break;
    case Invalid::RowsZero: c.rows[0] = 0; break;
    case Invalid::FeatureMap:
      if (!c.feature_table_map.empty())
        c.feature_table_map.back() = static_cast<std::int32_t>(c.rows.size());
      break;
    case Invalid::PolicyWeights:
      c.options.policy.weights = tb.dtype == DType::F32 ? DType::F16 : DType::F32;
      break;
    case Invalid::NoneWeighted: c.options.pooling = PoolingMode::None; break;
    case Invalid::NoneMixedD:
      c.options.pooling = PoolingMode::None;
      if (!c.feature_table_map.empty()) {
        // a smaller D for the last feature's table (the buffer stays large enough)
        auto& d = c.dims[c.feature_table_map.back()];
        d = d > 1 ? d - 1 : d;
      }
      break;
    case Invalid::VbeTotals:
      if (!c.vbe_batch_sizes.empty()) c.vbe_batch_sizes[0] += 1;
      break;
    case Invalid::NegativeBatch:
      if (c.vbe_ranks == 0) c.batch_size = -1;
      break;
  }
  out.p = c.view();  // int32 narrowing checked (the generator keeps every value in range)
  out.p.tables.weights = tb.weights.empty() ? nullptr : tb.weights.data();
}

std::string describe(const FuzzCase& fc) {
  std::ostringstream s;
  s << "T=" << fc.T() << " tables=" << fc.tables->rows.size() << " N=" << fc.lookups()
    << " bags=" << fc.bags.size();
  if (fc.R) s << " vbeR=" << fc.R;
  else s << " B=" << fc.B;
  s << " w=" << to_string(fc.tables->dtype) << " out=" << to_string(fc.policy.output)
    << " policy=" << to_string(fc.policy.kind) << " idx=" << to_string(fc.index_dtype)
    << " pool=" << to_string(fc.pooling) << " bounds=" << to_string(fc.bounds)
    << " weighted=" << fc.weighted << " fused=" << fc.fused << " faults=" << fc.faults.size()
    << " lead=" << fc.lead.size() << " fill=" << fc.fill;
  if (fc.small_table) s << " small_table";
  if (fc.invalid != Invalid::None) s << " invalid=" << to_string(fc.invalid);
  s << " dims=[";
  for (std::size_t t = 0; t < fc.tables->dims.size(); ++t)
    s << (t ? "," : "") << fc.tables->dims[t];
  s << "] rows=[";
  for (std::size_t t = 0; t < fc.tables->rows.size(); ++t)
    s << (t ? "," : "") << fc.tables->rows[t];
  s << "]";
  return s.str();
}


}  // namespace tbe::fuzz
