// The tuning table of the CUDA backend (CUB's policy hubs): every launch-geometry and strategy
// constant of the kernels and their host plans, one struct per kernel family, one comment per
// entry: what it controls, why that value, and what exercises the alternative. None of them
// changes semantics (summation orders are fixed by the algorithms, docs/backward.md and
// optimized/README.md; the oracle's enclosures hold for any order).
//
// The defaults of the public knobs live in the public structs (tbe::cuda::ForwardTuning,
// tbe::cuda::LceTuning, tbe::BackwardStrategy) and are read here, so each value has one source;
// static_asserts tie them to what is compiled. Host-only C++, included by the kernels (launch
// bounds, block sizes), the dispatch (compiled variants) and the host operators (plans).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tbe/backward.h"
#include "tbe/cuda/forward.h"
#include "tbe/cuda/ikbo_attention.h"
#include "tbe/cuda/ikbo_lce.h"

// Compile-time overrides of RunKernels::kShortStageRows / kLongStageRows for measurement sweeps only
// (bench/results/README.md records them); builds of the project use the defaults.
#ifndef TBE_BWD_SHORT_STAGE_ROWS
#define TBE_BWD_SHORT_STAGE_ROWS 16
#endif
#ifndef TBE_BWD_LONG_STAGE_ROWS
#define TBE_BWD_LONG_STAGE_ROWS 16
#endif
// The same for SmallTable::kBagsPerBlock / kBackwardTargetBlocks.
#ifndef TBE_ST_BAGS_PER_BLOCK
#define TBE_ST_BAGS_PER_BLOCK 64
#endif
#ifndef TBE_ST_BWD_TARGET_BLOCKS
#define TBE_ST_BWD_TARGET_BLOCKS 256
#endif

namespace tbe::cuda::tuning {

/// Threads of a warp: the widest thread group that reduces with shuffles (sm_90).
inline constexpr int kWarpThreads = 32;

// ============================================================================================
// Forward
// ============================================================================================

/// Pooled SUM / MEAN gather (kernels/pooled_gather.cuh; plan: src/forward_op.cpp; compiled
/// variants: dispatch/dispatch.h kCompiledForward and kCompiledPooledTuning).
struct PooledGather {
  /// Threads per block (8 warps); a block holds kBlockThreads / G bag groups. The launch bounds
  /// below size the registers for this block.
  static constexpr int kBlockThreads = 256;
  /// Largest thread group per bag (G = min(next_pow2(ceil(D / VEC)), kMaxGroupSize)): a warp, so
  /// index broadcasts are shuffles; D > kMaxGroupSize·VEC loops over column chunks (path
  /// "forward.pooled.column_chunks", forced by the tests' case C06, D in {1280, 1536, 2048}).
  static constexpr int kMaxGroupSize = kWarpThreads;
  /// Bytes per vector load/store of a weight row (one 128-bit LDG): VEC = 4 FP32 or 8 FP16/BF16
  /// elements when D, the table offset and the weights pointer allow it (path
  /// "forward.pooled.vec4"/"vec8"), else VEC = 1 ("forward.pooled.scalar", forced by odd D).
  static constexpr int kVectorBytes = 16;
  /// The narrow vector path of 16-bit weights (ForwardTuning::narrow_vectors): 8-byte loads of 4
  /// elements where the 16-byte vector does not fit the rows (D % 8 == 4, or a table offset
  /// that is a multiple of 4 elements but not of 8: prod-mixed's tables after a D = 4 table of odd
  /// E) and D % 4 == 0 (path "forward.pooled.narrow_vec4"), as FBGEMM's Vec4T loads.
  static constexpr int kNarrowVectorBytes = 8;
  /// Row loads in flight per lane, compiled for every instance (the default): 4 independent
  /// gathers per lane before they are accumulated in index order. Measured on H200, seed-large:
  /// 8 took 1.08x (FP32) / 1.17x (FP16) the time of 4 (session 5), 1.36x / 1.23x with the
  /// lock-step shuffles (session 10); 8 spills 250-580 bytes at 3 resident blocks (54-216 bytes
  /// since one kernel per (rows32, weighted) flag pair, where 4 spills 0-38).
  static constexpr int kRowsInFlight = 4;
  /// More loads in flight, compiled for kCompiledPooledTuning only (ForwardTuning::rows_in_flight
  /// = 8; the tests draw 4 or 8 at random).
  static constexpr int kRowsInFlightMany = 8;
  /// __launch_bounds__ minimum resident blocks per SM of the one-group-per-bag kernel.
  static constexpr int kMinBlocksPerSm = 3;
  /// Same for the pipelined persistent kernel (ForwardTuning::pipelined, path
  /// "forward.pooled.pipelined"): it needs ~40 more registers for the prefetched next bag.
  /// Measured slower than both group-per-bag variants; kept for the comparison in tbe-bench.
  static constexpr int kMinBlocksPerSmPipelined = 2;
  /// The streamed kernel (ForwardTuning::staged_rows, kernels/pooled_gather_streamed.cuh): ring
  /// depths compiled (rows per warp in shared memory: kStreamedRowsFew · 512 bytes per warp) and
  /// its __launch_bounds__ minimum resident blocks per SM (no rows live in registers).
  static constexpr int kStreamedRowsFew = 8;
  static constexpr int kStreamedRowsMany = 16;
  /// The ring ForwardTuning::kStagedRowsAuto takes for launches of at least
  /// ForwardTuning::staged_auto_min_bags bags: 8 rows, measured faster than 16 on seed-large
  /// (H100, session 21: 5.40 vs 5.88 ms, FP32 weights with FP64 accumulation).
  static constexpr int kStreamedRowsAuto = kStreamedRowsFew;
  /// 3 for both depths: at 4 (64 registers) ptxas spills the FP64-accumulation instance.
  static constexpr int kMinBlocksPerSmStreamed = 3;

  /// ForwardTuning's default rows in flight (include/tbe/cuda/forward.h is the source, with the
  /// other defaults: pipelined = false, prefer_l1 = true; the tests draw all three at random).
  static constexpr int kDefaultRowsInFlight = ForwardTuning{}.rows_in_flight;
  static_assert(kDefaultRowsInFlight == kRowsInFlight ||
                    kDefaultRowsInFlight == kRowsInFlightMany,
                "the default rows in flight must be a compiled variant");
};

/// NONE pooling, one group per output row (kernels/sequence.cu): same groups and vectors as
/// PooledGather (G from the common D, VEC from kVectorBytes).
struct Sequence {
  /// Threads per block (kBlockThreads / G rows per block).
  static constexpr int kBlockThreads = 256;
};

/// Bounds check / repair (kernels/bounds_check.cu): one thread per offset for the offsets
/// prepare and the bad-bag count, one warp per bag for the index repair and the FATAL check.
struct BoundsCheck {
  /// Threads per block (kBlockThreads / kWarpThreads bags per block in the warp-per-bag passes).
  static constexpr int kBlockThreads = 256;
};

/// Small-table histogram path (kernels/small_table.cuh, forward_small_table.cu,
/// backward_small_table.cu; eligibility and plan: src/small_table.cpp; docs/small-table.md).
/// The eligibility limits are the path's definition (E_pad <= 64 rows of counts per bag, D <= 128
/// columns in one warp's accumulators); the tests force the path with SmallTableTuning::Mode::Force
/// and cover E in {1, 2, 63, 64}, D in {64, 96, 128} and L in {0, 1, 63, 64, 2048, 2049}.
struct SmallTable {
  /// Largest E: the counts of one bag are one row of 4 k-tiles of mma.m16n8k16.
  static constexpr int kMaxRows = 64;
  /// D range: 64..128 (8 to 16 n-tiles of 8 columns; FP32 accumulators of 16 n-tiles per lane).
  static constexpr int kMinDim = 64, kMaxDim = 128;
  /// Expected L below which Mode::Auto leaves a feature on the generic path (the histogram pays
  /// for itself when a bag reuses rows).
  static constexpr double kMinExpectedBagLength = 64;
  /// Bags with fewer lookups are summed directly (index order, FP32) from the shared-memory table
  /// tile instead of on tensor cores: below this L the truncating tensor-core accumulation is not
  /// proven inside the forward enclosure (docs/oracle.md "Small-table histogram path"); at and
  /// above it, it is. Not a tuning knob: the proof needs L - 1 >= 39.
  static constexpr int kTensorCoreMinLookups = 64;
  /// Largest count FP16 holds exactly (2^11): lookups are counted in slices of this many positions
  /// of a bag, so every count fed to the tensor cores is exact.
  static constexpr int kMaxExactCount = 2048;
  /// Forward: warps per block (each owns 16-bag m-tiles), bags per block (the table tile is loaded
  /// once per block). 64 bags: one m-tile per warp and B / 64 blocks (256 at B = 16384, about 2
  /// per SM: the kernel is latency-bound). Measured on H200 (session 13, bench/results/README.md),
  /// forward ms 128 -> 64 bags per block at B = 16384, D = 96: E8.L64 0.040 -> 0.028, E64.L64
  /// 0.050 -> 0.035, E64.L128 0.048 -> 0.033, E64.L512 0.127 -> 0.054.
  static constexpr int kWarps = 4;
  static constexpr int kBagsPerBlock = TBE_ST_BAGS_PER_BLOCK;
  /// Forward counting: a one-slice tile of contiguous bags with fewer positions than this (mean
  /// L < 96) is streamed position by position (4 index loads in flight per lane, the bag found by a
  /// binary search over the 16 starts); longer tiles are counted bag by bag (4 loads in flight),
  /// where the search's ~10 instructions per position cost more than they hide (measured on the
  /// H200: L = 512 forward 0.090 -> 0.130 ms when streamed; bench/results/README.md).
  static constexpr int kStreamMaxPositions = 16 * 96;
  /// Backward GEMM: split-K blocks over all small-table features of one call (each block sums
  /// whole 16-bag k-tiles of one feature; its partial tiles are reduced in a fixed order:
  /// deterministic). At least about 2 per SM of an H100/H200 (the block's k-loop is
  /// latency-bound), and at least sqrt(tiles) per feature; every block adds one FP32 partial per
  /// row (the bound's P, docs/oracle.md). 1024 measured no faster than 256 (session 13: forward +
  /// backward within +-7% on the sweep at B = 16384, bench/results/README.md).
  static constexpr int kBackwardTargetBlocks = TBE_ST_BWD_TARGET_BLOCKS;
  /// Shared-memory row strides (elements): the transposed table tile (E_pad + 8 halves: the
  /// B-fragment loads of 8 columns x 4 k-pairs hit 32 distinct banks) and the count tile (64 + 8
  /// ints: the 8-byte A-fragment loads of a half-warp hit distinct banks).
  static constexpr int kTableStride = kMaxRows + 8;
  static constexpr int kCountStride = kMaxRows + 8;
  static_assert(kTensorCoreMinLookups - 1 >= 39, "docs/oracle.md: the tensor-core bound needs L >= 40");
  static_assert(kBagsPerBlock % (16 * kWarps) == 0, "whole m-tiles per warp");
};

// ============================================================================================
// Backward
// ============================================================================================

/// Preprocessing (kernels/backward_preprocess.cu): linearize, route, long-run expansion.
struct Preprocess {
  /// Threads per block of the linearize, route and expand kernels.
  static constexpr int kBlockThreads = 256;
  /// Lookups per thread in flight in linearize (a block per kBlockThreads bags, a thread per
  /// lookup; session 25: a group of 8 threads per bag reached 2.0 TB/s of the 3.0 copy bandwidth,
  /// bench/results/README.md).
  static constexpr int kLinearizeUnroll = 4;
  /// The router's grid: min(ceil(N / kBlockThreads), kRouteBlocksPerSm · SMs) blocks, striding
  /// over the R <= N runs (R is a device count, so the grid is sized by N).
  static constexpr int kRouteBlocksPerSm = 8;
  /// The chunk-order sort (launch_chunk_order) as one CTA: cub::BlockRadixSort of kChunkOrderItems
  /// keys per thread over kChunkOrderThreads threads, sorting only the chunks the router listed (a
  /// device count; none listed: the CTA returns at once). It serves calls whose chunk slots fit
  /// (max_chunks <= kChunkOrderOneCtaSlots: N <= about 1.18 M lookups at the default threshold and
  /// chunk size); larger ones take cub::DeviceRadixSort over every slot (histogram, scan and four
  /// onesweep passes: about 25 µs even with nothing to sort, ncu session 13,
  /// bench/results/README.md). BackwardTuning::chunk_order forces either (tests).
  static constexpr int kChunkOrderThreads = 1024;
  static constexpr int kChunkOrderItems = 9;
  static constexpr std::int64_t kChunkOrderOneCtaSlots =
      static_cast<std::int64_t>(kChunkOrderThreads) * kChunkOrderItems;
  /// The wide digit of the transpose's sort (kernels/backward_preprocess.cu): CUB's onesweep with
  /// 9-bit digits sorts 17 or 18 key bits in two passes where CUB's 8-bit tuning takes three
  /// (RowBits keys of seed-large: 17 bits; also 9 bits in one pass, 25 to 27 in three). Wider digits do not fit: the ranking keeps
  /// 2^bits counters per warp in shared memory (12 warps · 512 · 4 B = 24 KiB at 9 bits).
  static constexpr int kWideDigitBits = 9;
  /// Threads and keys per thread of that onesweep pass (CUB's SM90 tuning of 32-bit keys with
  /// 32-bit values and offsets).
  static constexpr int kWideDigitThreads = 384;
  static constexpr int kWideDigitItems = 23;
};

/// Run kernels: short runs (kernels/backward_short.cu), long-run chunks and apply
/// (kernels/backward_long.cu), and the per-sample-weight gradient (kernels/backward_psw_grad.cu).
/// A group of G threads owns one run (or chunk); lane l owns columns [4l, 4l + 4).
struct RunKernels {
  /// Columns per lane (one 4-element vector of grad_output, the weights and the accumulator):
  /// G = next_pow2(ceil(D_max / kColumnsPerLane)).
  static constexpr int kColumnsPerLane = 4;
  /// Threads per block with warp groups (G <= kWarpThreads, path "bwd.group.warp"); the
  /// per-sample-weight gradient uses it with G capped at kWarpThreads.
  static constexpr int kBlockThreads = 256;
  /// Largest block group (G = 64..512: one group per block, path "bwd.group.block", forced by
  /// D = 256 in tbe-verify's rows): D <= 2048 -> at most 512 lanes of 4 columns.
  static constexpr int kMaxBlockGroup = 512;
  /// grad_output rows loaded back to back per lane. Measured on H200, seed-large: 4 rows at 3
  /// blocks per SM beat 8 rows at 2 blocks per SM (8 spills at 3) by 15% on short runs, 3% on
  /// long chunks.
  static constexpr int kRowsInFlight = 4;
  /// Staged sorted gather (warp groups of G >= R lanes, grad_output rows 4-element aligned:
  /// RunArgs::grad_vec; short runs longer than kRowsInFlight): each lane keeps R grad_output rows
  /// in flight as cp.async copies into its own shared-memory ring (no registers held, no
  /// barriers) ahead of the row it adds; 0 selects the register gather (kRowsInFlight). Power of
  /// two <= 32; shared memory per 256-thread block: 8 warps · (R · 32 · 4 · sizeof(grad_output
  /// element) + 768 bytes of tile offsets and scales). Measured on H200, seed-large, hoisted, one
  /// session (session 12 call 3, bench/results/README.md), ms FP32 SGD / FP32 Adagrad / FP16
  /// Adagrad: registers everywhere 14.52 / 14.92 / 12.93; short runs staged at 16, long
  /// chunks registers 13.24 / 13.62 / 12.34; both staged at 16 12.96 / 13.42 / 11.66 (call 4,
  /// with short runs of SL <= kRowsInFlight through registers: 12.68 / 13.01 / 11.71).
  /// kShortStageRows is the ring of the staged short-run kernel instance; the register instance
  /// (no ring) is compiled beside it and chosen per call (kShortStagedMinLookupsPerRow).
  static constexpr int kShortStageRows = TBE_BWD_SHORT_STAGE_ROWS;
  static constexpr int kLongStageRows = TBE_BWD_LONG_STAGE_ROWS;
  static_assert(kShortStageRows == 0 || (kShortStageRows <= 32 && (kShortStageRows & (kShortStageRows - 1)) == 0),
                "kShortStageRows: 0 or a power of two <= 32");
  static_assert(kLongStageRows == 0 || (kLongStageRows <= 32 && (kLongStageRows & (kLongStageRows - 1)) == 0),
                "kLongStageRows: 0 or a power of two <= 32");
  /// __launch_bounds__ minimum resident blocks per SM of the register short-run instance with
  /// warp groups: 4 (<= 64 registers, a few bytes spilled). Measured on H200, seed-large: 2%
  /// (FP32) to 12% (FP16) faster short runs than 3 blocks without spills.
  static constexpr int kShortMinBlocksPerSm = 4;
  /// Same for the staged instance: shared memory (70 KiB per block for FP32 grad_output at a ring
  /// of 16) admits 3 blocks per SM, and the bound follows so that no registers spill.
  static constexpr int kShortMinBlocksPerSmStaged = kShortStageRows >= 16 ? 3 : 4;
  /// BackwardTuning::short_runs = Auto takes the staged short-run instance when the call's mean
  /// lookups per table row, N / K (K = Σ_t E_t; host-known, no read-back), is at least this: the
  /// ring only serves runs longer than kRowsInFlight, and the staged instance's lower occupancy
  /// costs runs of one or two lookups. Measured on H200 (session 13, bench/results/README.md),
  /// hoisted, ms FP32 SGD / FP32 Adagrad / FP16 Adagrad, register vs staged instance: seed-large
  /// (N / K = 26) 15.33 / 15.90 / 14.28 vs 12.85 / 13.25 / 11.87; prod-mixed at B = 4096 (0.6)
  /// 3.04 / 3.87 / 3.43 vs 3.01 / 3.76 / 3.95; fbgemm-bench-default (0.1) 0.248 / 0.316 / 0.293
  /// vs 0.271 / 0.332 / 0.346. Rejected (same session): both instances, split by SL in two
  /// launches (seed-large 13.36 / 13.80 / 12.25, prod-mixed 3.82 / 4.64 / 4.12), and a one-body
  /// register gather (fewer spills; fbgemm-bench-default FP32 SGD 0.265).
  static constexpr double kShortStagedMinLookupsPerRow = 4.0;
  /// Same for the long-run chunk and apply kernels: they measured slower at 4 and keep 3.
  static constexpr int kLongMinBlocksPerSm = 3;
  /// BackwardTuning::RunLaunch's one launch (kernels/backward_interleaved.cu): short runs a group
  /// takes per atomicAdd on the run cursor (consecutive runs: their lengths, keys and offsets
  /// share cache lines; not swept). The launch exists where one ring serves both work items
  /// (kOneLaunchRing: the same staged depth for short runs and chunks; a sweep build with other
  /// depths keeps two launches).
  static constexpr int kShortRunsPerGrab = 16;
  static_assert(kShortRunsPerGrab >= 1, "a group takes at least one run per take");
  static constexpr bool kOneLaunchRing = kShortStageRows > 0 && kShortStageRows == kLongStageRows;
  /// Same for block groups (kMaxBlockGroup threads, all kernels).
  static constexpr int kBlockGroupMinBlocksPerSm = 1;

  /// BackwardStrategy's defaults (reference/include/tbe/backward.h is the source): runs with
  /// SL >= 256 take the long-run path, in chunks of 256 lookups. The tests draw thresholds and
  /// chunk sizes (32, 64, 256) at random and force every SL in {1, 2, 255, 256, 257, ...}; the
  /// path counters (short / chunked / fused runs, chunks) say which ran.
  static constexpr int kDefaultLongRunThreshold = BackwardStrategy{}.long_run_threshold;
  static constexpr int kDefaultChunkSize = BackwardStrategy{}.chunk_size;
  static_assert(kDefaultChunkSize % kWarpThreads == 0, "chunks are whole warps of lookups");
};

// ============================================================================================
// IKBO LCE
// ============================================================================================

/// Memory-bound LCE kernels (kernels/ikbo_lce_elementwise.cu): map check, padding copies,
/// gather-add, cuBLASLt pointer arrays; grid-stride loops with capped grids.
struct LceElementwise {
  /// Threads per block.
  static constexpr int kBlockThreads = 256;
  /// Bytes per thread of the gather-add's candidate part: 32 (two 16-byte loads; 8 FP32 or 16
  /// 16-bit elements) when M·N and every pointer allow it, else one element.
  static constexpr int kGatherAddBytes = 32;
  /// Grid caps of the grid-stride loops: the map check and the pointer-array builder, the
  /// 16-byte padding copy, the element padding copy.
  static constexpr unsigned kMapCheckMaxBlocks = 1024;
  static constexpr unsigned kPadRows16MaxBlocks = 8192;
  static constexpr unsigned kPadRowsMaxBlocks = 4096;
};

/// The fused candidate GEMM (kernels/ikbo_lce_fused.cu, LceStage::FusedEpilogue): mma.sync
/// m16n8k16 tiles, cp.async pipeline, swizzled shared memory (the kernel's index arithmetic
/// assumes these values: it static_asserts them).
struct LceFusedGemm {
  /// CTA tile: 64 rows of M (BM = 64 wastes 3% of the published M = 433, BM = 128 would waste
  /// 15%), 256 columns of N (one tile at the published N), 32 of K per pipeline stage.
  static constexpr int kTileM = 64, kTileN = 256, kTileK = 32;
  /// cp.async stages in flight (20 KB of shared memory each: 80 KB per CTA).
  static constexpr int kStages = 4;
  /// 8 warps in a 2 (M) × 4 (N) grid, each owning a 32 × 64 warp tile.
  static constexpr int kThreads = 256;
  static constexpr int kWarpTileM = 32, kWarpTileN = 64;
  /// __launch_bounds__ minimum resident CTAs per SM (2 × 80 KB of shared memory fit).
  static constexpr int kMinBlocksPerSm = 2;
};

/// LceOp's stage plans (src/ikbo_lce_op.cpp).
struct LceStages {
  /// L2Chunked with LceTuning::chunk_candidates = 0 (the default, include/tbe/cuda/ikbo_lce.h):
  /// as many candidates per chunk as fit 2 result buffers in 24 MiB (L2 is 50-60 MB on H100 /
  /// H200). The tests draw chunk_candidates in {0, 1, 2, 5} and overlap at random.
  static constexpr std::size_t kL2ChunkBudgetBytes = std::size_t{24} << 20;
  static constexpr std::int64_t kDefaultChunkCandidates = LceTuning{}.chunk_candidates;
  static_assert(kDefaultChunkCandidates == 0, "the default chunk size is the L2 budget's");
  /// LtEpilogue: the largest cuBLASLt workspace the heuristic may ask for.
  static constexpr std::size_t kLtMaxWorkspaceBytes = std::size_t{32} << 20;
  /// LtEpilogue: batch pointers aligned below this (TMA's need) run PaddedK instead (path
  /// "lce.lt-epilogue.unsupported(batch pointers N-byte aligned (< 16))").
  static constexpr std::uint32_t kLtMinAlignment = 16;
};

// ============================================================================================
// IKBO attention
// ============================================================================================

/// The cross-attention forward (kernels/ikbo_attention_fwd.cuh, AttentionOp): FA2-style, one CTA
/// per (block of kBlockRows query rows of one user's candidates, head); 8 warps of 16 rows each;
/// K/V tiles of kKeyBlock keys in a cp.async ring. Key block 64: 2 stages, Q in shared memory
/// (ldmatrix per k-step: that keeps the Dh = 128 kernel at <= 128 registers for 2 CTAs per SM);
/// key block 128 runs one CTA per SM and compiles the variants below (the default: Q in
/// registers, 3 stages). The kernel's index
/// arithmetic assumes these values (it static_asserts them).
struct AttentionMmaSync {
  /// Query rows per CTA (whole or partial candidates of one user: each K/V tile in shared memory
  /// serves all of them). Matches detail::kAttentionBlockRows, which the grouping uses.
  static constexpr int kBlockRows = 128;
  static constexpr int kThreads = 256;  ///< 8 warps × 16 rows
  /// Keys per shared-memory tile: AttentionTuning::key_block (128 default; 64 compiled as the
  /// alternative, dispatch/dispatch.h kAttentionKeyBlocks, drawn by the tests, case C21).
  static constexpr int kDefaultKeyBlock = AttentionTuning{}.key_block;
  static_assert(kDefaultKeyBlock == 128, "the default key block must be a compiled variant");
  /// AttentionTuning::q_in_registers (true default; compiled with key block 128 only): each
  /// warp's Q fragments (Dh / 16 × 4 registers) loaded once instead of an ldmatrix per k-step and
  /// key tile (1 of 17 ldmatrix per k-step at key block 128). tbe-bench ikbo-fa times it beside
  /// the others (variant mma-sync.kb128.qreg); the tests run it in every key-block loop.
  static constexpr bool kDefaultQInRegisters = AttentionTuning{}.q_in_registers;
  static_assert(!kDefaultQInRegisters || kDefaultKeyBlock == 128,
                "Q in registers is compiled with key block 128 only");
  /// AttentionTuning::kv_stages (3 default; compiled with key block 128 only): a 3-stage K/V
  /// ring loads tile t + 2 after tile t's barrier, so one barrier per tile instead of two (the
  /// 8 warps of the one CTA per SM wait for the slowest once per tile). Q 32 KB + 3 × 64 KB =
  /// 224 KB at Dh = 128 (kMaxSmemBytes: 227 KB). Timed as mma-sync.kb128[.qreg].stages3.
  static constexpr int kDefaultKvStages = AttentionTuning{}.kv_stages;
  static_assert(kDefaultKvStages == 2 || kDefaultKeyBlock == 128,
                "3 stages are compiled with key block 128 only");
  /// Largest dynamic shared memory of one CTA on sm_90 (cudaFuncAttributeMaxDynamicSharedMemorySize).
  static constexpr int kMaxSmemBytes = 227 * 1024;
  /// __launch_bounds__ minimum resident CTAs per SM: 2 (Q 32 KB + 2 stages × (K, V) 64 KB = 96 KB
  /// of shared memory at Dh = 128, key block 64), 1 for Dh = 128 with key block 128 (160 KB) and
  /// for Q in registers or 3 stages (up to 255 registers: no spills; at Dh = 64 the 80 / 112 KB
  /// would fit 2 CTAs, which the 128-register cap of 2 would turn into spills).
  static constexpr int min_blocks_per_sm(int dh, int key_block, bool q_in_registers, int stages) {
    return q_in_registers || stages == 3 || (dh == 128 && key_block == 128) ? 1 : 2;
  }
  /// Threads per block of the grouping's element-wise kernels (iota, per-run blocks).
  static constexpr int kGroupingThreads = 256;
};

/// The grouping of candidates by user (kernels/ikbo_attention_grouping.cu,
/// AttentionTuning::grouping). One CTA sorts up to kMaxCandidates candidates in registers
/// (cub::BlockRadixSort of kItems per thread), finds the runs, scans and writes the work list in a
/// single launch that also runs the map check; the device-wide build (CUB DeviceRadixSort,
/// DeviceRunLengthEncode, two DeviceScans and three element-wise kernels, ~14 dependent launches
/// with the map check) takes any B. At the published ikbo-fa shape (B = 2048, S = 512) the
/// launches of the device-wide build were a measurable part of the call (bench/results/README.md).
struct AttentionGroupingOneCta {
  static constexpr int kThreads = 512;
  static constexpr int kItems = 8;
  static constexpr int kMaxCandidates = kThreads * kItems;  ///< B limit of the one-CTA build
};

/// The sm_90a cross-attention forward (kernels/ikbo_attention_fwd_wgmma.cuh,
/// AttentionKernel::Wgmma): 3 warpgroups (a TMA K/V producer warp and a Q loader warp, two wgmma
/// consumers of 64 rows), the same 128-row work items as AttentionMmaSync (the grouping is
/// shared), key tiles of kKeyBlock in a ring of stages(Dh) stages, two Q buffers (the current and
/// the next job's): Dh = 128: 2 × Q 32 KB + 2 × (K, V) 64 KB = 192 KB; Dh = 64: 2 × 16 KB + 3 ×
/// 32 KB = 128 KB. A third K stage at Dh = 128 (224 KB) was slower at every S (session 9,
/// bench/results/README.md). The kernel's constants are these (it static_asserts the row count).
struct AttentionWgmma {
  static constexpr int kBlockRows = 128;
  static constexpr int kKeyBlock = 128;
  static constexpr int kThreads = 384;
  static constexpr int stages(int Dh) { return Dh == 64 ? 3 : 2; }
};

}  // namespace tbe::cuda::tuning
