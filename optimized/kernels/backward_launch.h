// Host-visible interface of the backward kernel families (optimized/kernels/backward_*.cu):
// argument structs and launch functions. Plain C++ (no device code). Kernels trust these
// arguments: the host operator (src/backward_op.cpp) validated the problem first.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "dispatch/tuning.h"
#include "kernels/launch.h"
#include "tbe/types.h"

namespace tbe::cuda::detail {

/// Per-table metadata on device ([num_tables], ascending row_offset).
struct BwdTableMeta {
  std::int64_t row_offset;   ///< first linearized id of the table (exclusive prefix of E_t)
  std::int64_t elem_offset;  ///< element offset of the table in the weights buffer
  std::int32_t dim;          ///< D_t
  std::int32_t small_slot;   ///< small-table feature of the table (-1: none; kernels/small_table*)
};

/// What travels through the sort as the 32-bit value of a lookup.
enum class SortedValue : std::int32_t {
  Bag = 0,             ///< pooled, unweighted SUM: the bag id (scale 1)
  Position = 1,        ///< NONE pooling: the lookup position p (grad row p, scale 1)
  PositionScaled = 2,  ///< pooled, weighted or MEAN: p; bag and scale c_p in per-position arrays
};

/// The one rule for whether the run kernels' staged gather serves a group (kernels/backward_runs.cuh
/// gather_vec; the host's "bwd.gather.staged" report uses it too): warp groups of at least
/// `stage_rows` lanes (RunKernels::kShortStageRows / kLongStageRows; 0: never) with 4-element
/// aligned grad_output rows (RunArgs::grad_vec). Short runs also need SL > kRowsInFlight.
constexpr bool staged_gather_shape(bool block_group, bool grad_vec, int group_size, int stage_rows) {
  return !block_group && grad_vec && stage_rows > 0 && group_size >= stage_rows;
}

/// Counters of the backward at the head of its workspace (zeroed by every run()).
struct BackwardDeviceCounters {
  unsigned long long short_runs, short_lookups;
  /// short runs longer than RunKernels::kRowsInFlight (the staged gather takes those when the
  /// call's shape allows it: kernels/backward_runs.cuh); under ShortGroups::PerDim only those of
  /// tables whose own group size could stage them (G_t >= RunKernels::kShortStageRows)
  unsigned long long short_runs_over_batch;
  unsigned long long long_runs, long_lookups;
  unsigned long long chunks;
  unsigned int num_long;    ///< long runs listed by the router
  unsigned int num_chunks;  ///< chunks listed by the router
  unsigned int chunk_cursor;  ///< next chunk of the order (BackwardTuning::ChunkSchedule::Dynamic)
  unsigned int run_cursor;    ///< next batch of runs (BackwardTuning::RunLaunch::Interleaved)
  unsigned long long small_table_rows;     ///< rows updated by the small-table histogram path
  unsigned long long small_table_lookups;  ///< their lookups (Σ SL)
  /// rows the small-table path summed exactly instead (no sort ran: SL below its minimum run, or
  /// a table whose histogram is not representable; kernels/backward_small_table.cu exact_row_sum)
  unsigned long long small_table_exact_rows;
  unsigned long long small_table_exact_lookups;  ///< their lookups
};

/// One long run as listed by the router.
struct LongRun {
  std::uint32_t run;         ///< index into the RLE arrays
  std::uint32_t chunk_base;  ///< first chunk slot
  std::uint32_t num_chunks;
  std::uint32_t pad;
};

/// Preprocessing (kernels/backward_preprocess.cu).
struct LinearizeArgs {
  const void* indices = nullptr;        ///< [N] Idx (raw)
  const void* offsets = nullptr;        ///< [num_bags + 1] Idx (repaired, or raw under NONE/FATAL)
  const float* per_sample_weights = nullptr;
  const FeatureMeta* features = nullptr;          ///< [T] (table_offset unused here)
  /// [T] key of row 0 of f's table: row_offset[t] (linearized ids) or t · 2^rb (RowBits keys,
  /// TransposeTuning::Keys); key = feature_key_base[f] + index
  const std::int64_t* feature_key_base = nullptr;
  const std::int64_t* feature_first_bag = nullptr;   ///< [T + 1]
  std::int32_t num_features = 0;
  std::int64_t num_bags = 0;
  std::int64_t N = 0;
  /// key of positions outside every bag: K = Σ E_t (linearized ids) or T_tables · 2^rb + 2^rb − 1
  /// (RowBits keys: its row bits sort after every row)
  std::int64_t sentinel = 0;
  SortedValue value_kind = SortedValue::Bag;
  bool mean = false;
  bool check_indices = false;           ///< WARNING/IGNORE: bad index -> row 0, counted
  void* keys = nullptr;                 ///< [N] uint32 or uint64
  std::uint32_t* values = nullptr;      ///< [N]
  std::int32_t* pos_bag = nullptr;      ///< [N] (PositionScaled) bag of p, -1 outside
  double* pos_scale = nullptr;          ///< [N] (PositionScaled) c_p = w_p / L (MEAN) or w_p
  DeviceCounters* counters = nullptr;
  const unsigned long long* abort_key = nullptr;
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};

/// Everything the run kernels (short runs, long-run chunks, long-run apply) read.
struct RunArgs {
  // --- transpose ---
  const void* run_keys = nullptr;       ///< [R] uint32 or uint64 (key32)
  const std::int32_t* run_lengths = nullptr;  ///< [R]
  const std::uint32_t* run_offsets = nullptr; ///< [R + 1]
  const std::int32_t* num_runs = nullptr;     ///< device scalar R (incl. a sentinel run)
  const std::uint32_t* sorted_values = nullptr;  ///< [N]
  const std::int32_t* pos_bag = nullptr;
  const double* pos_scale = nullptr;
  bool key32 = true;
  std::int64_t sentinel = 0;            ///< K = Σ E_t: the linearized id of the sentinel run
  SortedValue value_kind = SortedValue::Bag;
  // --- grad_output addressing (bag -> output row, as the forward's segments) ---
  const void* grad_output = nullptr;    ///< Out
  const std::int64_t* seg_first_bag = nullptr;
  const SegmentMeta* segs = nullptr;
  std::int32_t num_segs = 0;
  std::int64_t num_bags = 0;
  std::int64_t bags_per_segment = 0;
  std::int32_t none_dim = 0;            ///< NONE pooling: D (grad row p at p·D)
  bool grad_vec = false;                ///< 4-element vector loads of grad_output rows
  // --- tables ---
  const BwdTableMeta* tables = nullptr;
  std::int32_t num_tables = 0;
  const void* weights_in = nullptr;     ///< W
  void* weights_out = nullptr;          ///< W
  bool weights_vec = false;             ///< 4-element vector access of weight rows
  const float* momentum_in = nullptr;   ///< [K] (Adagrad)
  float* momentum_out = nullptr;
  // --- optimizer (FP32 values, effective_hyper_parameter) ---
  bool adagrad = false;
  std::int32_t wd_mode = 0;             ///< 0 none, 1 L2, 2 decoupled
  float lr = 0, eps = 0, weight_decay = 0, max_norm = 0, max_gradient = 0;
  bool stochastic = false;              ///< SR write-back (16-bit weights)
  unsigned long long sr_seed = 0, sr_offset = 0;
  // --- routing ---
  std::int32_t long_threshold = tuning::RunKernels::kDefaultLongRunThreshold;
  std::int32_t chunk_size = tuning::RunKernels::kDefaultChunkSize;
  bool fused = true;
  bool deterministic = true;
  LongRun* long_runs = nullptr;         ///< [max_long]
  std::uint32_t* chunk_run = nullptr;   ///< [max_chunks] slot of the chunk's long run
  std::uint32_t* chunk_keys = nullptr;  ///< [max_chunks] sorted value of the chunk's first lookup
  std::uint32_t* chunk_ids = nullptr;   ///< [max_chunks] chunk slot (sort payload)
  const std::uint32_t* chunk_order = nullptr;  ///< [max_chunks] chunk slots by first position
  unsigned int* run_counters = nullptr; ///< [max_long] fused arrival counters
  void* partials = nullptr;             ///< [max_chunks][row_stride] Acc (deterministic)
  void* accumulators = nullptr;         ///< [max_long][row_stride] Acc (non-deterministic)
  std::int32_t row_stride = 0;          ///< max D over tables, rounded up to 4
  std::int32_t acc_size = 8;            ///< sizeof(Acc)
  std::uint32_t max_long = 0, max_chunks = 0;
  BackwardDeviceCounters* counters = nullptr;
  const unsigned long long* abort_key = nullptr;
  // --- small-table histogram path: its rows are skipped here (histogram_owns) ---
  const std::uint32_t* small_invalid = nullptr;  ///< [num_small] histogram not representable
  std::int64_t small_min_run = 0;                ///< SL at which the histogram path owns a row
  // --- launch geometry ---
  std::int32_t group_size = tuning::kWarpThreads;  ///< threads per run: 1..32 (warp groups) or 64..512 (block)
  std::int32_t grid = 0;                ///< persistent grid (blocks)
  /// The short-run kernel's staged instance (RunKernels::kShortStageRows rows per lane ring, warp
  /// groups only) instead of the register one (BackwardTuning::ShortRuns, resolved by the host).
  bool short_staged = false;
  /// The long-run chunk kernel takes its chunks from counters->chunk_cursor
  /// (BackwardTuning::ChunkSchedule::Dynamic) instead of a fixed stride over the order.
  bool dynamic_chunks = true;
  /// BackwardTuning::RunLaunch::Interleaved: every interleave_chunk_every-th warp of the one
  /// launch starts on the chunks, the others on the short runs (kernels/backward_interleaved.cu).
  std::int32_t interleave_chunk_every = 1;
  /// BackwardTuning::ShortGroups::PerDim: this launch's tables ([num_class_tables] indices into
  /// `tables`, those of one group size: group_size), whose runs are [table_runs[t],
  /// table_runs[t + 1]) (launch_table_runs); nullptr: every run (one launch at the widest G).
  const std::int32_t* class_tables = nullptr;
  std::int32_t num_class_tables = 0;
  /// [num_tables + 1]: the first run of each table (the first run whose key is >= its
  /// row_offset), then R (launch_table_runs writes it; PerDim only)
  std::uint32_t* table_runs = nullptr;
  /// ShortGroups::PerDim resolved for the call (the router counts short_runs_over_batch per table)
  bool per_dim = false;
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};

/// Per-sample-weight gradient (kernels/backward_psw_grad.cu): one group per lookup position.
struct PswGradArgs {
  const void* weights = nullptr;        ///< W, before the update
  const void* indices = nullptr;        ///< [N] Idx (raw; bad ones -> row 0 when check_indices)
  const void* offsets = nullptr;        ///< repaired offsets (Idx)
  const std::int32_t* pos_bag = nullptr;  ///< [N]
  const void* grad_output = nullptr;    ///< Out
  const FeatureMeta* features = nullptr;
  const std::int64_t* seg_first_bag = nullptr;
  const SegmentMeta* segs = nullptr;
  std::int32_t num_segs = 0;
  std::int64_t num_bags = 0;
  std::int64_t bags_per_segment = 0;
  std::int64_t N = 0;
  bool mean = false;
  bool check_indices = false;
  float max_gradient = 0;
  float* out = nullptr;                 ///< [N]
  std::int32_t group_size = tuning::kWarpThreads;
  const unsigned long long* abort_key = nullptr;
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};

struct RunTypes {
  DType weights, accumulation, grad;
  bool block_group;  ///< group_size > 32
};

// --- preprocessing (kernels/backward_preprocess.cu) ---
/// Radix-sort passes over `bits` key bits with digits of `digit_bits` (CUB's onesweep: one pass
/// per digit, each reading and writing every key and value).
constexpr int radix_sort_passes(int bits, int digit_bits) {
  return (bits + digit_bits - 1) / digit_bits;
}
/// The digit width of the transpose's sort over `bits` key bits (32-bit keys): the wide digit
/// (tuning::Preprocess::kWideDigitBits) where it saves a pass, else CUB's own 8-bit tuning.
constexpr int transpose_digit_bits(int bits) {
  return radix_sort_passes(bits, tuning::Preprocess::kWideDigitBits) < radix_sort_passes(bits, 8)
             ? tuning::Preprocess::kWideDigitBits
             : 8;
}
/// The transpose's sort + run-length encoding + scan: (keys_in, values_in) -> (keys_out,
/// values_out) sorted on bits [0, end_bit) (stable), RLE of keys_out into run_keys / run_lengths /
/// num_runs ([max_runs] arrays, max_runs = min(n, K + 1) >= R), exclusive prefix of run_lengths
/// into run_offsets [max_runs + 1].
struct SortRleArgs {
  bool key32 = true;              ///< uint32 keys, else uint64
  int end_bit = 32;
  int digit_bits = 8;             ///< 8, or tuning::Preprocess::kWideDigitBits (32-bit keys only)
  std::int64_t n = 0, max_runs = 0;
  void* keys_in = nullptr;
  void* keys_out = nullptr;
  std::uint32_t* values_in = nullptr;
  std::uint32_t* values_out = nullptr;
  void* run_keys = nullptr;
  std::int32_t* run_lengths = nullptr;
  std::uint32_t* run_offsets = nullptr;
  std::int32_t* num_runs = nullptr;
  void* temp = nullptr;           ///< transpose_temp_bytes(key32, n, digit_bits) bytes
  std::size_t temp_bytes = 0;
};
/// CUB temp bytes for the sort (key32 or 64 bits, digit_bits), RLE and scan over n items.
std::size_t transpose_temp_bytes(bool key32, std::int64_t n, int digit_bits);
void launch_linearize(DType index, bool key32, const LinearizeArgs& a, cudaStream_t stream);
void launch_sort_rle(const SortRleArgs& a, cudaStream_t stream);

/// RowBits keys (TransposeTuning::Keys, docs/backward.md "The transpose's keys"): the row-bit
/// sort leaves the runs ordered by (row, table); this puts them back in (table, row) order, the
/// order of linearized ids, whose consecutive runs share a feature's grad_output rows in L2, and
/// rewrites their keys as linearized ids, so the run kernels see the runs LinearIds gives (their
/// lookups stay where the row-bit sort put them: only run_offsets differs). The R runs are sorted
/// by key (cub::DeviceRadixSort over max_runs slots, the slots past R padded with the largest
/// key), then gathered.
struct RunOrderArgs {
  std::int32_t row_bits = 0;                       ///< rb
  std::int32_t num_tables = 0;
  const std::int64_t* table_row_offset = nullptr;  ///< [num_tables] linearized id of row 0
  std::int64_t sentinel = 0;                       ///< K: the sentinel run's linearized id
  std::int64_t max_runs = 0;
  const std::int32_t* num_runs = nullptr;          ///< device scalar R
  std::uint32_t* run_keys = nullptr;     ///< [max_runs] in: RowBits keys (RLE); out: ids, table order
  const std::int32_t* run_lengths = nullptr;   ///< [max_runs] row order (RLE)
  const std::uint32_t* run_offsets = nullptr;  ///< [max_runs] row order (scan)
  std::int32_t* lengths_out = nullptr;         ///< [max_runs] table order
  std::uint32_t* offsets_out = nullptr;        ///< [max_runs] table order
  std::uint32_t* sort_keys_in = nullptr;       ///< [max_runs] scratch
  std::uint32_t* sort_keys_out = nullptr;      ///< [max_runs] scratch
  std::uint32_t* perm_in = nullptr;            ///< [max_runs] scratch
  std::uint32_t* perm_out = nullptr;           ///< [max_runs] scratch
  int end_bit = 32;                            ///< bits of the largest RowBits key
  int digit_bits = 8;
  void* temp = nullptr;                        ///< sort_pairs32_temp_bytes(max_runs, digit_bits)
  std::size_t temp_bytes = 0;
};
void launch_runs_to_table_order(const RunOrderArgs& a, cudaStream_t stream);
/// BackwardTuning::ShortGroups::PerDim: a.table_runs[t] = the first run whose key is >= the
/// row_offset of table t (t < a.num_tables; runs are in ascending key order), a.table_runs[T] = R.
/// One warp per entry (a 32-way search over the R run keys).
void launch_table_runs(const RunArgs& a, cudaStream_t stream);
/// Router: splits runs into short (counted) and long (listed with their chunks, each with the
/// sorted value of its first lookup as a locality key; unused key slots must hold 0xffffffff).
void launch_route(const RunArgs& a, cudaStream_t stream);
/// The chunk order in one CTA (tuning::Preprocess::kChunkOrderOneCtaSlots slots at most): the
/// listed slots [0, *num_chunks) sorted by keys[slot] on bits [0, end_bit), stable, into
/// order[0, *num_chunks) (the same order as launch_sort_pairs32's first *num_chunks ids over every
/// slot); returns at once when no chunk is listed.
void launch_chunk_order_one_cta(const std::uint32_t* keys, const unsigned* num_chunks, int end_bit,
                                std::uint32_t* order, cudaStream_t stream);
/// A stable sort of n 32-bit (key, value) pairs on bits [0, end_bit), digit_bits 8
/// (cub::DeviceRadixSort) or tuning::Preprocess::kWideDigitBits (CUB's onesweep with 9-bit
/// digits). It serves two orders:
///   - the chunk order over every chunk slot (n = max_chunks, unused slots sort last), so that
///     chunks processed at the same time read nearby grad_output rows (L2 reuse across the hot
///     runs of a feature);
///   - the RowBits run order (launch_runs_to_table_order).
/// sort_pairs32_temp_bytes: CUB's temp bytes for n pairs.
std::size_t sort_pairs32_temp_bytes(std::int64_t n, int digit_bits);
void launch_sort_pairs32(std::int64_t n, int end_bit, int digit_bits, const std::uint32_t* keys_in,
                         std::uint32_t* keys_out, const std::uint32_t* values_in,
                         std::uint32_t* values_out, void* temp, std::size_t temp_bytes,
                         cudaStream_t stream);

// --- run kernels (kernels/backward_short.cu, backward_long.cu, backward_interleaved.cu; dispatch:
// src/backward_dispatch.cpp over dispatch/dispatch.h kCompiledBackward) ---
/// Short runs: every run (a.class_tables == nullptr), or the runs of a.class_tables (warp groups
/// of a.group_size lanes; BackwardTuning::ShortGroups::PerDim, one call per group size).
void launch_short_runs(const RunTypes& t, const RunArgs& a, cudaStream_t stream);
void launch_long_chunks(const RunTypes& t, const RunArgs& a, cudaStream_t stream);
void launch_long_apply(const RunTypes& t, const RunArgs& a, cudaStream_t stream);
/// Short runs and long-run chunks in one launch (kernels/backward_interleaved.cu): warp groups
/// with the staged gather only (t.block_group must be false).
void launch_runs_interleaved(const RunTypes& t, const RunArgs& a, cudaStream_t stream);
template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_short_runs_t(const RunArgs& a, cudaStream_t stream);
template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_long_chunks_t(const RunArgs& a, cudaStream_t stream);
template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_long_apply_t(const RunArgs& a, cudaStream_t stream);
template <DType kW, DType kAcc, DType kOut, bool kBlock>  // kBlock = false only
void launch_runs_interleaved_t(const RunArgs& a, cudaStream_t stream);

// --- per-sample-weight gradient (kernels/backward_psw_grad.cu; kCompiledBackward as well) ---
void launch_psw_grad(DType weights, DType accumulation, DType grad, DType index,
                     const PswGradArgs& a, cudaStream_t stream);

}  // namespace tbe::cuda::detail
