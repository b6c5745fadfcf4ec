// Small-table histogram path of the CUDA TBE (docs/small-table.md): its knobs, the per-feature
// eligibility report, and the histogram counts a forward saves for the backward.
// Semantics are unchanged (docs/semantics.md, docs/backward.md); only the evaluation differs:
// the forward counts how often each row occurs in each bag and multiplies the counts by the table
// on tensor cores; the backward multiplies the transposed counts by grad_output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tbe::cuda {

/// Which features take the small-table path (ForwardTuning::small_table; the backward follows the
/// forward problem's eligibility with the same knobs, BackwardTuning::small_table: BackwardOp's
/// third constructor argument).
struct SmallTableTuning {
  enum class Mode : std::uint8_t {
    Auto,   ///< eligible features whose expected L >= 64 (tuning::SmallTable::kMinExpectedBagLength)
    Off,    ///< never (every feature on the generic path)
    Force,  ///< every structurally eligible feature, whatever its expected L (tests)
  };
  Mode mode = Mode::Auto;
  /// Expected bag length L for Mode::Auto. > 0: this value for every feature. 0: measured when
  /// the operator is constructed, as the mean L of the feature's bags
  /// ((offsets[(f+1)·B] − offsets[f·B]) / B: one synchronous device-to-host copy of T + 1
  /// offsets; only the choice of path depends on it, never a result). Negative, NaN or infinite:
  /// InvalidArgument "tuning.small_table.expected_bag_length" (ForwardOp::can_implement).
  double expected_bag_length = 0;
};

/// The path's decision for one feature (ForwardOp::small_table_features()).
struct SmallTableFeature {
  std::int32_t feature = 0;
  bool eligible = false;
  /// Why the feature stays on the generic path ("" when eligible), e.g.
  /// "feature 2: E = 100 exceeds 64", "feature 0: expected L = 12.5 is below 64".
  std::string reason;
};

/// What the small-table kernels of the last run did (ForwardOp::small_table_stats() after
/// finish()): bags multiplied on tensor cores, and bags summed directly from the shared-memory
/// table tile (L < 64, or a table tile holding Inf/NaN: docs/small-table.md).
struct SmallTableStats {
  std::int64_t mma_bags = 0;
  std::int64_t direct_bags = 0;
};

/// What the small-table path of the last backward did (BackwardOp::small_table_stats()).
struct SmallTableBackwardStats {
  std::int64_t rows = 0;      ///< rows updated by the tensor-core product (SL >= the path's minimum)
  std::int64_t lookups = 0;   ///< their lookups
  bool saved_counts = false;  ///< the forward's saved counts were used (else its own histogram)
  /// Without the sort (no_sort): rows summed exactly instead of by the tensor-core product
  /// (0 < SL < the path's minimum run, or every row of a table whose histogram is not
  /// representable) and their lookups (docs/small-table.md "Without the sort").
  std::int64_t exact_rows = 0;
  std::int64_t exact_lookups = 0;
  bool no_sort = false;       ///< the lookups were not sorted (BackwardTuning::Sort)
};

/// Histogram counts of one forward, saved for the backward of the same batch ("forward-state
/// reuse"). The caller owns the device buffer; ForwardOp::save_small_table_counts() fills this
/// descriptor, BackwardOp::use_small_table_counts() reads it.
/// Device layout (docs/small-table.md "Saved counts"), per small-table feature j in
/// `features` order: counts [64][B_pad] FP16 (row e, bag b; B_pad = B rounded up to 16, rows
/// >= E and bags >= B zero), then one uint32 flag per feature: 1 when some count of that feature
/// exceeds 2048 (not exact in FP16: the backward takes the generic path for that feature's table,
/// or without the sort sums its rows exactly from the lookups; docs/small-table.md).
struct SmallTableCounts {
  void* data = nullptr;          ///< device buffer of ForwardOp::small_table_counts_bytes() bytes
  std::size_t bytes = 0;         ///< its size
  /// Stamped by the ForwardOp::run() that wrote it: the caller's batch id of that call. The
  /// backward is given the batch id it runs for; a different value is a stale histogram and is
  /// rejected (InvalidArgument "small_table_counts"), never silently used.
  std::uint64_t batch = 0;
  bool written = false;          ///< a run() has written the buffer
  std::int64_t batch_size = 0;   ///< B of the forward that wrote it
  std::vector<std::int32_t> features;  ///< the small-table features, ascending
};

}  // namespace tbe::cuda
