// Backward preprocessing (docs/backward.md "The computation": the transpose, FBGEMM transpose_embedding_input):
//  1. linearize: a block per kBlockThreads bags (of the repaired offsets) and a thread per lookup p
//     of them (its bag found among the block's bags in shared memory) writes
//     key[p] = key_base[f] + index[p] (key_base: row_offset[table(f)] for linearized
//     ids, table(f) · 2^rb for RowBits keys, docs/backward.md "The transpose's keys"; WARNING/IGNORE: a bad index becomes
//     row 0 and is counted, as the forward's fused check) and the 32-bit sorted value (bag id or
//     position, see SortedValue); for weighted/MEAN problems also pos_bag[p] and the scale
//     c_p = w_p / L in FP64. Positions outside every bag ([0, o'[0]) and [o'[T·B], N)) get the
//     sentinel key (K = Σ E_t, or T_tables · 2^rb + 2^rb - 1), so they sort last and form one run
//     that backward skips.
//  2. cub::DeviceRadixSort::SortPairs on bits [0, end_bit) only (bits of K, or rb; 32-bit keys
//     when K < 2^31), stable, so positions stay ascending inside a run; where 9-bit digits save a
//     pass, CUB's onesweep dispatch with its SM90 tuning but 9-bit digits (WideDigitPolicyHub);
//  3. cub::DeviceRunLengthEncode::Encode -> unique keys, SL, number of runs (device scalar);
//  4. cub::DeviceScan::ExclusiveSum of SL -> run offsets. CUB is sized by upper bounds (N items to
//     sort and encode, min(N, K + 1) runs to scan); nothing is read back to the host.
//  4b. RowBits keys only: the runs back in (table, row) order, keys rewritten as linearized ids
//     (runs_pad_keys, a sort of the R <= K + 1 run keys, runs_table_order; RunOrderArgs);
//  5. route: runs with SL >= threshold are listed (slot, chunk range) for the long-run kernels
//     (atomic slot allocation; a run's result does not depend on its slot), the rest counted.
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/backward_launch.h"
#include "kernels/backward_runs.cuh"
#include "kernels/common.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

constexpr int kBlock = tuning::Preprocess::kBlockThreads;

template <class Idx, class Key>
__global__ void __launch_bounds__(kBlock) linearize_block_per_bags(const LinearizeArgs a) {
  Key* keys = static_cast<Key*>(a.keys);
  if (fatal_aborted(a.abort_key)) {
    // FATAL violation: the offsets/indices may be anything, so every key becomes the sentinel (the
    // RLE then yields one run, within its min(N, K + 1) bound; every later kernel exits anyway).
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kBlock;
    for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x; p < a.N;
         p += stride)
      keys[p] = static_cast<Key>(a.sentinel);
    return;
  }
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  const Idx* indices = static_cast<const Idx*>(a.indices);
  const bool scaled = a.value_kind == SortedValue::PositionScaled;
  auto clamp_n = [&](std::int64_t v) { return v < 0 ? std::int64_t{0} : v > a.N ? a.N : v; };
  auto outside = [&](std::int64_t lo, std::int64_t hi) {  // positions that belong to no bag
    for (std::int64_t p = lo + threadIdx.x; p < hi; p += kBlock) {
      keys[p] = static_cast<Key>(a.sentinel);
      a.values[p] = static_cast<std::uint32_t>(p);
      if (scaled) {
        a.pos_bag[p] = -1;
        a.pos_scale[p] = 0.0;
      }
    }
  };
  if (a.num_bags == 0) {
    if (blockIdx.x == 0) outside(0, a.N);
    return;
  }
  if (blockIdx.x == 0) outside(0, clamp_n(static_cast<std::int64_t>(offsets[0])));
  if (blockIdx.x == gridDim.x - 1) outside(clamp_n(static_cast<std::int64_t>(offsets[a.num_bags])), a.N);
  // this block's bags [k0, k0 + nb): their offsets, and their feature's key base and rows
  __shared__ std::int64_t s_off[kBlock + 1];
  __shared__ std::int64_t s_base[kBlock];
  __shared__ std::int64_t s_rows[kBlock];
  __shared__ std::int32_t s_feat[kBlock];
  const std::int64_t k0 = static_cast<std::int64_t>(blockIdx.x) * kBlock;
  const int nb = static_cast<int>(min(static_cast<std::int64_t>(kBlock), a.num_bags - k0));
  for (int i = threadIdx.x; i <= nb; i += kBlock) s_off[i] = static_cast<std::int64_t>(offsets[k0 + i]);
  if (threadIdx.x < nb) {
    const std::int64_t f = last_le(a.feature_first_bag, a.num_features + 1, k0 + threadIdx.x);
    s_feat[threadIdx.x] = static_cast<std::int32_t>(f);
    s_base[threadIdx.x] = a.feature_key_base[f];
    s_rows[threadIdx.x] = a.features[f].rows;
  }
  __syncthreads();
  // the block's positions, one per thread and kLinearizeUnroll at a time (their index loads in
  // flight together); a position's bag is the last of the block's bags starting at or before it
  const std::int64_t lo = clamp_n(s_off[0]), hi = max(lo, clamp_n(s_off[nb]));
  constexpr int U = tuning::Preprocess::kLinearizeUnroll;
  unsigned long long bad = 0;
  for (std::int64_t p0 = lo + threadIdx.x; p0 < hi; p0 += static_cast<std::int64_t>(kBlock) * U) {
    std::int64_t iv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t p = p0 + static_cast<std::int64_t>(u) * kBlock;
      iv[u] = p < hi ? static_cast<std::int64_t>(indices[p]) : 0;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t p = p0 + static_cast<std::int64_t>(u) * kBlock;
      if (p >= hi) break;
      const int j = last_le_at([&](int m) { return s_off[m]; }, nb, p);
      const std::int64_t k = k0 + j;
      const std::int64_t E = s_rows[j];
      const std::int64_t i = iv[u];
      std::int64_t key = s_base[j] + i;
      if (i < 0 || i >= E) {
        if (a.check_indices) {  // WARNING/IGNORE: row 0, counted
          key = s_base[j];
          ++bad;
        } else {  // NONE with a broken promise: no gradient, and keys stay in [0, K] (R <= K + 1)
          key = a.sentinel;
        }
      }
      keys[p] = static_cast<Key>(TBE_MUTANT_SWAP(a, kBwdSharedRowsTwice, key < a.sentinel ? key | static_cast<std::int64_t>(s_feat[j]) << 40 : key, key));
      a.values[p] = static_cast<std::uint32_t>(a.value_kind == SortedValue::Bag ? k : p);
      if (scaled) {
        const double inv_len_num = static_cast<double>(s_off[j + 1] - s_off[j]);
        const double w = TBE_MUTANT_SWAP(a, kBwdPswScaleIgnored, false, a.per_sample_weights != nullptr) ? static_cast<double>(a.per_sample_weights[p]) : 1.0;
        a.pos_bag[p] = static_cast<std::int32_t>(k);
        a.pos_scale[p] = TBE_MUTANT_SWAP(a, kBwdMeanScaleMissing, w, TBE_MUTANT_SWAP(a, kBwdMeanScaleDoubled, a.mean ? w / inv_len_num / inv_len_num : w, a.mean ? w / inv_len_num : w));
      }
    }
  }
  if (bad != 0) atomicAdd(&a.counters->bad_indices, bad);
}

template <class Idx, class Key>
void linearize_t(const LinearizeArgs& a, cudaStream_t stream) {
  if (a.N == 0) return;
  const std::int64_t blocks = (std::max<std::int64_t>(a.num_bags, 1) + kBlock - 1) / kBlock;
  linearize_block_per_bags<Idx, Key><<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(a);
  check_launch("linearize_block_per_bags");
}

// CUB's onesweep dispatch with its own SM90 tuning of 32-bit keys and values
// (cub::detail::radix::policy_hub's OnesweepSmallKeyTunedPolicy) except the digit: Bits wide
// instead of 8, so 17 or 18 key bits take two passes instead of three (9 bits one instead of two,
// 25 to 27 bits three instead of four). The other policies (single
// tile, the non-onesweep fallbacks) are CUB's. Tied to the toolkit's CCCL (CUDA 13.0's 3.0).
static_assert(CUB_VERSION / 100 == 3000,
              "WideDigitPolicyHub reuses cub::detail::radix internals of CCCL 3.0: check them "
              "against this CUB before changing the toolkit");
using SortOffset = cub::detail::choose_offset_t<int>;

template <int Bits>
struct WideDigitPolicyHub {
  using Tuned = cub::detail::radix::policy_hub<std::uint32_t, std::uint32_t, SortOffset>::
      OnesweepSmallKeyTunedPolicy<cub::detail::radix::sm90_small_key_tuning<4, 4, sizeof(SortOffset)>>;
  struct Policy : cub::ChainedPolicy<900, Policy, Policy>, Tuned {
    static constexpr bool ONESWEEP = true;
    static constexpr int ONESWEEP_RADIX_BITS = Bits;
    using HistogramPolicy = cub::AgentRadixSortHistogramPolicy<128, 16, 1, std::uint32_t, Bits>;
    using ExclusiveSumPolicy = cub::AgentRadixSortExclusiveSumPolicy<256, Bits>;
    using OnesweepPolicy = cub::AgentRadixSortOnesweepPolicy<
        tuning::Preprocess::kWideDigitThreads, tuning::Preprocess::kWideDigitItems, std::uint32_t, 1,
        cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY, cub::BLOCK_SCAN_RAKING_MEMOIZE,
        cub::RADIX_SORT_STORE_DIRECT, Bits>;
  };
  using MaxPolicy = Policy;
};

using WideDigitSort =
    cub::DispatchRadixSort<cub::SortOrder::Ascending, std::uint32_t, std::uint32_t, SortOffset,
                           cub::detail::identity_decomposer_t,
                           WideDigitPolicyHub<tuning::Preprocess::kWideDigitBits>>;

/// Stable sort of (keys_in, values_in) on bits [0, end_bit) into (keys_out, values_out); temp ==
/// nullptr: writes the temp bytes only.
template <class Key>
void sort_pairs(void* temp, std::size_t& bytes, int digit_bits, const Key* keys_in, Key* keys_out,
                const std::uint32_t* values_in, std::uint32_t* values_out, int items, int end_bit,
                cudaStream_t stream) {
  if constexpr (sizeof(Key) == 4) {
    if (digit_bits == tuning::Preprocess::kWideDigitBits) {
      // as cub::DeviceRadixSort::SortPairs: the inputs are not overwritten (CUB keeps the
      // alternate buffers in its temp storage)
      cub::DoubleBuffer<std::uint32_t> keys(const_cast<Key*>(keys_in), keys_out);
      cub::DoubleBuffer<std::uint32_t> values(const_cast<std::uint32_t*>(values_in), values_out);
      cuda_check(WideDigitSort::Dispatch(temp, bytes, keys, values, static_cast<SortOffset>(items),
                                         0, end_bit, false, stream),
                 temp == nullptr ? "cub::DispatchRadixSort (9-bit digits, size query)"
                                 : "cub::DispatchRadixSort (9-bit digits)");
      return;
    }
  }
  cuda_check(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in, values_out,
                                             items, 0, end_bit, stream),
             temp == nullptr ? "cub::DeviceRadixSort::SortPairs (size query)"
                             : "cub::DeviceRadixSort::SortPairs");
}

template <class Key>
std::size_t temp_bytes_t(std::int64_t n, int digit_bits) {
  const int items = static_cast<int>(n);
  std::size_t sort = 0, rle = 0, scan = 0;
  sort_pairs<Key>(nullptr, sort, digit_bits, nullptr, nullptr, nullptr, nullptr, items,
                  static_cast<int>(sizeof(Key) * 8), nullptr);
  cuda_check(cub::DeviceRunLengthEncode::Encode(nullptr, rle, static_cast<Key*>(nullptr),
                                                static_cast<Key*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr), items),
             "cub::DeviceRunLengthEncode::Encode (size query)");
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<std::int32_t*>(nullptr),
                                           static_cast<std::uint32_t*>(nullptr), items + 1),
             "cub::DeviceScan::ExclusiveSum (size query)");
  return std::max(sort, std::max(rle, scan));
}

template <class Key>
void sort_rle_t(const SortRleArgs& a, cudaStream_t stream) {
  const int items = static_cast<int>(a.n);
  std::size_t bytes = a.temp_bytes;
  sort_pairs<Key>(a.temp, bytes, a.digit_bits, static_cast<const Key*>(a.keys_in),
                  static_cast<Key*>(a.keys_out), a.values_in, a.values_out, items, a.end_bit,
                  stream);
  bytes = a.temp_bytes;
  cuda_check(cub::DeviceRunLengthEncode::Encode(a.temp, bytes, static_cast<const Key*>(a.keys_out),
                                                static_cast<Key*>(a.run_keys), a.run_lengths,
                                                a.num_runs, items, stream),
             "cub::DeviceRunLengthEncode::Encode");
  // Over the upper bound min(N, K + 1) of R: Σ over the first R lengths is all that is used;
  // entries past R are never read by backward.
  bytes = a.temp_bytes;
  cuda_check(cub::DeviceScan::ExclusiveSum(a.temp, bytes, a.run_lengths, a.run_offsets,
                                           static_cast<int>(a.max_runs), stream),
             "cub::DeviceScan::ExclusiveSum");
}

// --- RowBits keys: the runs back in (table, row) order (RunOrderArgs) ---
__global__ void __launch_bounds__(kBlock) runs_pad_keys(const RunOrderArgs a) {
  const std::int64_t R = *a.num_runs;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kBlock;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x; r < a.max_runs;
       r += stride) {
    a.sort_keys_in[r] = r < R ? a.run_keys[r] : 0xffffffffu;  // past R: sorts last, never read
    a.perm_in[r] = static_cast<std::uint32_t>(r);
  }
}

__global__ void __launch_bounds__(kBlock) runs_table_order(const RunOrderArgs a) {
  const std::int64_t R = *a.num_runs;
  const std::uint32_t mask = (1u << a.row_bits) - 1u;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kBlock;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x; r < R;
       r += stride) {
    const std::uint32_t k = a.sort_keys_out[r], from = a.perm_out[r];
    const std::uint32_t t = k >> a.row_bits;
    a.run_keys[r] = static_cast<std::uint32_t>(
        t < static_cast<std::uint32_t>(a.num_tables) ? a.table_row_offset[t] + (k & mask) : a.sentinel);
    a.lengths_out[r] = a.run_lengths[from];
    a.offsets_out[r] = a.run_offsets[from];
  }
}

// --- BackwardTuning::ShortGroups::PerDim: each table's first run (RunArgs::table_runs) ---
// One warp per entry t: the first run whose key is >= the row offset of table t, by a 32-way
// search. Each step probes 32 keys spread over [lo, hi) (keys ascend, so the probes below the
// target are a prefix of the lanes) and keeps the keys between the last probe below the target and
// the first at or above it: log32(R) steps (5 for 4 M runs). Entry num_tables is R.
__global__ void __launch_bounds__(kBlock) table_runs_search(const RunArgs a) {
  const std::int64_t t = (static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (t > a.num_tables) return;  // uniform per warp
  const std::int64_t R = *a.num_runs;
  if (t == a.num_tables) {
    if (lane == 0) a.table_runs[t] = static_cast<std::uint32_t>(TBE_MUTANT_SWAP(a, kBwdRleLastRunDropped, R - 1, R));
    return;
  }
  const std::int64_t target = a.tables[t].row_offset;
  std::int64_t lo = 0, hi = R;  // the answer is in [lo, hi]: keys before lo are below the target
  while (lo < hi) {
    const std::int64_t n = hi - lo;
    const std::int64_t p = lo + n * lane / 32;  // in [lo, hi), ascending in the lane
    const std::int64_t key = run_key(a, p);
    const unsigned below = __ballot_sync(0xffffffffu, TBE_MUTANT_SWAP(a, kBwdTableRunsInclusive, key <= target, key < target));
    const int c = __popc(below);  // lanes [0, c) probed keys below the target
    if (c == 0) {
      hi = lo;  // key[lo] >= target
    } else {
      const std::int64_t last_below = lo + n * (c - 1) / 32;
      if (c < 32) hi = lo + n * c / 32;  // the first probe at or above the target
      lo = last_below + 1;
    }
  }
  if (lane == 0) a.table_runs[t] = static_cast<std::uint32_t>(lo);
}

// --- router: one thread per run (grid-stride up to the device count R) ---
__global__ void __launch_bounds__(kBlock) route_runs(const RunArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const std::int32_t R = TBE_MUTANT_SWAP(a, kBwdRleLastRunDropped, *a.num_runs - 1, *a.num_runs);
  unsigned long long short_runs = 0, short_lookups = 0, short_over = 0, long_runs = 0,
                     long_lookups = 0, chunks = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kBlock;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x; i < R;
       i += stride) {
    const std::int64_t key = run_key(a, i);
    if (key >= a.sentinel) continue;
    const std::int32_t sl = a.run_lengths[i];
    if (histogram_owns(a, key, sl)) continue;  // updated by the small-table path
    if (TBE_MUTANT_SWAP(a, kBwdSlThresholdOffByOne, sl <= a.long_threshold, sl < a.long_threshold)) {
      ++short_runs;
      short_lookups += static_cast<unsigned long long>(sl);
      // (per-D launches: a table whose group is narrower than the ring gathers in registers)
      short_over += sl > tuning::RunKernels::kRowsInFlight &&
                            (!a.per_dim || (table_of(a, key).dim + 3) / 4 > tuning::RunKernels::kShortStageRows / 2)
                        ? 1u : 0u;
      continue;
    }
    const std::uint32_t nch = static_cast<std::uint32_t>(TBE_MUTANT_SWAP(a, kBwdChunkCountFloor, sl / a.chunk_size, (sl + a.chunk_size - 1) / a.chunk_size));
    const std::uint32_t slot = atomicAdd(&a.counters->num_long, 1u);
    const std::uint32_t base = atomicAdd(&a.counters->num_chunks, nch);
    a.long_runs[slot] = LongRun{static_cast<std::uint32_t>(i), base, nch, 0};
    a.run_counters[slot] = 0;
    ++long_runs;
    long_lookups += static_cast<unsigned long long>(sl);
    chunks += nch;
  }
  // one atomic per warp per counter
  for (int d = 16; d > 0; d >>= 1) {
    short_runs += __shfl_down_sync(0xffffffffu, short_runs, d);
    short_lookups += __shfl_down_sync(0xffffffffu, short_lookups, d);
    short_over += __shfl_down_sync(0xffffffffu, short_over, d);
    long_runs += __shfl_down_sync(0xffffffffu, long_runs, d);
    long_lookups += __shfl_down_sync(0xffffffffu, long_lookups, d);
    chunks += __shfl_down_sync(0xffffffffu, chunks, d);
  }
  if ((threadIdx.x & 31) == 0) {
    if (short_runs) atomicAdd(&a.counters->short_runs, short_runs);
    if (short_lookups) atomicAdd(&a.counters->short_lookups, short_lookups);
    if (short_over) atomicAdd(&a.counters->short_runs_over_batch, short_over);
    if (long_runs) atomicAdd(&a.counters->long_runs, long_runs);
    if (long_lookups) atomicAdd(&a.counters->long_lookups, long_lookups);
    if (chunks) atomicAdd(&a.counters->chunks, chunks);
  }
}

// One warp per long run: its chunk slots (run slot, locality key = sorted value of the chunk's
// first lookup, id) and, for float atomics, the zeroed accumulator row.
__global__ void __launch_bounds__(kBlock) expand_long_runs(const RunArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const std::uint32_t num_long = a.counters->num_long;
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (kBlock / 32);
  for (std::int64_t s = (static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x) / 32;
       s < num_long; s += warps) {
    const LongRun lr = a.long_runs[s];
    const std::uint32_t run_begin = a.run_offsets[lr.run];
    for (std::uint32_t j = lane; j < lr.num_chunks; j += 32) {
      a.chunk_run[lr.chunk_base + j] = static_cast<std::uint32_t>(s);
      a.chunk_keys[lr.chunk_base + j] =
          a.sorted_values[run_begin + j * static_cast<std::uint32_t>(a.chunk_size)];
      a.chunk_ids[lr.chunk_base + j] = lr.chunk_base + j;
    }
    if (TBE_MUTANT_SWAP(a, kBwdAtomicAccumulatorNotZeroed, false, !a.deterministic)) {
      const std::int64_t words = static_cast<std::int64_t>(a.row_stride) * a.acc_size / 4;
      unsigned* row = static_cast<unsigned*>(a.accumulators) + s * words;
      for (std::int64_t w = lane; w < words; w += 32) row[w] = 0u;
    }
  }
}

// The chunk order in one CTA: the listed chunk slots [0, num_chunks) (the router allocates them
// contiguously) sorted by key, stable (ties keep slot order, as cub::DeviceRadixSort over every
// slot: the same order); blocked arrangement, slots past num_chunks padded with the largest key
// (valid keys are sorted values < 2^31) and never written.
constexpr int kOrderThreads = tuning::Preprocess::kChunkOrderThreads;
constexpr int kOrderItems = tuning::Preprocess::kChunkOrderItems;
using ChunkOrderSort = cub::BlockRadixSort<std::uint32_t, kOrderThreads, kOrderItems, std::uint32_t>;

__global__ void __launch_bounds__(kOrderThreads, 1)
chunk_order_one_cta(const std::uint32_t* keys, const unsigned* num_chunks, int end_bit,
                    std::uint32_t* order) {
  const unsigned m = *num_chunks;
  if (m == 0) return;  // no long run: nothing reads the order
  __shared__ typename ChunkOrderSort::TempStorage temp;
  std::uint32_t k[kOrderItems], v[kOrderItems];
#pragma unroll
  for (int i = 0; i < kOrderItems; ++i) {
    const unsigned slot = threadIdx.x * kOrderItems + i;
    k[i] = slot < m ? keys[slot] : 0xffffffffu;
    v[i] = slot;
  }
  ChunkOrderSort(temp).Sort(k, v, 0, end_bit);
#pragma unroll
  for (int i = 0; i < kOrderItems; ++i) {
    const unsigned idx = threadIdx.x * kOrderItems + i;
    if (idx < m) order[idx] = v[i];
  }
}

}  // namespace

void launch_chunk_order_one_cta(const std::uint32_t* keys, const unsigned* num_chunks, int end_bit,
                                std::uint32_t* order, cudaStream_t stream) {
  chunk_order_one_cta<<<1, kOrderThreads, 0, stream>>>(keys, num_chunks, end_bit, order);
  check_launch("chunk_order_one_cta");
}

std::size_t transpose_temp_bytes(bool key32, std::int64_t n, int digit_bits) {
  return key32 ? temp_bytes_t<std::uint32_t>(n, digit_bits) : temp_bytes_t<std::uint64_t>(n, digit_bits);
}

void launch_linearize(DType index, bool key32, const LinearizeArgs& a, cudaStream_t stream) {
  dispatch::dispatch_index(index, "lookups.index_dtype", [&](auto idx) {
    using Idx = dispatch::storage_t<decltype(idx)::value>;
    if (key32) linearize_t<Idx, std::uint32_t>(a, stream);
    else linearize_t<Idx, std::uint64_t>(a, stream);
  });
}

void launch_runs_to_table_order(const RunOrderArgs& a, cudaStream_t stream) {
  if (a.max_runs == 0) return;
  const unsigned blocks = static_cast<unsigned>(
      std::min<std::int64_t>((a.max_runs + kBlock - 1) / kBlock, std::int64_t{1} << 16));
  runs_pad_keys<<<blocks, kBlock, 0, stream>>>(a);
  check_launch("runs_pad_keys");
  launch_sort_pairs32(a.max_runs, a.end_bit, a.digit_bits, a.sort_keys_in, a.sort_keys_out,
                      a.perm_in, a.perm_out, a.temp, a.temp_bytes, stream);
  runs_table_order<<<blocks, kBlock, 0, stream>>>(a);
  check_launch("runs_table_order");
}

void launch_sort_rle(const SortRleArgs& a, cudaStream_t stream) {
  if (a.n == 0) {
    cuda_check(cudaMemsetAsync(a.num_runs, 0, sizeof(std::int32_t), stream), "zero run count");
    return;
  }
  if (a.key32) sort_rle_t<std::uint32_t>(a, stream);
  else sort_rle_t<std::uint64_t>(a, stream);
}

std::size_t sort_pairs32_temp_bytes(std::int64_t n, int digit_bits) {
  std::size_t bytes = 0;
  sort_pairs<std::uint32_t>(nullptr, bytes, digit_bits, nullptr, nullptr, nullptr, nullptr,
                            static_cast<int>(n), 32, nullptr);
  return bytes;
}

void launch_sort_pairs32(std::int64_t n, int end_bit, int digit_bits, const std::uint32_t* keys_in,
                         std::uint32_t* keys_out, const std::uint32_t* values_in,
                         std::uint32_t* values_out, void* temp, std::size_t temp_bytes,
                         cudaStream_t stream) {
  std::size_t bytes = temp_bytes;
  sort_pairs<std::uint32_t>(temp, bytes, digit_bits, keys_in, keys_out, values_in, values_out,
                            static_cast<int>(n), end_bit, stream);
}

void launch_table_runs(const RunArgs& a, cudaStream_t stream) {
  const std::int64_t threads = (static_cast<std::int64_t>(a.num_tables) + 1) * 32;
  table_runs_search<<<static_cast<unsigned>((threads + kBlock - 1) / kBlock), kBlock, 0, stream>>>(a);
  check_launch("table_runs_search");
}

void launch_route(const RunArgs& a, cudaStream_t stream) {
  route_runs<<<static_cast<unsigned>(a.grid), kBlock, 0, stream>>>(a);
  check_launch("route_runs");
  expand_long_runs<<<static_cast<unsigned>(a.grid), kBlock, 0, stream>>>(a);
  check_launch("expand_long_runs");
}

}  // namespace tbe::cuda::detail
