// Transpose of the lookups (backward.h transpose_lookups; FBGEMM transpose_embedding_input):
// (linearized id, position) pairs of the lookups inside bags, sorted by id then position (= a
// stable sort by id of the position-ordered stream), then run-length encoded.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "parallel_internal.h"
#include "tbe/backward.h"
#include "transpose_internal.h"

namespace tbe {
namespace detail {
namespace {

/// Widest radix digit: 2^11 counters per thread stay in L1.
constexpr int kMaxDigitBits = 11;

/// One stable counting pass on bits [shift, shift + bits) of the keys: (keys, positions) ->
/// (keys_out, positions_out). Each thread counts and scatters one contiguous chunk; the offsets
/// are laid out digit-major, thread-minor, so the pass is stable whatever the thread count.
void radix_pass(const std::vector<std::uint64_t>& keys, const std::vector<std::int64_t>& positions,
                std::vector<std::uint64_t>& keys_out, std::vector<std::int64_t>& positions_out,
                int shift, int bits, std::vector<std::int64_t>& histogram) {
  const std::int64_t M = static_cast<std::int64_t>(keys.size());
  const std::int64_t buckets = std::int64_t{1} << bits;
  const std::uint64_t mask = static_cast<std::uint64_t>(buckets - 1);
  histogram.resize(static_cast<std::size_t>(omp_get_max_threads() * buckets));
  keys_out.resize(keys.size());
  positions_out.resize(positions.size());
#pragma omp parallel if (worth_parallel(M))
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t lo = M * t / nt, hi = M * (t + 1) / nt;
    std::int64_t* count = histogram.data() + t * buckets;
    std::fill_n(count, buckets, 0);
    for (std::int64_t i = lo; i < hi; ++i) ++count[(keys[i] >> shift) & mask];
#pragma omp barrier
#pragma omp single
    {
      std::int64_t running = 0;
      for (std::int64_t b = 0; b < buckets; ++b)
        for (int u = 0; u < nt; ++u) {
          std::int64_t& c = histogram[u * buckets + b];
          const std::int64_t n = c;
          c = running;
          running += n;
        }
    }  // implicit barrier
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::int64_t dst = count[(keys[i] >> shift) & mask]++;
      keys_out[dst] = keys[i];
      positions_out[dst] = positions[i];
    }
  }
}

template <class IT>
void transpose_typed(const ForwardProblem& p, const IT* indices, const IT* offsets, Transpose& tr,
                     TransposeScratch& s) {
  const TableBatchView& tb = p.tables;
  const OutputLayout layout = make_output_layout(p);
  const std::int64_t N = p.lookups.num_indices;
  const std::int64_t K = layout.num_bags;

  // row_offset[t] = Σ_{t' < t} E_t' (int64: the linearized id space of every table).
  std::vector<std::int64_t> row_offset(static_cast<std::size_t>(tb.num_tables()), 0);
  for (std::int64_t t = 1; t < tb.num_tables(); ++t)
    row_offset[t] = row_offset[t - 1] + tb.rows[t - 1];

  // Slots of the position-ordered stream: bag k's lookups fill [bag_slot[k], bag_slot[k + 1]).
  s.bag_slot.resize(static_cast<std::size_t>(K) + 1);
  s.bag_slot[0] = 0;
  for (std::int64_t k = 0; k < K; ++k)
    s.bag_slot[k + 1] = s.bag_slot[k] + std::max<std::int64_t>(offsets[k + 1] - offsets[k], 0);
  const std::int64_t M = s.bag_slot[K];  // Σ SL

  tr.position_bag.assign(static_cast<std::size_t>(N), -1);
  tr.sorted_positions.resize(static_cast<std::size_t>(M));
  s.keys.resize(static_cast<std::size_t>(M));
  // Linearized ids, then keys = id - (smallest id) as unsigned: the signed order, on the fewest
  // bits (ids are >= 0 for valid lookups; the subtraction keeps any int64 order exact).
  std::int64_t min_id = std::numeric_limits<std::int64_t>::max();
  std::int64_t max_id = std::numeric_limits<std::int64_t>::min();
#pragma omp parallel for schedule(static) reduction(min : min_id) reduction(max : max_id) \
    if (worth_parallel(M + K))
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t base = row_offset[tb.feature_table_map[layout.feature_of_bag(k)]];
    std::int64_t slot = s.bag_slot[k];
    for (std::int64_t q = offsets[k]; q < offsets[k + 1]; ++q, ++slot) {
      const std::int64_t id = base + static_cast<std::int64_t>(indices[q]);
      tr.position_bag[q] = k;
      s.keys[slot] = static_cast<std::uint64_t>(id);
      tr.sorted_positions[slot] = q;
      min_id = std::min(min_id, id);
      max_id = std::max(max_id, id);
    }
  }
  const std::uint64_t key0 = static_cast<std::uint64_t>(min_id);
  std::uint64_t max_key = 0;
  if (M > 0) {
    max_key = static_cast<std::uint64_t>(max_id) - key0;
#pragma omp parallel for schedule(static) if (worth_parallel(M))
    for (std::int64_t i = 0; i < M; ++i) s.keys[i] -= key0;
  }

  // LSD radix sort on the bits the largest key needs, in equal digits of <= kMaxDigitBits.
  const int key_bits = 64 - std::countl_zero(max_key);
  const int passes = (key_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = passes > 0 ? (key_bits + passes - 1) / passes : 0;
  for (int pass = 0; pass < passes; ++pass) {
    radix_pass(s.keys, tr.sorted_positions, s.keys_alt, s.positions_alt, pass * digit_bits,
               std::min(digit_bits, key_bits - pass * digit_bits), s.histogram);
    std::swap(s.keys, s.keys_alt);
    std::swap(tr.sorted_positions, s.positions_alt);
  }

  // Run-length encoding.
  tr.linear_ids.clear();
  tr.run_offsets.clear();
  tr.run_offsets.push_back(0);
  for (std::int64_t i = 0; i < M; ++i) {
    if (i == 0 || s.keys[i] != s.keys[i - 1]) {
      if (i > 0) tr.run_offsets.push_back(i);
      tr.linear_ids.push_back(static_cast<std::int64_t>(s.keys[i] + key0));
    }
  }
  if (M > 0) tr.run_offsets.push_back(M);
  tr.run_lengths.resize(tr.linear_ids.size());
  for (std::size_t r = 0; r < tr.linear_ids.size(); ++r)
    tr.run_lengths[r] = tr.run_offsets[r + 1] - tr.run_offsets[r];
}

}  // namespace

void transpose_into(const ForwardProblem& p, const LookupBatchView& view, Transpose& tr,
                    TransposeScratch& scratch) {
  if (view.index_dtype == DType::I32)
    transpose_typed(p, static_cast<const std::int32_t*>(view.indices),
                    static_cast<const std::int32_t*>(view.offsets), tr, scratch);
  else
    transpose_typed(p, static_cast<const std::int64_t*>(view.indices),
                    static_cast<const std::int64_t*>(view.offsets), tr, scratch);
}

}  // namespace detail

Transpose transpose_lookups(const ForwardProblem& p, const RepairResult& rr) {
  LookupBatchView view = p.lookups;
  view.index_dtype = DType::I64;
  view.indices = rr.indices.data();
  view.offsets = rr.offsets.data();
  Transpose tr;
  detail::TransposeScratch scratch;
  detail::transpose_into(p, view, tr, scratch);
  return tr;
}

}  // namespace tbe
