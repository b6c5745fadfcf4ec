// Seeded faults of the mutation build (docs/mutation.md): the catalogue of realistic bugs that can
// be switched on, one at a time, in the CUDA backend, so that `tbe-mutate` can show which check of
// the main job (tbe-verify) or the GPU tests kills each of them.
//
// Plain C++ (no CUDA), header-only: the catalogue and its name parser are also used by tbe-mutate
// and the CPU tests, in builds without CUDA. Only a build configured with -DTBE_MUTATION=ON (CMake
// preset `mutation`) compiles the faults in:
//   - the host side reads the fault ONCE from the environment variable TBE_MUTANT (a name of the
//     catalogue; unset or empty: none) in tbe::cuda::active_fault() (optimized/src/mutation.cpp);
//   - every kernel argument struct that a fault touches carries it in a field `mutant`
//     (TBE_MUTANT_FIELD, default-initialised from active_fault(), so a host operator cannot forget
//     it), kernels with positional arguments take a trailing MutantTag (TBE_MUTANT_PARAM /
//     TBE_MUTANT_ARG);
//   - kernels write a fault as TBE_MUTANT_SWAP(holder, kName, wrong, right) in place of the right
//     expression `right` (on its original source line), host operators test TBE_MUTANT_HOST(kName).
// In every other build TBE_MUTANT_SWAP(holder, kName, wrong, right) is exactly the tokens of
// `right`, the other macros `false` / empty: the fields, parameters and the environment read do
// not exist, and the kernels compile to the same machine code as without them (docs/mutation.md
// says how that was checked).
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tbe::cuda {

// The catalogue: X(enumerator, name, where (file: function), what the bug does). One line each.
// clang-format off
#define TBE_FAULT_LIST(X)                                                                          \
  X(kFwdMeanMissing, "fwd_mean_missing", "kernels/pooled_gather.cuh: PooledGather::bag",             \
    "MEAN pooling stores the bag sum (the division by L is missing)")                               \
  X(kFwdMeanDoubled, "fwd_mean_doubled", "kernels/pooled_gather.cuh: PooledGather::bag",             \
    "MEAN pooling divides by L twice")                                                              \
  X(kFwdPswIgnoredScalar, "fwd_psw_ignored_scalar", "kernels/pooled_gather.cuh: PooledGather::bag",  \
    "per-sample weights ignored on the scalar (VEC = 1, odd D) path only")                          \
  X(kFwdFp32AccUnderFp64, "fwd_fp32_acc_under_fp64", "kernels/pooled_gather.cuh: PooledGather::bag", \
    "unweighted bags accumulate in FP32 although the policy asks for FP64")                        \
  X(kFwdTailOfDUnwritten, "fwd_tail_of_d_unwritten", "kernels/pooled_gather.cuh: PooledGather::bag", \
    "the lane owning the last vector of a column chunk does not store it (c + VEC < D)")           \
  X(kFwdColumnChunkTailDropped, "fwd_column_chunk_tail_dropped",                                   \
    "kernels/pooled_gather.cuh: PooledGather::bag",                                                \
    "D > 32·VEC: the number of column chunks is floor(D / (G·VEC)), a partial last chunk is lost")  \
  X(kFwdLastColumnChunkDropped, "fwd_last_column_chunk_dropped",                                   \
    "kernels/pooled_gather.cuh: PooledGather::bag",                                                \
    "D > 32·VEC: the column-chunk loop stops one chunk early (c0 + G·VEC < D)")                    \
  X(kFwdLastBagSkipped, "fwd_last_bag_skipped",                                                    \
    "kernels/pooled_gather.cuh: pooled_gather_group_per_bag",                                      \
    "the last bag of each launch is not gathered (k >= bag_end - 1)")                              \
  X(kFwdSpanStartsLate, "fwd_span_starts_late", "kernels/pooled_gather.cuh: span_of_block",       \
    "merged launch: a span's first block is given the span before it (first_block < b, not <=)")   \
  X(kFwdRowOffset32, "fwd_row_offset_32bit", "kernels/pooled_gather.cuh: PooledGather::row_address", \
    "the row's element offset r·D is computed in 32 bits (wrong for E·D >= 2^31)")                 \
  X(kFwdVbeRankFeatureSwapped, "fwd_vbe_rank_feature_swapped", "src/forward_op.cpp: ForwardOp",    \
    "VBE segments read the (feature, rank) tables in rank-major order (r·T + f, not f·R + r)")      \
  X(kSeqWrongRow, "seq_wrong_row", "kernels/sequence.cu: sequence_group_per_row",                  \
    "NONE pooling writes output row k (the bag) instead of row p (the lookup)")                    \
  X(kBoundsRepairToLastRow, "bounds_repair_to_last_row", "kernels/pooled_gather.cuh: PooledGather::bag", \
    "fused bounds check: a bad index is repaired to row E - 1 instead of row 0")                   \
  X(kBoundsSeparateRepairToLastRow, "bounds_separate_repair_to_last_row",                          \
    "kernels/bounds_check.cu: repair_indices_warp_per_bag",                                        \
    "separate repair pass: a bad index is repaired to row E - 1 instead of row 0")                 \
  X(kBoundsFatalIndexOffByOne, "bounds_fatal_index_off_by_one",                                    \
    "kernels/bounds_check.cu: fatal_check_warp_per_bag",                                           \
    "FATAL check accepts index E (i > E instead of i >= E)")                                       \
  X(kBoundsFirstBagUncounted, "bounds_first_bag_uncounted", "kernels/bounds_check.cu: count_bad_bags", \
    "the bad-bag count misses bag 0 when only its start was repaired (offsets[0] outside [0, N])") \
  X(kBwdSortEndBitMaxTable, "bwd_sort_end_bit_max_table", "src/backward_op.cpp: TransposePlan",    \
    "the radix sort's end bit comes from max E_t instead of K = Σ E_t")                            \
  X(kBwdRowBitsTablesInterleaved, "bwd_row_bits_tables_interleaved", "src/backward_op.cpp: row_bits_of", \
    "RowBits keys although a table's features are not consecutive: a shared row splits into two "  \
    "runs, each updating it from the same old value")                                              \
  X(kBwdRleLastRunDropped, "bwd_rle_last_run_dropped",                                             \
    "kernels/backward_preprocess.cu: route_runs, table_runs_search; kernels/backward_short.cu: "     \
    "short_runs_group_per_run; kernels/backward_interleaved.cu: runs_interleaved",                 \
    "the last run of the RLE is never routed or applied (i < R - 1)")                              \
  X(kBwdTableRunsInclusive, "bwd_table_runs_inclusive",                                            \
    "kernels/backward_preprocess.cu: table_runs_search",                                           \
    "per-D short-run launches: a table's runs start after its row 0 (first key > row_offset, not "  \
    ">=), so a run of row 0 is updated by the previous table's launch at that table's group size")  \
  X(kBwdSlThresholdOffByOne, "bwd_sl_threshold_off_by_one",                                        \
    "kernels/backward_preprocess.cu: route_runs",                                                  \
    "the router counts SL == long_run_threshold as short, the short kernel skips it: lost run")    \
  X(kBwdChunkCountFloor, "bwd_chunk_count_floor", "kernels/backward_preprocess.cu: route_runs",    \
    "chunks per long run = SL / chunk_size (floor): a partial last chunk is lost")                 \
  X(kBwdChunkEndOffByOne, "bwd_chunk_end_off_by_one",                                              \
    "kernels/backward_run_work.cuh: long_chunk",                                       \
    "a chunk ends at begin + chunk_size - 1: the last lookup of every full chunk is lost")          \
  X(kBwdChunkPartialLost, "bwd_chunk_partial_lost", "kernels/backward_run_work.cuh: reduce_partials",   \
    "the reduction of a long run's partials skips the last chunk (j + 1 < num_chunks)")            \
  X(kBwdChunkPartialDoubled, "bwd_chunk_partial_doubled", "kernels/backward_run_work.cuh: reduce_partials", \
    "the first chunk's partial is added twice")                                                    \
  X(kBwdFp16Partials, "bwd_fp16_partials", "kernels/backward_run_work.cuh: long_chunk", \
    "chunk partials are stored through FP16 although the policy accumulates in FP32/FP64")          \
  X(kBwdFusedFenceMissing, "bwd_fused_fence_missing",                                              \
    "kernels/backward_run_work.cuh: long_chunk",                                       \
    "fused long runs: no device-scope fence between a chunk's partial and its arrival count")      \
  X(kBwdFusedArrivalCount, "bwd_fused_arrival_count", "kernels/backward_run_work.cuh: long_chunk", \
    "fused long runs: the last arrival is tested with the pre-increment count (prev != num_chunks)") \
  X(kBwdAtomicAccumulatorNotZeroed, "bwd_atomic_accumulator_not_zeroed",                           \
    "kernels/backward_preprocess.cu: expand_long_runs",                                            \
    "non-deterministic long runs: the float-atomic accumulator rows are not zeroed")               \
  X(kBwdEpsInsideSqrt, "bwd_eps_inside_sqrt", "kernels/backward_optimizer.cuh: apply_row",         \
    "rowwise Adagrad: lr / sqrt(m + eps) instead of lr / (sqrt(m) + eps)")                         \
  X(kBwdMomentumFromSum, "bwd_momentum_from_sum", "kernels/backward_optimizer.cuh: apply_row",     \
    "rowwise Adagrad: the momentum adds Σ_d g'^2 instead of its mean over D")                      \
  X(kBwdDecoupledWdIgnored, "bwd_decoupled_wd_ignored", "kernels/backward_optimizer.cuh: apply_row", \
    "rowwise Adagrad: decoupled weight decay is not applied (corr = 1)")                           \
  X(kBwdSrRoundNearest, "bwd_sr_round_nearest", "kernels/backward_optimizer.cuh: apply_row",       \
    "stochastic rounding replaced by round-to-nearest")                                            \
  X(kBwdSrOffsetIgnored, "bwd_sr_offset_ignored", "kernels/backward_optimizer.cuh: apply_row",     \
    "SR draws ignore sr_offset (as if the RNG offset were not advanced between calls)")            \
  X(kBwdTailOfDUnwritten, "bwd_tail_of_d_unwritten", "kernels/backward_optimizer.cuh: apply_row",  \
    "D % 4 != 0: the last column of each updated row is not written back")                         \
  X(kBwdElemOffset32, "bwd_elem_offset_32bit", "kernels/backward_optimizer.cuh: apply_row",        \
    "the updated row's element offset (row·D) is computed in 32 bits (wrong for E·D >= 2^31)")     \
  X(kBwdMeanScaleMissing, "bwd_mean_scale_missing", "kernels/backward_preprocess.cu: linearize_block_per_bags", \
    "MEAN pooling: the per-lookup scale c_p lacks the 1/L")                                        \
  X(kBwdMeanScaleDoubled, "bwd_mean_scale_doubled", "kernels/backward_preprocess.cu: linearize_block_per_bags", \
    "MEAN pooling: the per-lookup scale c_p is w_p / L^2")                                         \
  X(kBwdPswScaleIgnored, "bwd_psw_scale_ignored", "kernels/backward_preprocess.cu: linearize_block_per_bags", \
    "weighted SUM: the row gradient ignores the per-sample weight (c_p = 1)")                      \
  X(kBwdSharedRowsTwice, "bwd_shared_rows_twice",                                                 \
    "kernels/backward_preprocess.cu: linearize_block_per_bags; src/backward_op.cpp: TransposePlan",  \
    "the transpose groups lookups by (feature, row), not (table, row): a row of a shared table "    \
    "gets one run per feature, each updating it from the same old value (updated twice)")          \
  X(kBwdVbeRankFeatureSwapped, "bwd_vbe_rank_feature_swapped", "src/backward_op.cpp: BackwardPlan", \
    "VBE: grad_output segments in rank-major order (r·T + f, not f·R + r)")                        \
  X(kBwdPswGradMeanMissing, "bwd_psw_grad_mean_missing",                                           \
    "kernels/backward_psw_grad.cu: psw_grad_group_per_position",                                   \
    "per-sample-weight gradient under MEAN pooling lacks the 1/L")                                 \
  X(kLceMapContiguous, "lce_map_contiguous", "kernels/ikbo_lce_elementwise.cu: lce_gather_add_kernel", \
    "the gather-add reads cand_to_user as contiguous: u(b) = u(0) + b")                            \
  X(kLceChunkMapNotAdvanced, "lce_chunk_map_not_advanced", "src/ikbo_lce_op.cpp: Plan::gather_add", \
    "L2Chunked / decomposed gather-add: the map is not offset by the chunk's first candidate")     \
  X(kLceMapCheckAcceptsU, "lce_map_check_accepts_u", "kernels/ikbo_map_check.cuh: map_value_bad (lce_map_check_kernel, attention grouping_one_cta_kernel)", \
    "the map check accepts cand_to_user[b] == U (u > U instead of u >= U)")                        \
  X(kLcePadStrideConfused, "lce_pad_stride_confused", "kernels/ikbo_lce_elementwise.cu: lce_pad_rows_kernel", \
    "padding copies read source row r at r·ld_dst (the destination's stride) instead of r·ld_src") \
  X(kLceFusedKTailDropped, "lce_fused_k_tail_dropped", "kernels/ikbo_lce_fused.cu: lce_fused_kernel", \
    "fused candidate GEMM: K tiles = floor(K / 32), a partial last K tile is lost")                \
  X(kLceFusedLastMTileDropped, "lce_fused_last_m_tile_dropped", "kernels/ikbo_lce_fused.cu: launch_fused_t", \
    "fused candidate GEMM: M tiles = floor(M / 64), the rows of a partial last tile are not written") \
  X(kAttnLastKeyTileDropped, "attn_last_key_tile_dropped", "kernels/ikbo_attention_fwd.cuh: attention_fwd_kernel; kernels/ikbo_attention_fwd_wgmma.cuh: attention_fwd_wgmma_kernel", \
    "key tiles per user = floor(keys / key_block): the keys of a partial last tile are ignored")  \
  X(kAttnNoRescale, "attn_no_rescale", "kernels/ikbo_attention_fwd.cuh: attention_fwd_kernel; kernels/ikbo_attention_fwd_wgmma.cuh: attention_fwd_wgmma_kernel",     \
    "online softmax: the running sum and output are not rescaled when a later key tile raises the row maximum") \
  X(kAttnWgmmaEmptyParity, "attn_wgmma_empty_parity", "kernels/ikbo_attention_fwd_wgmma.cuh: attention_fwd_wgmma_kernel", \
    "wgmma producer waits on the wrong phase of a stage's empty barriers: a K/V stage is refilled before the consumers are done with it") \
  X(kAttnWorkItemLastDropped, "attn_work_item_last_dropped", "kernels/ikbo_attention_grouping.cu: work_list_end (work_items_kernel, grouping_one_cta_kernel)", \
    "work list: the last work item gets rows 0 (w < work_end - 1), so the last user's last row block is never computed") \
  X(kAttnScaleLog2eMissing, "attn_scale_log2e_missing", "src/ikbo_attention_op.cpp: AttentionOp::AttentionOp", \
    "exp2 softmax without log2 e folded into the scale: the logits' temperature is off by ln 2") \
  X(kAttnTmaStoreRowShift, "attn_tma_store_row_shift", "kernels/ikbo_attention_fwd_wgmma.cuh: attention_fwd_wgmma_kernel", \
    "TMA-store epilogue: a warpgroup's 64 output rows are stored one row too far (its first row is never written, the next block's first row is overwritten)") \
  X(kSmallTableMeanMissing, "small_table_mean_missing",                                          \
    "kernels/forward_small_table.cu: small_table_forward_histogram",                              \
    "small-table forward, tensor-core bags: MEAN stores the bag sum (the division by L is missing)") \
  X(kSmallTableLoDropped, "small_table_lo_dropped", "kernels/backward_small_table.cu: small_table_grad_split_k", \
    "small-table backward: only the hi part of grad_output is multiplied (lo = 0): the gradient loses its low bits")
// clang-format on

/// The seeded faults (kNone: the unmodified backend).
enum class Fault : int {
  kNone = 0,
#define TBE_FAULT_ENUM(id, name, where, what) id,
  TBE_FAULT_LIST(TBE_FAULT_ENUM)
#undef TBE_FAULT_ENUM
};

/// One catalogue entry: the name TBE_MUTANT takes, where the bug sits (file: function, paths
/// relative to optimized/; several separated by "; "), what it does, and the enumerator's name
/// (the token the faulty code tests).
struct FaultInfo {
  Fault fault;
  std::string_view name, where, what, enumerator;
};

/// Every fault of the catalogue (kNone excluded), in enum order.
inline constexpr auto kFaults = std::to_array<FaultInfo>({
#define TBE_FAULT_INFO(id, name, where, what) FaultInfo{Fault::id, name, where, what, #id},
    TBE_FAULT_LIST(TBE_FAULT_INFO)
#undef TBE_FAULT_INFO
});

/// The environment variable the mutation build reads (once) to select the fault.
inline constexpr const char* kMutantEnvVar = "TBE_MUTANT";

/// The names of the catalogue, comma-separated (for error messages).
inline std::string fault_names() {
  std::string s;
  for (const FaultInfo& f : kFaults) {
    if (!s.empty()) s += ", ";
    s += f.name;
  }
  return s;
}

/// The catalogue entry of `name`. Throws std::invalid_argument naming the value and listing every
/// known name when it is not one.
inline const FaultInfo& parse_fault(std::string_view name) {
  for (const FaultInfo& f : kFaults)
    if (f.name == name) return f;
  throw std::invalid_argument(std::string(kMutantEnvVar) + ": unknown fault '" + std::string(name) +
                              "' (known: " + fault_names() + ")");
}

/// The line a mutation-build program prints on stderr at start-up when a fault is active
/// ("tbe mutation build: fault NAME active"): tbe-mutate checks that its children applied it.
inline std::string fault_announcement(std::string_view name) {
  return "tbe mutation build: fault " + std::string(name) + " active";
}

// The hooks (mutation build / every other build):
//   TBE_MUTANT_FIELD                  a struct member `Fault mutant = active_fault();` / nothing
//   TBE_MUTANT_SWAP(h, kName, w, r)   (h.mutant == Fault::kName ? (w) : (r)) / exactly r
//   TBE_MUTANT_HOST(kName)            (active_fault() == Fault::kName) / false
//   TBE_MUTANT_PARAM(h), TBE_MUTANT_ARG   a trailing `, MutantTag h` parameter and its argument
//                                     `, MutantTag{}` / nothing
//   TBE_MUTANT_FORWARD(h)             `, h`: passes a MutantTag parameter on / nothing
#if defined(TBE_MUTATION) && TBE_MUTATION
/// The fault selected for this process: TBE_MUTANT read and parsed on the first call (unset or
/// empty: Fault::kNone). An unknown name prints the error of parse_fault to stderr and exits with
/// status 3 (a fault must never be silently replaced by another or by none).
Fault active_fault();

/// A trailing kernel parameter carrying the fault (kernels with positional arguments).
struct MutantTag {
  Fault mutant = active_fault();
};
#define TBE_MUTANT_FIELD ::tbe::cuda::Fault mutant = ::tbe::cuda::active_fault();
#define TBE_MUTANT_SWAP(holder, id, wrong, right) \
  ((holder).mutant == ::tbe::cuda::Fault::id ? (wrong) : (right))
#define TBE_MUTANT_HOST(id) (::tbe::cuda::active_fault() == ::tbe::cuda::Fault::id)
#define TBE_MUTANT_PARAM(holder) , ::tbe::cuda::MutantTag holder
#define TBE_MUTANT_ARG , ::tbe::cuda::MutantTag{}
#define TBE_MUTANT_FORWARD(holder) , holder
#else
#define TBE_MUTANT_FIELD
#define TBE_MUTANT_SWAP(holder, id, wrong, right) right
#define TBE_MUTANT_HOST(id) false
#define TBE_MUTANT_PARAM(holder)
#define TBE_MUTANT_ARG
#define TBE_MUTANT_FORWARD(holder)
#endif

}  // namespace tbe::cuda
