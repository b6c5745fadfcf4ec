// Device-level TBE backward fused with the exact optimizer (CUTLASS-style lifecycle, like
// ForwardOp, tbe/cuda/validated.h): can_implement (validate, no device needed), construct
// (validate once + plan), query the workspace, run(stream) without host sync, finish() to sync and
// collect the stats (or the FATAL BoundsCheckError).
// Semantics: docs/backward.md "The computation"; the FP64 reference is tbe/backward.h.
// Design, work routing and stochastic rounding on the GPU: docs/backward.md.
//
// Memory spaces: in the BackwardProblem handed to BackwardOp / TransposeOp the data pointers
// (forward.tables.weights, forward.lookups.{indices, offsets, per_sample_weights}, grad_output,
// momentum) are DEVICE pointers; the spans (rows, dims, table_offsets, feature_table_map,
// vbe_batch_sizes) are host metadata, read during construction only.
//
// Symbols: N lookups, R runs (unique (table, row) pairs), SL run length, K = Σ_t E_t rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "tbe/backward.h"
#include "tbe/cuda/small_table.h"
#include "tbe/cuda/validated.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/problem.h"

namespace tbe::cuda {

/// Limits of the CUDA backward beyond validate(BackwardProblem): N < 2^31 lookups and fewer than
/// 2^31 bags (positions and bag ids travel through the sort as 32-bit values). Larger problems are
/// an InvalidArgument naming the limit.
inline constexpr std::int64_t kBackwardMaxLookups = (std::int64_t{1} << 31) - 1;

/// Device metadata of one transpose (FBGEMM transpose_embedding_input) of a batch of lookups,
/// living in the workspace of the TransposeOp that produced it (a view: copy freely, valid while
/// that workspace is alive and until it runs again). Contents, all on the device:
///   bounds-check state (repaired offsets, warning counters, FATAL key) of the same call;
///   sorted_keys [N] / sorted_values [N] (32-bit values: bag id or lookup position, see
///   docs/backward.md); run_keys [N] (first num_runs valid), run_lengths [N] int32,
///   run_offsets [N + 1] uint32 (exclusive prefix), num_runs (int32, device).
/// Keys (TransposeTuning::Keys) are linearized ids, 32-bit when K < 2^31 (bits(K) sorted) else
/// 64-bit, or 32-bit RowBits keys (table · 2^rb + index, rb bits sorted; the run keys are
/// linearized ids again); positions outside every bag carry the sentinel key (K, or T_tables ·
/// 2^rb + 2^rb − 1) and form the last run, which backward skips.
struct SortedLookups {
  const void* impl = nullptr;   ///< the producing plan (identity + geometry checks)
  char* workspace = nullptr;    ///< the producing TransposeOp's workspace
  bool valid() const { return impl != nullptr && workspace != nullptr; }
};

struct TransposePlan;  // host plan + device metadata (optimized/src/backward_op.cpp)

/// Launch choices of the transpose (TransposeOp, and the one inside BackwardOp): how a lookup's
/// sort key is built (docs/backward.md "The transpose's keys"). Both keys hand the run kernels
/// the same runs (one per unique (table, row), in (table, row) order, keyed by linearized ids),
/// each with the same lookups in the same (position) order, so every later kernel adds the same
/// terms in the same order: bitwise equal updates (deterministic mode).
struct TransposeTuning {
  enum class Keys : std::uint8_t {
    /// LinearIds. RowBits sorts seed-large's lookups in two 9-bit passes instead of three
    /// (17 row bits against 22), but measured no faster there (H100, session 24,
    /// bench/results/README.md): the transpose 2.81 against 2.95 ms, the run kernels 9.33 against
    /// 9.24 (their runs' lookups no longer follow one another in memory).
    Auto,
    /// key = row_offset[t] + index (FBGEMM's linearized index), K = Σ E_t, bits(K) sorted. Path
    /// "bwd.sort.linear_ids".
    LinearIds,
    /// key = t · 2^rb + index with rb = bits(max_t E_t): only the rb row bits of the N lookups are
    /// sorted (stable), so they come out ordered by (index, position); since the positions of one
    /// table's features are one contiguous range, each (table, index) is still one contiguous
    /// run, and run-length encoding compares the whole key. The R <= K + 1 runs are then sorted
    /// back into (table, row) order by their keys and rewritten as linearized ids (consecutive
    /// runs of one feature share its grad_output rows in L2). Valid when every table's features
    /// are consecutive in feature_table_map, K < 2^31 and rb + bits(number of tables) <= 32;
    /// otherwise an InvalidArgument naming "tuning.transpose.keys" from the constructor. Path
    /// "bwd.sort.row_bits".
    RowBits,
  };
  Keys keys = Keys::Auto;
};

/// The backward's preprocessing as its own operator, so a caller can run it with the forward (the
/// "hoisted transpose" of FBTriton): bounds check/repair (the problem's mode), linearize
/// (int64 id = row_offset[table(f)] + index, per position the scale c_p where needed),
/// cub::DeviceRadixSort::SortPairs on the key bits only, cub::DeviceRunLengthEncode::Encode,
/// cub::DeviceScan::ExclusiveSum. It only needs the forward problem (and is independent of
/// grad_output), so it can run on a second stream concurrently with ForwardOp::run.
///   TransposeOp t(problem.forward);  void* tws = alloc(t.workspace_bytes());
///   t.run(tws, stream2);             // enqueue only
///   backward_op.run(outputs, ws, stream, t.sorted());  // after an event on stream2
/// Errors: the constructor throws InvalidArgument (can_implement). A FATAL violation found by
/// run() is reported by the BackwardOp::finish() that consumed it.
class TransposeOp {
 public:
  /// Every check the constructor makes, as a Status (never throws, touches no device, reads no
  /// data pointer): tbe::validate(p) first (its Status unchanged), then the CUDA backward limits
  /// (kBackwardMaxLookups: "lookups.num_indices", then "lookups.offsets").
  static Status can_implement(const ForwardProblem& p);
  /// Runs can_implement(p) (InvalidArgument(status)), checks `tuning` (InvalidArgument naming
  /// "tuning.transpose.keys"), plans, uploads the small metadata.
  explicit TransposeOp(const ForwardProblem& p, const TransposeTuning& tuning = {});
  ~TransposeOp();
  TransposeOp(const TransposeOp&) = delete;
  TransposeOp& operator=(const TransposeOp&) = delete;
  TransposeOp(TransposeOp&&) noexcept;
  TransposeOp& operator=(TransposeOp&&) noexcept;

  /// Device workspace of run() (bytes; it also holds the SortedLookups).
  std::size_t workspace_bytes() const;
  /// Enqueues the preprocessing on `stream` (no host sync, no allocation).
  void run(void* d_workspace, cudaStream_t stream = nullptr);
  /// The result of the last run() (valid once the stream reaches the end of that run()).
  SortedLookups sorted() const;

 private:
  std::unique_ptr<TransposePlan> plan_;
  char* last_workspace_ = nullptr;
};

/// Launch choices of the CUDA backward (BackwardOp); the constants behind them live in
/// optimized/dispatch/tuning.h (RunKernels, SmallTable). short_runs, chunk_order,
/// chunk_schedule, run_launch and interleave_chunk_every never change a deterministic result
/// (every choice adds the same rows in the same order: bitwise equal outputs); small_table
/// chooses a path whose results lie in the same enclosures (docs/oracle.md "Small-table histogram
/// path").
struct BackwardTuning {
  /// The small-table histogram path's knobs (docs/small-table.md; default: Mode::Auto with the
  /// expected L measured from the device offsets, as ForwardOp).
  SmallTableTuning small_table;
  /// Which instance of the short-run kernel runs (docs/backward.md "Work routing"; paths
  /// "bwd.short.staged" / "bwd.short.registers").
  enum class ShortRuns : std::uint8_t {
    /// Staged when the mean lookups per table row N / K (K = Σ_t E_t) is at least
    /// tuning::RunKernels::kShortStagedMinLookupsPerRow (4), else Registers.
    Auto,
    /// grad_output rows in registers (4 in flight per lane), 4 blocks of 256 threads per SM: for
    /// runs of one to a few lookups.
    Registers,
    /// runs longer than 4 lookups stage their rows through per-lane cp.async rings of 16 rows in
    /// shared memory (warp groups of >= 16 lanes with aligned rows; the others gather through
    /// registers as above), 3 blocks per SM.
    Staged,
  };
  ShortRuns short_runs = ShortRuns::Auto;
  /// The group size of the short-run kernel (docs/backward.md "Work routing"; path
  /// "bwd.short.per_dim" when per-D launches ran). A group of G lanes owns a run, lane l owns
  /// columns [4l, 4l + 4): one launch at the widest table's G leaves most lanes of a small-D
  /// table's group idle (prod-mixed: 56% of the runs are rows of D = 4 or 8 tables, each given a
  /// full warp of which one or two lanes work, while a run costs the group a chain of dependent
  /// loads whatever its D). Every value gives the same bits: a run's sum and update do not depend
  /// on the group that computed it. Measured (H100, session 30, bench/results/README.md),
  /// prod-mixed with the transpose hoisted, PerDim against Widest: B = 4096 FP32 SGD / FP32
  /// Adagrad / FP16 Adagrad 2.41 / 2.72 / 2.11 ms against 3.19 / 4.02 / 3.68; B = 32768 5.32 /
  /// 5.88 / 5.52 against 10.02 / 11.79 / 11.05.
  enum class ShortGroups : std::uint8_t {
    /// PerDim where it applies and matters: the tables the features read have two or more group
    /// sizes, warp groups (D_max <= 128), and tuning.run_launch is not Interleaved (RunLaunch::Auto
    /// then resolves to Separate); else Widest.
    Auto,
    /// one launch, every run at the widest table's group size (G of D_max)
    Widest,
    /// one launch per group size among the tables (ascending G; G_t = next power of two >=
    /// ceil(D_t / 4)), each over the runs of its tables only; a small kernel first finds each
    /// table's range of runs (runs are in linearized-id order, so one table's runs are
    /// contiguous). Block groups (D_max > 128) or RunLaunch::Interleaved with it is an
    /// InvalidArgument naming "tuning.short_groups" from the constructor.
    PerDim,
  };
  ShortGroups short_groups = ShortGroups::Auto;
  /// How the long-run chunks are put in order of their first lookup before the chunk kernel
  /// (docs/backward.md "Work routing"; paths "bwd.chunk_order.one-cta" / ".device-wide" when
  /// chunks ran). Every choice gives the same order.
  enum class ChunkOrder : std::uint8_t {
    /// OneCta when the chunk slots fit (tuning::Preprocess::kChunkOrderOneCtaSlots), else
    /// DeviceWide.
    Auto,
    /// one CTA sorts the chunks the router listed (none listed: it returns at once). More slots
    /// than kChunkOrderOneCtaSlots (N / chunk_size + N / long_run_threshold + 2) is an
    /// InvalidArgument naming "tuning.chunk_order" from the constructor.
    OneCta,
    /// cub::DeviceRadixSort over every chunk slot.
    DeviceWide,
  };
  ChunkOrder chunk_order = ChunkOrder::Auto;
  /// Whether the lookups are sorted (docs/small-table.md "Without the sort").
  enum class Sort : std::uint8_t {
    /// Skipped when every feature of the call takes the small-table histogram path: only the
    /// bounds part of the transpose runs, then the small-table kernels own every row (the
    /// tensor-core product for SL >= its minimum run, exact sums below it and for a table whose
    /// histogram is not representable). Paths "bwd.small_table.no_sort", "bwd.small_table.exact".
    /// A hoisted SortedLookups handed to run() is then used for its bounds results only.
    Auto,
    /// Always sorted: the generic run kernels take the rows the histogram does not own.
    Always,
  };
  // (Sort and SplitK: every value is valid; neither changes a result beyond the enclosure.)
  Sort sort = Sort::Auto;
  /// The small-table path's split-K product kernel (docs/small-table.md "Backward"; paths
  /// "bwd.small_table.split_k.block" / ".warp" when the product updated rows; no effect when no
  /// feature takes the path). Both sum the same blocks of whole 16-bag tiles into the same
  /// partials, so the bound and the minimum run are the same.
  enum class SplitK : std::uint8_t {
    /// warp w owns 32 columns for all of the block's tiles (no block barrier), one scale per
    /// tile and column. The default: forward + backward 1.05-1.31x faster than Block on the
    /// small-table sweep (H100, session 17, bench/results/README.md).
    Warp,
    /// the block's 4 warps share each tile (block barriers), one power-of-two scale per tile
    Block,
  };
  SplitK split_k = SplitK::Warp;
  /// How the long-run chunk kernel's groups take their chunks (docs/backward.md "Work routing";
  /// paths "bwd.chunk_schedule.dynamic" / ".static" when chunks ran). A chunk's partial and a
  /// run's chunk-order sum do not depend on which group took the chunk: with
  /// BackwardStrategy::deterministic both values give the same bits (without it, the float
  /// atomics' order varies run to run either way). Dynamic is the default: on seed-large (H100,
  /// session 22, bench/results/README.md) the chunk kernel took 3.66 ms against 11.4 with the
  /// stride in the same run (ncu: L2 hit 62% against 22%, SMs active 96% against 57% of its time).
  enum class ChunkSchedule : std::uint8_t {
    /// each group takes the next chunk in order from a device counter (one atomicAdd per chunk),
    /// so groups that meet slower chunks take fewer and the chunks in flight stay consecutive
    Dynamic,
    /// group g takes chunks g, g + groups, g + 2·groups, ... of the order
    Static,
  };
  ChunkSchedule chunk_schedule = ChunkSchedule::Dynamic;
  /// Whether the short runs and the long-run chunks take two launches or one (docs/backward.md
  /// "Work routing"; paths "bwd.runs.separate" / "bwd.runs.interleaved" when a run kernel ran).
  /// Every value gives the same bits (deterministic mode): a short run's or a chunk's result does
  /// not depend on the launch or the group that computed it.
  enum class RunLaunch : std::uint8_t {
    /// Interleaved where it can run (the staged short-run instance: warp groups, ShortRuns) and
    /// the chunks come from the device counter (ChunkSchedule::Dynamic), else Separate. On
    /// seed-large (H100, session 23, bench/results/README.md) one launch took 9.37 / 9.60 /
    /// 8.80 ms against 10.68 / 10.93 / 10.12 for two (FP32 SGD / FP32 Adagrad / FP16 Adagrad,
    /// hoisted); prod-mixed and fbgemm-bench-default run the register instance, hence Separate.
    Auto,
    /// the short-run kernel, then the chunk kernel (ChunkSchedule)
    Separate,
    /// one persistent launch (kernels/backward_interleaved.cu): every interleave_chunk_every-th
    /// warp starts on the chunks (a device counter, as ChunkSchedule::Dynamic), the others on
    /// the short runs (batches of tuning::RunKernels::kShortRunsPerGrab consecutive runs from a
    /// second counter); each group whose pool is empty moves to the other one, so no SM idles
    /// between the two kinds of work. Taken where the staged short-run instance runs (block
    /// groups: Separate). With ChunkSchedule::Static or ShortRuns::Registers it is an
    /// InvalidArgument naming "tuning.run_launch".
    Interleaved,
  };
  RunLaunch run_launch = RunLaunch::Auto;
  /// The one launch: every this-many-th warp of the grid starts on the chunks, the others on the
  /// short runs. 1 (the default): every warp starts on the chunks, so the chunks in flight stay
  /// consecutive in their order (their L2 reuse) and the short runs follow without a tail in
  /// between; measured against 2 and 64 (H100, session 23): 1 fastest for FP32 weights (up to
  /// 2% against 64, 1.8% against 2), 2 for FP16 (1% faster than 1). 1..64, else an
  /// InvalidArgument naming "tuning.interleave_chunk_every" (checked whatever the launch).
  std::int32_t interleave_chunk_every = 1;
  /// The keys of the transpose run inside BackwardOp::run (a hoisted SortedLookups keeps the
  /// keys of the TransposeOp that produced it).
  TransposeTuning transpose;
};

struct BackwardPlan;  // host launch plan + device metadata (optimized/src/backward_op.cpp)

/// One TBE backward + exact optimizer on device memory.
///   Status st = BackwardOp::can_implement(problem, strategy);  // optional, without throwing
///   BackwardOp op(problem, strategy);   // validate(p, s) -> InvalidArgument; plan; upload meta
///   void* ws = alloc(op.workspace_bytes());
///   op.run(outputs, ws, stream);        // enqueue only (no host sync)
///   BackwardStats s = op.finish();      // sync; FATAL -> BoundsCheckError (nothing updated)
/// Inputs (device): forward.tables.weights [Σ E_t·D_t] of tables.dtype (the weights BEFORE the
/// update), grad_output [make_output_layout(forward).numel] of policy.output, momentum FP32 [K]
/// (Adagrad). Outputs (device, BackwardOutputs): weights [Σ E_t·D_t] (only touched rows written;
/// may alias the input weights), momentum FP32 [K] (only touched rows; may alias), per-sample-
/// weight gradients FP32 [N] (weighted problems; positions outside every bag get 0).
/// Launch order inside run(): bounds check, preprocessing (skipped when hoisted), routing, the
/// per-sample-weight gradient (reads the weights before any update), short runs, long-run chunks
/// (or both in one launch: BackwardTuning::RunLaunch), long-run apply, the small-table histogram
/// kernels; without the sort (BackwardTuning::Sort), the bounds check and the small-table kernels
/// alone. All device buffers must stay alive and
/// unchanged until finish() returns.
class BackwardOp {
 public:
  /// Every check the constructor makes, as a Status (never throws, touches no device, reads no
  /// data pointer), first failure wins: tbe::validate(p, s) (its Status unchanged), the limits of
  /// TransposeOp::can_implement(p.forward) (N and bags < 2^31), then the compiled kernels
  /// ("options.policy": (weights, accumulation, output) must be a row of
  /// optimized/dispatch/dispatch.h kCompiledBackward: FP32 weights with FP32 or FP64
  /// accumulation, FP16/BF16 weights with FP32).
  static Status can_implement(const BackwardProblem& p, const BackwardStrategy& s = {});
  /// The whole host call at once, in the order the host backend always reported errors:
  /// validate(p, s), then validate(p, out), then the CUDA limits and kernels as above.
  static Status can_implement(const BackwardProblem& p, const BackwardStrategy& s,
                              const BackwardOutputs& out);

  /// Runs can_implement(p, s) (InvalidArgument(status) naming the argument, before any launch),
  /// builds the plan and uploads the small per-table/per-feature metadata (synchronously).
  explicit BackwardOp(const BackwardProblem& p, const BackwardStrategy& s = {});
  /// The same with the launch choices (BackwardTuning: the small-table path's knobs, the short-run
  /// kernel instance, the chunk-order sort, whether to sort, the small-table split-K kernel; an
  /// impossible choice is an InvalidArgument naming "tuning.<field>").
  BackwardOp(const BackwardProblem& p, const BackwardStrategy& s, const BackwardTuning& tuning);
  /// The same without the checks: can_implement(p, s) must have returned ok()
  /// (tbe/cuda/validated.h).
  BackwardOp(const BackwardProblem& p, Validated, const BackwardStrategy& s = {},
             const BackwardTuning& tuning = {});
  ~BackwardOp();
  BackwardOp(const BackwardOp&) = delete;
  BackwardOp& operator=(const BackwardOp&) = delete;
  BackwardOp(BackwardOp&&) noexcept;
  BackwardOp& operator=(BackwardOp&&) noexcept;

  /// Device workspace of run() (bytes; 256-aligned pieces). Sized by upper bounds (N lookups,
  /// N / chunk_size + N / long_run_threshold + 1 chunks), so no count is read back during run().
  /// With a hoisted transpose the preprocessing part is not needed: workspace_bytes(true). Without
  /// the sort (BackwardTuning::Sort) only its bounds part (counters, repaired offsets, scan) is.
  std::size_t workspace_bytes(bool hoisted = false) const;

  /// Enqueues the backward on `stream`: validate(p, out) first (InvalidArgument, nothing
  /// launched). `hoisted`: the result of a TransposeOp run on the same forward problem (same
  /// lookups, enqueued before this call in stream order); then this op skips its own bounds check
  /// and preprocessing. A SortedLookups of a different geometry is an InvalidArgument.
  void run(const BackwardOutputs& out, void* d_workspace, cudaStream_t stream = nullptr,
           const SortedLookups& hoisted = {});
  /// The same without validate(p, out): the caller checked these outputs (tbe/cuda/validated.h).
  void run(Validated, const BackwardOutputs& out, void* d_workspace, cudaStream_t stream = nullptr,
           const SortedLookups& hoisted = {});

  /// Synchronizes the stream of the last run(); returns warnings, runs, lookups, the per-path
  /// counters read back from the device and the paths exercised ("bwd.sort.key32"/"key64" with
  /// "bwd.sort.row_bits"/"linear_ids" and "bwd.sort.wide_digits" where the sort was dispatched
  /// with tuning::Preprocess::kWideDigitBits-bit digits (CUB sorts a single tile in one block
  /// whatever the digit),
  /// "bwd.short", "bwd.long.chunked", "bwd.long.fused", "bwd.psw_grad", "bwd.sr", "bwd.hoisted",
  /// "bwd.nondeterministic", "bwd.group.warp"/"bwd.group.block", "bwd.short.staged"/
  /// "bwd.short.registers" (the short-run kernel instance, BackwardTuning::ShortRuns),
  /// "bwd.chunk_order.one-cta"/"bwd.chunk_order.device-wide" (BackwardTuning::ChunkOrder),
  /// "bwd.chunk_schedule.dynamic"/".static" (BackwardTuning::ChunkSchedule),
  /// "bwd.runs.separate"/"bwd.runs.interleaved" (BackwardTuning::RunLaunch),
  /// "bwd.gather.staged"/"bwd.gather.registers" (how the run kernels gathered grad_output rows),
  /// the small-table paths "bwd.small_table", "bwd.small_table.split_k.warp"/".block",
  /// "bwd.small_table.saved_counts", "bwd.small_table.exact", and "bwd.small_table.no_sort"
  /// instead of "bwd.sort.*" when nothing was sorted (then no "bwd.group.*",
  /// "bwd.nondeterministic": the generic run kernels did not run), bounds-check paths).
  /// Throws BoundsCheckError (FATAL: the first offender, as tbe::find_first_violation; no output
  /// was written) or DeviceError (a CUDA error).
  BackwardStats finish();

  /// Profiling hook (tbe-bench): when set, run() records events[0] before its first launch and
  /// events[1..6] after the preprocessing (bounds check + transpose; nothing when hoisted), the
  /// routing, the per-sample-weight gradient, the short runs, the long-run chunks, and the
  /// long-run apply plus the small-table kernels. Without the sort events 2..5 are recorded back
  /// to back (zero); where short runs and chunks took one launch (path "bwd.runs.interleaved",
  /// BackwardTuning::RunLaunch) it is the short runs' phase and the chunks' phase is zero.
  /// `events` must hold kPhaseEvents events and outlive the runs; nullptr unsets.
  static constexpr int kPhaseEvents = 7;
  void set_phase_events(cudaEvent_t* events);

  /// The small-table decision per feature (docs/small-table.md).
  const std::vector<SmallTableFeature>& small_table_features() const;
  /// Makes the following run() calls use the histogram a forward saved (ForwardOp::
  /// save_small_table_counts) instead of counting again; `batch` is the caller's id of the batch
  /// this backward runs for. run() throws InvalidArgument "small_table_counts" (before any
  /// launch) when counts->batch != batch (a stale histogram), when it was never written, or when
  /// it was written for other features or another B. nullptr: count again (the default).
  void use_small_table_counts(const SmallTableCounts* counts, std::uint64_t batch);
  /// The small-table counters of the last finish().
  SmallTableBackwardStats small_table_stats() const;

 private:
  std::unique_ptr<BackwardPlan> plan_;
};

}  // namespace tbe::cuda
