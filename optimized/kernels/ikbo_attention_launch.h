// Host-visible interface of the IKBO cross-attention kernel family
// (optimized/kernels/ikbo_attention_*.cu): argument structs and launch functions. Plain C++ (no
// device code). Kernels trust these arguments: the host operator (src/ikbo_attention_op.cpp)
// validated the problem first. The attention kernel reads `map_error` first and exits without
// writing if it is set (map check failed: launch_lce_map_check, shared with LCE).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "tbe/cuda/mutation.h"
#include "tbe/types.h"

namespace tbe::cuda::detail {

/// What one attention CTA computes (16 bytes, read with one load): query rows [row0, row0 + rows)
/// of user `user`'s candidates in the grouping's order, i.e. row `pos` is query row pos % n_seed of
/// candidate cand_sorted[cand0 + pos / n_seed]. rows = 0: a slot past the work list (the grid is
/// an upper bound), the CTA exits.
struct alignas(16) AttentionWorkItem {
  std::int32_t user = 0;
  std::int32_t cand0 = 0;  ///< run_start of the user's run
  std::int32_t row0 = 0;   ///< first row of the block within the run (a multiple of 128)
  std::int32_t rows = 0;   ///< 1 .. 128, or 0
};
static_assert(sizeof(AttentionWorkItem) == 16);

/// The grouping of candidates by user, built on the device from cand_to_user (any map) by
/// launch_attention_grouping. Runs are the users that have candidates, in ascending user order;
/// R = B slots (at most B distinct values even for a bad map), of which the first `num_runs` are
/// runs and the rest hold count 0, blocks 0. `items` is the work list the kernels read: item w is
/// block w − work_end[r − 1] of the run r with work_end[r − 1] <= w < work_end[r].
struct AttentionGrouping {
  std::int32_t* cand_sorted = nullptr;  ///< [B] candidates ordered by (user, candidate) (stable)
  std::int32_t* run_user = nullptr;     ///< [R] user of run r
  std::int32_t* run_count = nullptr;    ///< [R] candidates of run r (0 for r >= num_runs)
  std::int32_t* run_start = nullptr;    ///< [R] first position of run r in cand_sorted
  std::int32_t* work_end = nullptr;     ///< [R] inclusive sum over runs of ceil(count·n_seed / block_rows)
  std::int32_t* num_runs = nullptr;     ///< [1]
  AttentionWorkItem* items = nullptr;   ///< [work_slots] (rows 0 past the work list)
  /// [2] or null: the wgmma kernel's epilogue counters (AttentionArgs::epilogue_counts), zeroed
  /// by the grouping so that the counts are those of one call
  unsigned long long* epilogue_counts = nullptr;
  /// Upper bound of the work items: ceil(B·n_seed / 128) + min(U, B) (each run adds at most
  /// one partial block); the mma.sync kernel's grid x
  std::int32_t work_slots = 0;
  /// Built by one CTA (B <= tuning::AttentionGroupingOneCta::kMaxCandidates), which also runs the
  /// map check; else the CUB device-wide build after the map check kernel.
  bool one_cta = false;
  // scratch of the device-wide build
  std::uint32_t* keys_sorted = nullptr;  ///< [B]
  std::int32_t* cand_iota = nullptr;     ///< [B]
  std::int32_t* work_blocks = nullptr;   ///< [R]
  void* temp = nullptr;                  ///< CUB temporary storage
  std::size_t temp_bytes = 0;
};

/// CUB temporary storage the grouping of B candidates over U users needs (host query; needs a
/// CUDA device for CUB's PTX version lookup).
std::size_t attention_grouping_temp_bytes(std::int64_t B, std::int64_t U);

/// The map check (map_error := the first b with cand_to_user[b] outside [0, U), else kLceMapOk)
/// and the grouping `g` of cand_to_user [B] (device): a stable radix sort of (user, candidate)
/// pairs on the bit_width(U - 1) low bits, run-length encoding of the sorted users, per-run row
/// blocks of `block_rows` query rows (a run of c candidates has c·n_seed rows), scans, then the
/// work list (one thread per slot, a binary search over work_end: the CTAs start with one 16-byte
/// load instead of ~log2(B) dependent ones). g.one_cta: all of it in one launch of one CTA (the
/// sort in registers, skipped for a map already in order); else a flag reset, the map check
/// kernel and the CUB device-wide build. Both give the same cand_sorted, runs (run_user for r <
/// num_runs), work_end and items, and zero g.epilogue_counts when it is set. B >= 1.
void launch_attention_grouping(const std::int32_t* cand_to_user, std::int64_t B, std::int64_t U,
                               std::int64_t n_seed, int block_rows, const AttentionGrouping& g,
                               unsigned long long* map_error, cudaStream_t stream);

/// Rows of queries one CTA owns (whole or partial candidates of one user) and its warps.
inline constexpr int kAttentionBlockRows = 128;

/// Forward of the attention kernel (one CTA per (row block of one user, head)).
struct AttentionArgs {
  const void* q = nullptr;           ///< [B·n_seed, H, Dh], 16-byte aligned
  const void* k = nullptr;           ///< [keys, H, Dh], 16-byte aligned
  const void* v = nullptr;           ///< [keys, H, Dh], 16-byte aligned
  void* out = nullptr;               ///< [B·n_seed, H, Dh], 16-byte aligned
  const std::int64_t* k_offsets = nullptr;  ///< device [U + 1] (jagged) or null (dense)
  std::int64_t S = 0;                ///< dense: keys per user
  std::int64_t B = 0;
  int H = 0, n_seed = 0, Dh = 0;
  int key_block = 64;                ///< keys per shared-memory tile: 64 or 128
  bool q_in_registers = false;       ///< Q fragments held in registers (key_block 128 only)
  int kv_stages = 2;                 ///< K/V tiles in the cp.async ring: 2, or 3 (key_block 128)
  bool wgmma = false;                ///< the sm_90a kernel (TMA, wgmma, warp specialization)
  bool pingpong = false;             ///< wgmma: consumer warpgroups take turns on the MMAs
  bool pipelined = false;            ///< wgmma: FA3's intra-warpgroup order (else serial)
  /// wgmma: a consumer warpgroup whose 64 rows are 64 consecutive rows of out stages RN(O / l) in
  /// its (then free) Q buffer and writes them with TMA stores (a tensor map over out [B·n_seed,
  /// H·Dh], boxes of 64 × 64); other row blocks are written from registers. Bitwise the same out.
  bool tma_store = false;
  /// wgmma: [0] row blocks of 64 written by TMA, [1] row blocks (1..64 rows) written from
  /// registers; a.grouping zeroes them first. Null: not counted.
  unsigned long long* epilogue_counts = nullptr;
  int persistent_ctas = 0;           ///< wgmma: CTAs of the persistent grid (the device's SMs)
  std::int64_t total_keys = 0;       ///< rows of k and v (the TMA tensor maps' extent; wgmma)
  float scale_log2 = 0.0f;           ///< scale · log2(e), rounded to FP32
  AttentionGrouping grouping;
  int runs = 0;                      ///< R = B
  const unsigned long long* map_error = nullptr;
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};
/// The forward kernel a.wgmma selects (kernels/ikbo_attention_fwd{,_wgmma}.cuh): mma.sync over
/// grid (a.grouping.work_slots, H); wgmma persistent over min(work_slots·H, a.persistent_ctas)
/// CTAs. a.wgmma needs an sm_90a device and total_keys + 128 <= INT_MAX (TMA coordinates are
/// 32-bit): AttentionOp checks both before it sets it.
void launch_attention_forward(DType storage, const AttentionArgs& a, cudaStream_t stream);

namespace attention_wgmma {
/// The wgmma kernel's instances of one storage type (Dh 64 and 128), in
/// ikbo_attention_fwd_wgmma_{f16,bf16}_sm90a.cu (compiled for sm_90a only).
void launch_fwd_wgmma_f16(const AttentionArgs& a, cudaStream_t stream);
void launch_fwd_wgmma_bf16(const AttentionArgs& a, cudaStream_t stream);
}  // namespace attention_wgmma

}  // namespace tbe::cuda::detail
