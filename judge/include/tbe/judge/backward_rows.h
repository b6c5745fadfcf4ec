// The backward rows of tbe-verify: backward + exact optimizer (tbe/backward.h) on a seed-large
// slice, the backend under test against the FP64 reference through the backward oracle
// (tbe/oracle/backward_oracle.h), with the kernel paths each row exercised.
//
// Row axes: optimizer x weight-decay mode (sgd/none, rowwise_adagrad/{none, l2, decoupled}) x
// rounding (rne, sr) x route (short, chunked, fused) x deterministic (1, 0; route short only 1).
// The other axes of a problem rotate with the row index so every value appears: weights dtype
// (sr rows: fp16/bf16), policy family, weighted, pooling, index width, VBE, shared tables,
// max_norm, gradient clipping, non-zero starting momentum.
// Small-table rows (after those): the CUDA small-table histogram path (docs/small-table.md) under
// optimizer (sgd, rowwise_adagrad) x rounding (rne, sr) x histogram (own counts, saved counts),
// the forward judged too.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backend.h"
#include "tbe/backward.h"
#include "tbe/serialized_backend.h"
#include "tbe/judge/row.h"
#include "tbe/judge/section_times.h"
#include "tbe/workloads.h"

namespace tbe::judge {

/// The route a row asks for (BackwardStrategy): short = every run owned by one program
/// (long_run_threshold above every SL); chunked / fused = the long-run paths.
enum class BackwardRoute : std::uint8_t { Short, Chunked, Fused };
std::string to_string(BackwardRoute r);  ///< "short", "chunked", "fused"

/// How a row treats the small-table histogram path (docs/small-table.md).
enum class BackwardHistogram : std::uint8_t {
  Off,    ///< the seed-large slice (no feature is eligible)
  Own,    ///< small-table problem; forward() then backward(): the backward counts again
  Saved,  ///< small-table problem; training_step(): the backward reuses the forward's counts
};
std::string to_string(BackwardHistogram h);  ///< "off", "own", "saved"

/// One backward row.
struct BackwardRowAxes {
  OptimizerKind optimizer = OptimizerKind::ExactSgd;
  WeightDecayMode weight_decay = WeightDecayMode::None;
  bool stochastic_rounding = false;
  BackwardRoute route = BackwardRoute::Short;
  bool deterministic = true;
  // rotated axes
  PolicyKind policy = PolicyKind::SeedDefault;
  DType weights = DType::F32;
  bool weighted = false;
  PoolingMode pooling = PoolingMode::Sum;
  DType index = DType::I64;
  bool vbe = false;
  bool shared_tables = false;
  bool max_norm = false;
  bool clip_gradient = false;
  bool momentum_nonzero = false;
  bool wide_rows = false;  ///< D = 256 instead of seed-large's 128 (block groups on the GPU)
  /// D = 125 instead of 128 (D % 4 != 0: the GPU's scalar column tail; not with wide_rows)
  bool odd_rows = false;
  /// Tables of E = max(65, B·L / 8) rows (mean SL 8 instead of about 1): N / K >= 4, so the CUDA
  /// backward's Auto rule takes the staged short-run kernel instance (docs/backward.md "Work
  /// routing"); D = 128 (not with odd_rows or wide_rows).
  bool dense_rows = false;
  /// Not Off: features 0 and 1 read FP16 tables of 48 x 96 (L = 128) and 64 x 128 (L = 64),
  /// eligible for the small-table path, beside one generic feature (D = 128, L = 20).
  BackwardHistogram histogram = BackwardHistogram::Off;
};

/// The rows in order (40: 4 optimizer/weight-decay pairs x 2 roundings x 5 route/determinism;
/// then 8 small-table rows: sgd / rowwise_adagrad x rne / sr x own / saved counts).
std::vector<BackwardRowAxes> enumerate_backward_rows();
/// The order tbe-verify runs them in (indices into enumerate_backward_rows(), each once): the
/// small-table rows first (short), then the seed-large rows on a diagonal: position p runs
/// optimizer variant p mod 8 (optimizer x weight decay x rounding) on route variant p mod 5, so
/// the first 8 hold every optimizer variant, any 5 consecutive ones every route, and a fault of
/// any optimizer, rounding, route or the histogram path fails within the first rows (the 40
/// pairs each once: 8 and 5 are coprime). Results are reported in row order.
std::vector<std::size_t> backward_row_schedule();

/// "bwd:opt=rowwise_adagrad,wd=l2,round=sr,route=fused,det=1,policy=...,w=fp16,weighted=1,..."
std::string backward_row_label(const BackwardRowAxes& a);

/// The result of one backward row (target Device: the backend under test; SelfCheck: the CPU
/// fallback judged by the oracle, when no GPU).
struct BackwardRowResult {
  BackwardRowAxes axes;
  std::size_t index = 0;  ///< 0-based position in enumerate_backward_rows()
  std::string label;
  RowResult row;
  BackwardStats stats;        ///< of the judged call
  std::int64_t max_segment_length = 0;
  std::int32_t long_run_threshold = 0;
  std::int32_t chunk_size = 0;
  /// Case folder the failing row was written to ("" if none; docs/case-files.md "Backward"), and
  /// why a failing row was not written.
  std::string saved_case;
  std::string save_note;
};

struct BackwardRunnerConfig {
  std::string workload = "seed-large";
  std::int64_t batch = 8192;
  /// Features of the seed-large slice (backward rows update real tables; 8 keeps a row fast).
  std::int64_t features = 8;
  std::uint64_t seed = 1;
  Backend* device = nullptr;  ///< nullptr: CPU self-check rows
  std::string skip_reason;
  /// A failing row is written to `save_failures_dir`/backward-row-<N> as a backward case folder
  /// (the judged problem: the row's, or the C12 problem when only its checks failed; the
  /// backend's outputs or error as `recorded`, expect pass); "" writes nothing. At most
  /// save_failures_max rows per runner.
  std::string save_failures_dir;
  std::int64_t save_failures_max = 4;
};

/// Runs backward rows: the backend's backward judged by the oracle, a second call bitwise
/// identical when deterministic, and for SR rows the aggregate z-test on the row's output and on
/// a C12-shaped problem (quarter-ulp updates: about 25% of the elements must move, RNE would move
/// none); with a device also the intended route's counters > 0 and consistent with the reference
/// transpose (runs and lookups). Small-table rows also judge the forward output (oracle) and
/// require, with a device, the histogram paths: forward.small_table.mma, bwd.small_table (rows
/// updated from the histogram > 0) and, for saved counts, bwd.small_table.saved_counts.
/// Without a device the CPU fallback runs the same checks but the
/// counters (target SelfCheck: it has one path, so the route axis is not exercised).
class BackwardRunner {
 public:
  explicit BackwardRunner(BackwardRunnerConfig cfg);
  /// One row. Safe to call from several threads at once (run_rows does): the device's calls are
  /// serialised, the section times and the saved-failure count are shared under a lock.
  BackwardRowResult run(const BackwardRowAxes& a, std::size_t row_index);
  /// The rows enumerate_backward_rows()[i] for i in `row_indices`, `jobs` rows at a time on host
  /// threads (each with omp_get_max_threads() / jobs OpenMP threads; the device's calls one at a
  /// time; jobs <= 1 runs them in order on this thread). A row's result does not depend on which
  /// rows run beside it (its inputs come from its label and the seed). Returns the results in
  /// the order of `row_indices` and calls on_done (if set) on this thread in that order, as soon
  /// as a row and all rows before it are done. Throws InvalidArgument for an index past the rows.
  std::vector<BackwardRowResult> run_rows(
      const std::vector<std::size_t>& row_indices, int jobs,
      const std::function<void(const BackwardRowResult&)>& on_done = {});
  const BackwardRunnerConfig& config() const { return cfg_; }
  /// Seconds of the rows run so far by section: generation, reference, enclosures, backend (the
  /// calls of the backend under test, transfers included), judge, sr tests; summed over rows
  /// (rows that ran at once overlap, so the sum may exceed the wall time).
  SectionTimes section_times() const;

 private:
  BackwardRunnerConfig cfg_;
  std::mutex device_mutex_;
  std::unique_ptr<SerializedBackend> device_;  ///< cfg_.device under device_mutex_
  mutable std::mutex state_mutex_;             ///< guards the two members below
  std::int64_t saved_failures_ = 0;
  SectionTimes times_;
};
/// Rows run at once by default: omp_get_max_threads() / 5, in [1, 4] (one row keeps about five
/// cores busy: its serial parts and OpenMP regions; 3 on a 16-core machine, 1 on <= 9 cores).
int default_backward_jobs();
/// Device paths the rows must exercise together ("a path never exercised is a failure"):
/// required_paths(PathFamily::Backward) (tbe/judge/path_coverage.h). Returns the ones no device
/// row reported (empty when no device ran or the design did not run whole).
std::vector<std::string> backward_paths_missing(const std::vector<BackwardRowResult>& rows);

/// Table of rows (verdict, worst element, route counters, paths), failures with details, a
/// replay command (`replay_prefix` + " --backward-row N"; "" prints none) and the saved case
/// folder's replay / check commands, and the missing-path failures.
void print_backward_results(std::ostream& os, const std::vector<BackwardRowResult>& rows,
                            bool device_present, const std::string& workload_line,
                            const std::string& replay_prefix = "");
nlohmann::json backward_to_json(const std::vector<BackwardRowResult>& rows);

/// Rows counted like Totals: passed / failed / skipped, device and CPU.
struct BackwardTotals {
  std::int64_t passed = 0, failed = 0, skipped = 0, device_passed = 0;
};
BackwardTotals count_backward_rows(const std::vector<BackwardRowResult>& rows);

}  // namespace tbe::judge
