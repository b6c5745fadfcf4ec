// Device-level TBE forward operator (CUTLASS-style lifecycle, tbe/cuda/validated.h):
// can_implement (validate, no device needed), construct (validate once + build the launch plan),
// query the workspace, run(stream) without host sync, finish() to sync and collect the stats (or
// the FATAL BoundsCheckError). Semantics: docs/semantics.md.
//
// Memory spaces: in the ForwardProblem handed to ForwardOp, the data pointers
// (tables.weights, lookups.indices, lookups.offsets, lookups.per_sample_weights) are DEVICE
// pointers; the spans (rows, dims, table_offsets, feature_table_map, vbe_batch_sizes) are host
// metadata and are only read during construction (a copy of what is needed is kept).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "tbe/backend.h"
#include "tbe/bounds_check.h"
#include "tbe/cuda/small_table.h"
#include "tbe/cuda/validated.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/problem.h"

namespace tbe::cuda {

/// Kernel tuning knobs (semantics unchanged; tests draw them at random, tbe-bench compares them).
/// The launch geometry behind them is optimized/dispatch/tuning.h (PooledGather), which reads
/// these defaults.
struct ForwardTuning {
  /// staged_rows: choose the kernel per launch from its bag count (staged_auto_min_bags).
  static constexpr int kStagedRowsAuto = -1;
  /// Pooled gather: a persistent grid whose thread groups loop over bags, prefetching the next
  /// bag's offsets and first index tile (compiled for FP32 output with FP32 weights, or FP16
  /// weights + FP32 accumulation, on the vector path; elsewhere the default is used), instead of
  /// one thread group per bag.
  bool pipelined = false;
  /// Row loads in flight per lane in the one-group-per-bag gather: 4 (default, every type) or 8
  /// (compiled for the same type set as `pipelined`; other types use 4); else InvalidArgument
  /// "tuning.rows_in_flight". Measured on H200,
  /// seed-large: 8 takes 1.36x (FP32) / 1.23x (FP16) the time of 4; the pipelined grid was slower
  /// than both (bench/results/).
  int rows_in_flight = 4;
  /// L1 preference of the pooled gathers. The group-per-bag kernel (no shared memory) asks for the
  /// largest L1 (measured: no effect on H200); the streamed kernel asks for the smallest
  /// shared-memory carveout that holds 3 of its blocks per SM (measured, H100 session 22: the
  /// FP32-accumulation instance 5.37 ms against 5.68 with the driver's carveout on seed-large).
  /// false: the driver's default carveout for both.
  bool prefer_l1 = true;
  /// Pooled gather: broadcast and multiply a lookup's row index as 32 bits (one shuffle and one
  /// IMAD.WIDE.U32 per lookup, path "forward.pooled.row_index32") when every table has at most
  /// 2^32 rows; false, or a larger table, takes the 64-bit arithmetic ("forward.pooled.
  /// row_index64"). Same results either way (the tests draw both).
  bool row_index32 = true;
  /// Pooled gather of launches whose bags take a whole warp (FP32 rows of D in (64, 128], 16-bit
  /// rows of D in (128, 256], vector path; compiled for the same type set as `pipelined`): 0 runs
  /// the group-per-bag kernel; 8 or 16 the streamed kernel (path "forward.pooled.streamed"),
  /// whose warps stream the lookups of up to 32 consecutive bags through a ring of that many rows in
  /// shared memory, filled by cp.async across bag boundaries; kStagedRowsAuto (the default) takes
  /// the streamed kernel with 8 rows for launches of at least `staged_auto_min_bags` bags and the
  /// group-per-bag kernel for smaller ones, unless `pipelined` or `rows_in_flight` = 8 asks for
  /// another kernel (then that one runs, as with 0). Same output bits for every value. Measured
  /// (session 22, H100, bench/results/README.md), Auto against 0 in the same run: seed-large
  /// (one launch of 4.2 M bags) FP32 weights 0.87x the time with FP64 accumulation (5.37-5.41 vs
  /// 6.20 ms), 0.92x with FP32 accumulation, 0.84x with the fused check; prod-mixed (launches of
  /// 4096 bags, below the threshold) unchanged, while streaming them would cost 1.05x: hence the
  /// threshold on the launch's bag count.
  /// Valid values: kStagedRowsAuto, 0, 8, 16 (else InvalidArgument "tuning.staged_rows").
  int staged_rows = kStagedRowsAuto;
  /// kStagedRowsAuto's threshold: the smallest pooled launch (consecutive features with the same
  /// kernel geometry, counted in bags) that takes the streamed kernel. >= 0 (0: every launch the
  /// streamed kernel can take). Default 2^17 bags, from the session 22 sweep (H100,
  /// bench/results/README.md), whole-forward time with every such launch streamed over the
  /// group-per-bag kernel's, FP32 weights and FP64 accumulation: seed-large (one launch of 32·B
  /// bags) at launches of 2^14 bags 1.06x, 2^16 0.97x, 2^17 0.96x, 2^18 0.98x (1.005x with FP32
  /// accumulation), 2^19 0.94x, 2^22 0.87x; prod-mixed (its 16 D = 128 features streamed, one
  /// launch of B bags each, the other 50 features unchanged) at 2^12 1.05x, 2^15 1.06x,
  /// 2^16 1.015x, 2^17 0.99x.
  std::int64_t staged_auto_min_bags = std::int64_t{1} << 17;
  /// Streamed kernel: consecutive bags per warp, 1..32; 0 (default) chooses from the launch's bag
  /// count (32 while the grid still fills the device 4 times over, fewer for small launches).
  /// Same output bits for every value (the tests draw it). Else InvalidArgument
  /// "tuning.staged_bags_per_warp".
  int staged_bags_per_warp = 0;
  /// Streams the call's launches spread over, 1..8 (else InvalidArgument "tuning.launch_streams"):
  /// the pooled launches (one per run of consecutive features with the same kernel geometry) and
  /// the small-table launch go round robin over the caller's stream and launch_streams - 1 side
  /// streams of the op (created once, non-blocking), forked from and joined back to the caller's
  /// stream with events, so run() stays one ordered step on the caller's stream (and capturable in
  /// a CUDA graph). Launches write disjoint outputs; only the counters are shared (atomics). Path
  /// "forward.launch_streams" when more than one stream runs. Why: a mixed-D workload makes one
  /// launch per feature (prod-mixed: 66 launches of B bags at B = 4096, each too small to fill the
  /// device), and on one stream they run one after another. 1: everything on the caller's stream.
  /// Measured (H100, session 28, bench/results/README.md), 4 against 1 in the same run: prod-mixed
  /// B = 4096 0.60x the time (FP32 and FP16), B = 32768 0.86x (FP32) / 0.91x (FP16); calls with
  /// one launch (seed-large, fbgemm-bench-default) never fork. Same output bits for every value
  /// (the tests draw 1, 2, 4, 8).
  static constexpr int kMaxLaunchStreams = 8;
  int launch_streams = 4;
  /// Pooled launches that run the default group-per-bag kernel (not streamed, not pipelined, not
  /// 8 rows in flight) become one launch per vector path (16-byte, 8-byte narrow, scalar), over a
  /// list of spans: each span a run of consecutive features with one group size, gathered by its
  /// own blocks at that group size (a block finds its span with one ballot per 32 spans; path "forward.pooled.merged_launch"
  /// when two or more launches merged). Why: a mixed-D workload plans one launch per run of equal
  /// group sizes (prod-mixed: 66 launches, D cycling 4, 8, 64, 128), each too small to fill the
  /// device; session 28's merge at one group size (the largest) cost small-D bags their packing
  /// (bench/results/README.md). false: one launch per run, as before. Same output bits either way
  /// (the tests draw both).
  bool merge_launches = true;
  /// FP16/BF16 weights: features whose rows do not fit 16-byte vectors (D % 8 == 4, or a table
  /// offset that is a multiple of 4 elements but not of 8) but fit 8-byte ones (D % 4 == 0, offset
  /// % 4 == 0, weights pointer 8-byte aligned) gather 4-element vectors (path
  /// "forward.pooled.narrow_vec4"; tuning::PooledGather::kNarrowVectorBytes) instead of one element per
  /// lane. Why: tables are packed back to back, so one D = 4 table of odd E leaves every later
  /// table's rows 8- but not 16-byte aligned; on prod-mixed that sent 92% of the FP16 lookups of
  /// D >= 8 tables (B = 32768), and every D = 4 lookup, to the scalar path (2-byte loads, 4
  /// column chunks at D = 128). false: scalar,
  /// as before. Same output bits either way (each column sums the same rows in the same order;
  /// the tests draw both).
  bool narrow_vectors = true;
  /// The small-table histogram path (docs/small-table.md): which features take it.
  SmallTableTuning small_table;
};

struct ForwardPlan;  // host launch plan + device metadata (optimized/src/forward_op.cpp)

/// One TBE forward on device memory.
///   Status st = ForwardOp::can_implement(problem);  // optional: the checks, without throwing
///   ForwardOp op(problem, strategy);          // validate() -> InvalidArgument, plan, upload meta
///   void* ws = alloc(op.workspace_bytes());
///   op.run(d_output, ws, stream);             // enqueue only (no host sync)
///   ForwardStats s = op.finish();             // sync; FATAL violation -> BoundsCheckError
/// d_output: make_output_layout(p).numel elements of p.options.policy.output (device).
/// The problem's device buffers must stay alive and unchanged until finish() returns.
/// Several run() calls may be enqueued before one finish(); finish() reports the last run.
class ForwardOp {
 public:
  /// Every check the constructor makes, as a Status (never throws, touches no device, reads no
  /// data pointer): tbe::validate(p) first (its Status unchanged), then the kernel limits
  /// (options.policy.accumulation F32 or F64: dispatch/dispatch.h kAccumulationTypes; every
  /// weights × accumulation × output triple that passes both is compiled), then the tuning's
  /// values, each named as "tuning.<knob>" (rows_in_flight 4 or 8; staged_rows kStagedRowsAuto,
  /// 0, 8 or 16; staged_auto_min_bags >= 0; staged_bags_per_warp 0..32; launch_streams 1..8;
  /// small_table.expected_bag_length finite and >= 0).
  static Status can_implement(const ForwardProblem& p, const ForwardTuning& tuning = {});

  /// Runs can_implement(p, tuning) (throws InvalidArgument(status) naming the argument, before
  /// any launch), builds the launch plan and uploads the small per-feature metadata (synchronously,
  /// on the legacy default stream). With tuning.small_table in Mode::Auto and no expected L given,
  /// it also reads the T + 1 feature boundaries of the device offsets (synchronously) to decide
  /// which features take the small-table path (docs/small-table.md); results never depend on it.
  explicit ForwardOp(const ForwardProblem& p, const ForwardStrategy& strategy = {},
                     const ForwardTuning& tuning = {});
  /// The same without the checks: can_implement(p, tuning) must have returned ok()
  /// (tbe/cuda/validated.h).
  ForwardOp(const ForwardProblem& p, Validated, const ForwardStrategy& strategy = {},
            const ForwardTuning& tuning = {});
  ~ForwardOp();
  ForwardOp(const ForwardOp&) = delete;
  ForwardOp& operator=(const ForwardOp&) = delete;
  ForwardOp(ForwardOp&&) noexcept;
  ForwardOp& operator=(ForwardOp&&) noexcept;

  /// Device workspace needed by run() and repair() (bytes, 256-aligned pieces inside).
  std::size_t workspace_bytes() const;
  /// Output geometry (host).
  const OutputLayout& layout() const;

  /// The small-table decision per feature (all T features, in order; docs/small-table.md).
  const std::vector<SmallTableFeature>& small_table_features() const;
  /// Bytes of the device buffer save_small_table_counts() needs (0 when no feature takes the path).
  std::size_t small_table_counts_bytes() const;
  /// Makes the following run() calls also write the histogram counts of the small-table features
  /// into counts->data and stamp `*counts` with `batch` (the caller's id of this batch, checked by
  /// the backward). nullptr stops saving. InvalidArgument "small_table_counts" if counts->data is
  /// null or counts->bytes < small_table_counts_bytes(). `*counts` must outlive those runs.
  void save_small_table_counts(SmallTableCounts* counts, std::uint64_t batch);
  /// The small-table kernels' counters of the last finish() (zeros before).
  SmallTableStats small_table_stats() const;

  /// Enqueues the bounds check (per options.bounds_check and strategy) and the forward on
  /// `stream`. No host synchronization, no allocation. Under FATAL the check runs first and the
  /// forward kernels are skipped on device if it found a violation (nothing is written).
  void run(void* d_output, void* d_workspace, cudaStream_t stream = nullptr);

  /// Synchronizes the stream of the last run(), returns the warning count of that call and the
  /// paths exercised. Throws BoundsCheckError (FATAL, first offender in find_first_violation
  /// order) or DeviceError (a CUDA error).
  ForwardStats finish();

  /// The bounds check/repair as its own step on the GPU (Backend::repair): same RepairResult as
  /// tbe::repair (FATAL throws BoundsCheckError; NONE returns the input unchanged). Synchronous;
  /// downloads the repaired offsets and indices as int64.
  RepairResult repair(void* d_workspace, cudaStream_t stream = nullptr);

 private:
  std::unique_ptr<ForwardPlan> plan_;
};

}  // namespace tbe::cuda
