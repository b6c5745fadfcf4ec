// FP64 reference forward (forward.h): exact products, FP64 sums in index order, one rounding.
#include "tbe/forward.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "lookup_source_internal.h"
#include "parallel_internal.h"
#include "round_internal.h"
#include "storage_internal.h"
#include "tbe/host_case.h"

namespace tbe {

namespace {

using detail::LookupSource;
using detail::prepare_lookups;

// ---- output sinks: store one FP64 row, rounded once to the output type --------------------------
struct F64Sink {
  double* out;
  void store(std::int64_t offset, const double* row, std::int64_t D) const {
    std::copy_n(row, D, out + offset);
  }
};
template <class OT>
struct TypedSink {
  OT* out;
  void store(std::int64_t offset, const double* row, std::int64_t D) const {
    // round_to(output, x): double -> float is RNE; FP16/BF16 go through round-to-odd FP32
    // (round_internal.h), since a plain double -> float -> half double rounding can miss a tie.
    for (std::int64_t d = 0; d < D; ++d) {
      if constexpr (std::is_same_v<OT, float>)
        out[offset + d] = static_cast<float>(row[d]);
      else if constexpr (std::is_same_v<OT, Eigen::half>)
        out[offset + d] = detail::half_rne(row[d]);
      else
        out[offset + d] = detail::bfloat16_rne(row[d]);
    }
  }
};

/// Lookups between a row's prefetch and its use.
constexpr std::int64_t kPrefetchLookups = 8;

// Per-bag metadata resolved once per bag.
struct BagInfo {
  std::int64_t feature, out_offset;
};

// Pooled (SUM / MEAN): one bag per iteration, OpenMP over bags. acc[D] in FP64; each term
// s_p·W[i_p] is exact in FP64 (24-bit by 24-bit products), the sum runs in index order.
template <class WT, class IT, class Sink>
TBE_ROW_KERNEL void pooled_forward(const ForwardProblem& p, const OutputLayout& layout,
                                   const IT* indices, const IT* offsets, const Sink& sink) {
  const TableBatchView& tb = p.tables;
  const auto* weights = static_cast<const typename WT::type*>(tb.weights);
  const float* psw = p.lookups.per_sample_weights;
  const bool mean = p.options.pooling == PoolingMode::Mean;
  const std::int64_t K = layout.num_bags;
  const bool vbe = p.lookups.is_vbe();
  const std::int64_t B = vbe ? 0 : p.lookups.batch_size;

  // Work estimate: lookups + bags, times the mean row width.
  const std::int64_t mean_D =
      std::max<std::int64_t>(layout.total_dim / std::max<std::int64_t>(layout.num_features, 1), 1);
  const std::int64_t work = (p.lookups.num_indices + K) * mean_D;
#pragma omp parallel if (detail::worth_parallel(work))
  {
    std::vector<double> acc_buf(static_cast<std::size_t>(kMaxD));
    double* acc = acc_buf.data();
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t k = 0; k < K; ++k) {
      BagInfo bag;
      if (vbe) {
        bag.feature = layout.feature_of_bag(k);
        bag.out_offset = layout.bag_output_offset(k);
      } else {
        bag.feature = k / B;
        bag.out_offset = (k % B) * layout.total_dim + layout.feature_col_offset[bag.feature];
      }
      const std::int64_t t = tb.feature_table_map[bag.feature];
      const std::int64_t D = tb.dims[t];
      const typename WT::type* table = weights + tb.table_offsets[t];  // 64-bit addressing
      const std::int64_t s = offsets[k], e = offsets[k + 1];
      // Rows are random gathers from large tables: prefetch the row kPrefetchLookups lookups
      // ahead, into the next bags of the same feature (same table).
      const std::int64_t prefetch_end = std::min<std::int64_t>(
          offsets[layout.feature_bag_offset[bag.feature + 1]], p.lookups.num_indices);
      std::fill_n(acc, D, 0.0);
      const std::int64_t row_bytes = D * static_cast<std::int64_t>(sizeof(typename WT::type));
      for (std::int64_t q = s; q < e; ++q) {
        const typename WT::type* row = table + static_cast<std::int64_t>(indices[q]) * D;
        if (q + kPrefetchLookups < prefetch_end) {
          const char* next = reinterpret_cast<const char*>(
              table + static_cast<std::int64_t>(indices[q + kPrefetchLookups]) * D);
          for (std::int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(next + b);
        }
        const auto add_row = [&](auto load) {
          if (psw != nullptr) {
            const double w = psw[q];
            for (std::int64_t d = 0; d < D; ++d) acc[d] += w * load(row, d);
          } else {
            for (std::int64_t d = 0; d < D; ++d) acc[d] += load(row, d);
          }
        };
        if (WT::fast_row(row, D))
          add_row([](const typename WT::type* r, std::int64_t d) { return WT::load_fast(r, d); });
        else
          add_row([](const typename WT::type* r, std::int64_t d) { return WT::load(r, d); });
      }
      // MEAN: sum / L as one FP64 division; an empty bag keeps its +0.0 (never NaN).
      if (mean && e > s) {
        const double L = static_cast<double>(e - s);
        for (std::int64_t d = 0; d < D; ++d) acc[d] /= L;
      }
      sink.store(bag.out_offset, acc, D);
    }
  }
}

// NONE: output row q = W[i_q] of the table of the bag holding q; rows no bag covers are zero
// (the caller zero-filled the output).
template <class WT, class IT, class Sink>
void sequence_forward(const ForwardProblem& p, const OutputLayout& layout, const IT* indices,
                      const IT* offsets, const Sink& sink) {
  const TableBatchView& tb = p.tables;
  const auto* weights = static_cast<const typename WT::type*>(tb.weights);
  const std::int64_t K = layout.num_bags;
  const std::int64_t D = layout.total_dim;
#pragma omp parallel if (detail::worth_parallel((p.lookups.num_indices + K) * D))
  {
    std::vector<double> row_buf(static_cast<std::size_t>(std::max<std::int64_t>(D, 1)));
    double* rowd = row_buf.data();
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t f = layout.feature_of_bag(k);
      const std::int64_t t = tb.feature_table_map[f];
      const typename WT::type* table = weights + tb.table_offsets[t];
      for (std::int64_t q = offsets[k]; q < offsets[k + 1]; ++q) {
        const typename WT::type* row = table + static_cast<std::int64_t>(indices[q]) * D;
        for (std::int64_t d = 0; d < D; ++d) rowd[d] = WT::load(row, d);
        sink.store(q * D, rowd, D);
      }
    }
  }
}

template <class WT, class IT, class Sink>
void run_typed(const ForwardProblem& p, const OutputLayout& layout, const LookupSource& src,
               const Sink& sink) {
  const auto* indices = static_cast<const IT*>(src.lookups.indices);
  const auto* offsets = static_cast<const IT*>(src.lookups.offsets);
  if (p.options.pooling == PoolingMode::None)
    sequence_forward<WT, IT>(p, layout, indices, offsets, sink);
  else
    pooled_forward<WT, IT>(p, layout, indices, offsets, sink);
}

// The one dispatch point: runtime weight dtype x index dtype -> template instantiation.
template <class Sink>
void dispatch(const ForwardProblem& p, const OutputLayout& layout, const LookupSource& src,
              const Sink& sink) {
  const bool i32 = src.lookups.index_dtype == DType::I32;
  detail::with_float_storage(p.tables.dtype, "tables.dtype", [&]<class WT>() {
    i32 ? run_typed<WT, std::int32_t>(p, layout, src, sink)
        : run_typed<WT, std::int64_t>(p, layout, src, sink);
  });
}

ForwardStats make_stats(std::int64_t warnings) {
  ForwardStats st;
  st.warnings = warnings;
  st.paths = {"reference"};
  return st;
}

}  // namespace

std::vector<double> forward_reference_fp64(const ForwardProblem& p, ForwardStats* stats) {
  throw_if_error(validate(p));
  const OutputLayout layout = make_output_layout(p);
  const LookupSource src = prepare_lookups(p);  // may throw BoundsCheckError
  std::vector<double> out(static_cast<std::size_t>(layout.numel), 0.0);
  dispatch(p, layout, src, F64Sink{out.data()});
  if (stats) *stats = make_stats(src.warnings);
  return out;
}

ForwardStats forward_reference(const ForwardProblem& p, void* output) {
  throw_if_error(validate(p));
  const OutputLayout layout = make_output_layout(p);
  const LookupSource src = prepare_lookups(p);  // may throw BoundsCheckError; nothing written yet
  if (layout.numel > 0 && output == nullptr)
    throw InvalidArgument("output", "output: null pointer for " + std::to_string(layout.numel) +
                                        " elements");
  const std::size_t bytes =
      static_cast<std::size_t>(layout.numel) * dtype_size(p.options.policy.output);
  // NONE leaves rows that no bag covers at zero (every pooled element is written by its bag,
  // but VBE/B=0 shapes are cheap to zero too). +0.0 is all-zero bits in every float type.
  if (p.options.pooling == PoolingMode::None && bytes > 0) std::memset(output, 0, bytes);
  switch (p.options.policy.output) {
    case DType::F32: dispatch(p, layout, src, TypedSink<float>{static_cast<float*>(output)}); break;
    case DType::F16:
      dispatch(p, layout, src, TypedSink<Eigen::half>{static_cast<Eigen::half*>(output)});
      break;
    case DType::BF16:
      dispatch(p, layout, src, TypedSink<Eigen::bfloat16>{static_cast<Eigen::bfloat16*>(output)});
      break;
    default: break;  // rejected by validate()
  }
  return make_stats(src.warnings);
}

}  // namespace tbe
