// TBE backward fused with an exact optimizer (docs/backward.md "The computation", "Work
// routing"; FBGEMM split_embedding_backward_codegen_{sgd,rowwise_adagrad}_unweighted_exact and
// their weighted variants). The FP64 reference defines the semantics and is the CPU fallback;
// optimized/ implements the same interface on the GPU (tbe/cuda/backward.h).
//
// Symbols: T features, N lookups, E_t rows and D_t columns of table t, run = all lookups of one
// unique (table, row) after the transpose, SL = run length, G_r = row gradient of row r.
// Linearized id of lookup p of feature f: row_offset[table(f)] + index[p], row_offset = exclusive
// prefix of E_t over tables (int64). Semantic choices: docs/backward.md "Semantics".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/problem.h"

namespace tbe {

/// Fused exact optimizer (one update per unique row). FBGEMM: OptimType.EXACT_SGD,
/// OptimType.EXACT_ROWWISE_ADAGRAD.
enum class OptimizerKind : std::uint8_t { ExactSgd, ExactRowwiseAdagrad };

/// Weight decay of rowwise Adagrad. FBGEMM: WeightDecayMode.{NONE, L2, DECOUPLE}.
enum class WeightDecayMode : std::uint8_t { None, L2, Decoupled };

/// Optimizer hyper-parameters. FBGEMM passes them to its kernels as float: the semantics use each
/// value rounded once to FP32 (RNE); the reference and the oracle read them through
/// effective_hyper_parameter(). Validation (validate(BackwardProblem)):
///  learning_rate finite > 0; eps finite > 0 (Adagrad); weight_decay finite >= 0;
///  weight_decay_mode must be None for ExactSgd; max_norm >= 0 (0 = off); max_gradient >= 0
///  (0 = off, else grad_output is clamped elementwise to [-max_gradient, max_gradient] first).
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::ExactSgd;
  double learning_rate = 0.01;
  double eps = 1e-8;
  double weight_decay = 0.0;
  WeightDecayMode weight_decay_mode = WeightDecayMode::None;
  double max_norm = 0.0;
  double max_gradient = 0.0;
};

/// (double)(float)x: the value of a hyper-parameter as the semantics use it.
double effective_hyper_parameter(double x);

/// Options of a backward call besides the forward's.
struct BackwardOptions {
  OptimizerConfig optimizer;
  /// Stochastic rounding stream (used when forward.options.policy.write_back is Stochastic and the
  /// weights are FP16/BF16): a counter-based generator (Philox-4x32-10) keyed by `sr_seed`, counter
  /// (sr_offset, element). Callers advance sr_offset between calls (FBGEMM's philox seed/offset).
  std::uint64_t sr_seed = 0;
  std::uint64_t sr_offset = 0;
};

/// One backward + optimizer call.
/// - forward: the forward call whose output gradient is given (tables.weights = the weights
///   BEFORE the update, lookups, pooling, bounds-check mode, policy). The bounds check/repair of
///   forward.options runs first (FATAL: BoundsCheckError, nothing updated).
/// - grad_output: dL/d(output), same layout and dtype as the forward output
///   (make_output_layout(forward).numel elements of forward.options.policy.output).
/// - momentum: rowwise Adagrad state before the update, FP32 [Σ_t E_t] indexed by linearized id;
///   nullptr for ExactSgd (must be non-null for Adagrad).
/// Memory space: host for the reference/host backends, device for tbe::cuda::BackwardOp.
struct BackwardProblem {
  ForwardProblem forward;
  const void* grad_output = nullptr;
  const float* momentum = nullptr;
  BackwardOptions options;
};

/// Where a backward call writes (same memory space as the problem).
/// - weights: [Σ_t E_t·D_t] of the weights dtype; only rows with >= 1 lookup are written (other
///   elements are left untouched). May alias forward.tables.weights (in-place, as FBGEMM does).
/// - momentum: FP32 [Σ_t E_t]; only touched rows are written; may alias problem.momentum; nullptr
///   for ExactSgd.
/// - per_sample_weight_grad: FP32 [N] dL/dw_p for weighted problems (positions outside every bag
///   get 0), computed from the weights before the update; nullptr to skip. Non-null for an
///   unweighted problem is an InvalidArgument.
struct BackwardOutputs {
  void* weights = nullptr;
  float* momentum = nullptr;
  float* per_sample_weight_grad = nullptr;
};

/// Choices among equivalent GPU strategies (semantics unchanged; the reference ignores them but
/// validates them, so both backends reject the same values).
struct BackwardStrategy {
  /// Runs with SL >= long_run_threshold take a long-run path; shorter runs are owned by one
  /// program each. Range [1, 1 << 20].
  std::int32_t long_run_threshold = 256;
  /// Lookups per chunk on the long-run paths. Range [32, 4096], a multiple of 32.
  std::int32_t chunk_size = 256;
  enum class LongRuns : std::uint8_t {
    Chunked,  ///< chunk partial sums to a workspace, then an apply kernel
    Fused,    ///< chunks, device-scope fence + atomic counter, last chunk applies (one launch)
  };
  LongRuns long_runs = LongRuns::Fused;
  /// Bitwise identical results run to run: no float atomics, fixed-order second-level reduction.
  bool deterministic = true;
};

/// Counters of the kernel paths one call exercised (the reference reports all its runs as short).
struct BackwardPathCounters {
  std::int64_t short_runs = 0, short_lookups = 0;
  std::int64_t chunked_runs = 0, chunked_lookups = 0;
  std::int64_t fused_runs = 0, fused_lookups = 0;
  std::int64_t chunks = 0;  ///< chunks processed on the two long-run paths
  /// Rows updated by the CUDA small-table path's tensor-core product and their lookups
  /// (docs/small-table.md; the generic counters above then leave those rows out), and the SL from
  /// which the product owns a row of its tables (shorter rows stay generic, or exact without the
  /// sort; 0 when the path updated no row), with the
  /// split that bound comes from: P split-K blocks per feature of `histogram_block_tiles` 16-bag
  /// tiles each (docs/oracle.md "Small-table histogram path": min run = 42 + tiles + P). The
  /// reference reports 0.
  std::int64_t histogram_runs = 0, histogram_lookups = 0, histogram_min_run = 0;
  std::int64_t histogram_blocks = 0, histogram_block_tiles = 0;
  /// Rows the small-table path summed exactly when the lookups were not sorted (CUDA
  /// BackwardTuning::Sort; docs/small-table.md "Without the sort"): every touched row of its
  /// tables with 0 < SL < `histogram_min_run`, and every touched row of a table whose histogram
  /// is not representable (any SL); `histogram_runs` / `_lookups` exclude them. With a sort those
  /// rows are the generic counters'. The reference reports 0.
  std::int64_t histogram_exact_runs = 0, histogram_exact_lookups = 0;
};

/// What a backward call reports.
struct BackwardStats {
  std::int64_t warnings = 0;  ///< bounds-check warnings of this call
  std::int64_t runs = 0;      ///< unique (table, row) pairs updated
  std::int64_t lookups = 0;   ///< lookups inside a bag (Σ SL)
  BackwardPathCounters counters;
  /// Kernel paths exercised, e.g. "bwd.sort.key32", "bwd.short", "bwd.long.chunked",
  /// "bwd.long.fused", "bwd.psw_grad", "bwd.sr", "bwd.hoisted". The reference: {"reference"}.
  std::vector<std::string> paths;
};

/// Checks `p` (validate(p.forward) first, then grad_output/momentum/optimizer values, the policy:
/// optimizer_state must be F32) and `s`. Errors name argument, value and limit, e.g.
/// "options.optimizer.learning_rate: -1 must be finite and > 0". Never dereferences data.
Status validate(const BackwardProblem& p, const BackwardStrategy& s = {});
/// Checks the outputs against `p`: weights non-null, momentum non-null iff Adagrad,
/// per_sample_weight_grad only when weighted.
Status validate(const BackwardProblem& p, const BackwardOutputs& out);

/// Transpose of the lookups (FBGEMM transpose_embedding_input): stable sort of (linearized id,
/// position p) over the lookups inside bags (after the bounds-check repair), then run-length
/// encoding. Positions before offsets[0] or after the last offset belong to no bag and are absent.
struct Transpose {
  std::vector<std::int64_t> linear_ids;        ///< [R] unique linearized ids, ascending
  std::vector<std::int64_t> run_lengths;       ///< [R] SL of each run
  std::vector<std::int64_t> run_offsets;       ///< [R + 1] exclusive prefix of run_lengths
  std::vector<std::int64_t> sorted_positions;  ///< [Σ SL] lookup positions, stable within a run
  std::vector<std::int64_t> position_bag;      ///< [N] bag of lookup p (-1 outside every bag)
};

/// (Addition) The transpose of `p` after the bounds-check repair `repaired` (= tbe::repair(p)):
/// linearized ids in int64, stable order by position inside each run. `p` must pass
/// validate(p); Σ SL = number of lookups inside bags. (The CUDA sort/RLE is compared with this.)
Transpose transpose_lookups(const ForwardProblem& p, const RepairResult& repaired);

/// The FP64 backward of one call: everything the oracle needs to enclose any conforming result.
/// Per run k (table t_k, row r_k, D_k columns), flat arrays are indexed by run_col_offset[k] + d.
struct BackwardReference {
  Transpose transpose;
  RepairResult repair;                      ///< the bounds-check repair that was applied
  std::vector<std::int32_t> run_table;      ///< [R]
  std::vector<std::int64_t> run_row;        ///< [R] row inside the table
  std::vector<std::int64_t> run_col_offset; ///< [R + 1]
  std::vector<double> row_grad;             ///< [Σ D_k] G_r (after clipping), FP64 in sorted order
  std::vector<double> momentum;             ///< [R] new momentum before its FP32 store (Adagrad)
  std::vector<double> updated;              ///< [Σ D_k] new row after max_norm, before storage
  std::vector<double> per_sample_weight_grad;  ///< [N] (weighted only, else empty)
};

/// Reference backward in FP64. Throws InvalidArgument (validate) or BoundsCheckError (FATAL).
BackwardReference backward_reference_fp64(const BackwardProblem& p);

/// (Addition) Host buffers the CPU fallback reuses across backward_reference calls: the transpose
/// (sorted positions, runs, position -> bag), its radix-sort scratch and the grad_output offsets
/// per bag and per sorted lookup, all O(N + K) elements (none of size Σ E_t·D_t). Buffers only grow, so a long-lived workspace
/// allocates and first-touches its pages once; a call on a smaller problem reuses them. Holds no
/// result: a call's output never depends on what an earlier call left here. One call at a time
/// per workspace (the reference backend owns one and serialises its calls).
class BackwardWorkspace {
 public:
  BackwardWorkspace();
  ~BackwardWorkspace();
  BackwardWorkspace(BackwardWorkspace&&) noexcept;
  BackwardWorkspace& operator=(BackwardWorkspace&&) noexcept;
  /// Bytes held (capacity of every buffer); 0 before the first call and after release().
  std::size_t bytes() const;
  /// Frees every buffer (the next call allocates again).
  void release();
  struct Buffers;      ///< the buffers (defined in reference/src/backward.cpp)
  Buffers& buffers();  ///< created on first use

 private:
  std::unique_ptr<Buffers> buffers_;
};

/// The CPU fallback: the same FP64 values as backward_reference_fp64 (per run in sorted order,
/// OpenMP over runs: the bytes written do not depend on the thread count), stored rounded per
/// policy.write_back (RNE, or stochastic rounding with the Philox stream of p.options), momentum
/// rounded to FP32 (RNE), per-sample-weight gradients rounded to FP32. Nothing is written on
/// error. The FP64 values are not kept (a run's row goes to `out` as soon as it is computed).
/// Without `workspace`, buffers are allocated for this call only.
BackwardStats backward_reference(const BackwardProblem& p, const BackwardOutputs& out);
BackwardStats backward_reference(const BackwardProblem& p, const BackwardOutputs& out,
                                 BackwardWorkspace& workspace);

/// Stochastic rounding of exact value x to `t` with uniform u in [0, 1): RD(x) + ulp if
/// u < (x - RD(x)) / (RU(x) - RD(x)), else RD(x) (exact values are returned unchanged).
/// NaN, ±inf and F64 are returned unchanged; |x| beyond the largest finite value of `t` rounds
/// as RNE does (to ±max or ±inf). Throws InvalidArgument for an integer type.
double stochastic_round(DType t, double x, double u);

/// (Addition) Philox-4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11; Random123's philox4x32_R with
/// R = 10): one block of 4 random words from a 128-bit counter and a 64-bit key. Matches
/// Random123's known-answer vectors and curand's curand_Philox4x32_10.
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key);

/// (Addition) The uniform u in [0, 1) that stochastic rounding uses for weight element `element`
/// (flat index in the weights buffer, table_offsets[t] + r·D_t + d): word 0 of
/// philox4x32_10(counter = {lo32(offset), hi32(offset), lo32(element), hi32(element)},
/// key = {lo32(seed), hi32(seed)}) times 2^-32. On the GPU this is the first curand() of
/// curand_init(seed, /*subsequence=*/element, /*offset=*/4·offset, &state)
/// (curandStatePhilox4_32_10_t), see docs/backward.md "Stochastic rounding stream".
double stochastic_rounding_uniform(std::uint64_t seed, std::uint64_t offset,
                                   std::uint64_t element);

std::string to_string(OptimizerKind k);         ///< "sgd", "rowwise_adagrad"
std::string to_string(WeightDecayMode m);       ///< "none", "l2", "decoupled"
OptimizerKind parse_optimizer(const std::string& s, const char* what = "optimizer");
WeightDecayMode parse_weight_decay_mode(const std::string& s, const char* what = "weight_decay_mode");

}  // namespace tbe
