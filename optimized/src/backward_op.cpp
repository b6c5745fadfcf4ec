// Host side of the device-level backward: TransposeOp (bounds check + linearize + sort + RLE),
// BackwardOp (routing, per-sample-weight gradient, short runs, long-run chunks and apply), their
// can_implement, the workspace layouts and finish(). Kernels live in optimized/kernels/backward_*.
#include "tbe/cuda/backward.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/backward_launch.h"
#include "kernels/small_table_launch.h"
#include "src/bounds_describe.h"
#include "src/small_table.h"
#include "tbe/cuda/check.h"
#include "tbe/cuda/workspace.h"
#include "tbe/errors.h"

namespace tbe::cuda {

using detail::DeviceCounters;
using detail::FeatureMeta;
using detail::SegmentMeta;
using detail::SortedValue;

namespace {

/// One device allocation of host-built metadata pieces (kWorkspaceAlignment-aligned).
struct MetaUpload {
  std::vector<char> host;
  std::size_t add(const void* data, std::size_t bytes) {
    const std::size_t at = host.size();
    const char* src = static_cast<const char*>(data);
    host.insert(host.end(), src, src + bytes);
    host.resize(align_up(host.size()), 0);
    return at;
  }
  void* upload(const char* what) {
    void* d = nullptr;
    if (host.empty()) host.resize(kWorkspaceAlignment, 0);
    cuda_check(cudaMalloc(&d, host.size()), what);
    cuda_check(cudaMemcpy(d, host.data(), host.size(), cudaMemcpyHostToDevice), what);
    return d;
  }
};

/// The CUDA backward's limits beyond validate(p) (kBackwardMaxLookups).
Status check_limits(const ForwardProblem& p) {
  if (p.lookups.num_indices > kBackwardMaxLookups)
    return Status::Invalid("lookups.num_indices",
                           "lookups.num_indices: N = " + std::to_string(p.lookups.num_indices) +
                               " exceeds the CUDA backward limit " +
                               std::to_string(kBackwardMaxLookups) + " (2^31 - 1)");
  if (p.lookups.num_offsets - 1 > kBackwardMaxLookups)
    return Status::Invalid("lookups.offsets",
                           "lookups.offsets: " + std::to_string(p.lookups.num_offsets - 1) +
                               " bags exceed the CUDA backward limit " +
                               std::to_string(kBackwardMaxLookups) + " (2^31 - 1)");
  return Status::Ok();
}

/// The run kernels' (weights, accumulation, grad_output) triple of a backward problem.
dispatch::TypeCombo run_combo(const BackwardProblem& p) {
  const PrecisionPolicy& pol = p.forward.options.policy;
  return {p.forward.tables.dtype, pol.accumulation, pol.output};
}

/// A run kernel is compiled for p's types (kCompiledBackward).
Status check_kernels(const BackwardProblem& p) {
  if (!dispatch::contains(dispatch::kCompiledBackward, run_combo(p)))
    return Status::Invalid("options.policy",
                           "options.policy: " + to_string(p.forward.options.policy) +
                               " has no CUDA backward kernel (fp32 weights: fp32 or fp64 "
                               "accumulation; fp16/bf16 weights: fp32 accumulation)");
  return Status::Ok();
}

/// The smallest b >= 1 with 2^b > x (x >= 0): the bits a key up to x needs.
int bits_above(std::int64_t x) {
  int b = 1;
  while (b < 63 && (std::int64_t{1} << b) <= x) ++b;
  return b;
}

/// TransposeTuning::Keys resolved (docs/backward.md "The transpose's keys"): rb > 0 for RowBits
/// keys (t · 2^rb + index), 0 for linearized ids. RowBits is valid when every table's features are
/// consecutive in feature_table_map (then one table's lookups are one contiguous range of
/// positions, so sorting only the row bits keeps each (table, row) contiguous) and rb +
/// bits(T_tables) <= 32 (one sentinel table slot above the tables; rb = bits(max E_t) leaves the
/// row bits 2^rb − 1 free for the sentinel) and K < 2^31 (the runs get 32-bit linearized ids back,
/// RunOrderArgs). Only where asked for (Keys::RowBits; Auto is LinearIds); where it is not valid:
/// InvalidArgument naming "tuning.transpose.keys".
int row_bits_of(const ForwardProblem& p, const TransposeTuning& tuning) {
  using Keys = TransposeTuning::Keys;
  // Auto: linearized ids (RowBits measured no faster on seed-large, docs/backward.md)
  if (tuning.keys != Keys::RowBits || TBE_MUTANT_HOST(kBwdSharedRowsTwice)) return 0;
  const TableBatchView& tables = p.tables;
  std::int64_t K = 0, max_rows = 0;
  for (const std::int64_t e : tables.rows) {
    K += e;
    max_rows = std::max(max_rows, e);
  }
  const int rb = bits_above(max_rows), tb = bits_above(tables.num_tables());
  std::string why;
  std::vector<char> closed(static_cast<std::size_t>(tables.num_tables()), 0);
  for (std::size_t f = 1; f < tables.feature_table_map.size() && why.empty(); ++f) {
    const std::int32_t prev = tables.feature_table_map[f - 1], t = tables.feature_table_map[f];
    if (t == prev) continue;
    closed[static_cast<std::size_t>(prev)] = 1;
    if (closed[static_cast<std::size_t>(t)] && !TBE_MUTANT_HOST(kBwdRowBitsTablesInterleaved))
      why = "table " + std::to_string(t) + "'s features are not consecutive in feature_table_map "
            "(feature " + std::to_string(f) + " comes after another table's)";
  }
  if (why.empty() && K >= (std::int64_t{1} << 31))
    why = "Σ E_t < 2^31 (the runs' keys become 32-bit linearized ids), not " + std::to_string(K);
  if (why.empty() && rb + tb > 32)
    why = std::to_string(rb) + " row bits (max E_t = " + std::to_string(max_rows) + ") + " +
          std::to_string(tb) + " table bits exceed the 32-bit key";
  if (!why.empty())
    throw InvalidArgument("tuning.transpose.keys", "tuning.transpose.keys: RowBits needs " + why);
  return rb;
}

}  // namespace

// ============================================================================================
// TransposePlan: bounds check/repair + linearize + sort + RLE + scan, into a workspace.
// ============================================================================================
struct TransposePlan {
  // --- problem ---
  DType index_dtype{};
  BoundsCheckMode mode{};
  PoolingMode pooling{};
  bool weighted = false;
  const void* indices = nullptr;
  const void* offsets = nullptr;
  const float* psw = nullptr;
  std::int64_t N = 0, num_offsets = 0, num_bags = 0;
  std::int32_t T = 0;
  OutputLayout layout;
  std::vector<std::int64_t> feature_rows;
  std::vector<std::int64_t> table_rows;  ///< E_t (RowBits keys name tables: compatible() compares)
  // --- transpose geometry ---
  std::int64_t sentinel = 0;  ///< K = Σ E_t (the linearized id of the sentinel run)
  std::int64_t max_runs = 0;  ///< upper bound of R: min(N, K + 1)
  bool key32 = true;
  int row_bits = 0;           ///< TransposeTuning::Keys::RowBits: rb (> 0); linearized ids: 0
  std::int64_t sentinel_key = 0;  ///< the key linearize writes for the sentinel run
  int end_bit = 1;
  int digit_bits = 8;         ///< the sort's digit (transpose_digit_bits)
  int run_key_bits = 0, run_digit_bits = 8;  ///< RowBits: the run-order sort's bits and digit
  SortedValue value_kind = SortedValue::Bag;
  // --- device metadata ---
  void* d_meta = nullptr;
  FeatureMeta* d_features = nullptr;
  std::int64_t* d_feature_key_base = nullptr;  ///< [T] LinearizeArgs::feature_key_base
  std::int64_t* d_table_row_offset = nullptr;  ///< [num_tables] linearized id of row 0
  std::int64_t* d_feature_first_bag = nullptr;
  // --- workspace layout (byte offsets) ---
  std::size_t ws_counters = 0, ws_offsets = 0, ws_scan = 0, scan_bytes = 0, ws_keys_in = 0,
              ws_keys_out = 0, ws_vals_in = 0, ws_vals_out = 0, ws_pos_bag = 0, ws_pos_scale = 0,
              ws_run_keys = 0, ws_run_lengths = 0, ws_run_offsets = 0, ws_num_runs = 0,
              ws_perm_in = 0, ws_perm_out = 0,
              ws_temp = 0, temp_bytes = 0, ws_total = 0;
  std::size_t ws_bounds_total = 0;  ///< the bounds part alone (counters, offsets, scan): enqueue_bounds

  /// p passed TransposeOp::can_implement; `tuning` is checked here, before any allocation.
  TransposePlan(const ForwardProblem& p, const TransposeTuning& tuning) {
    index_dtype = p.lookups.index_dtype;
    mode = p.options.bounds_check;
    pooling = p.options.pooling;
    weighted = p.lookups.weighted();
    indices = p.lookups.indices;
    offsets = p.lookups.offsets;
    psw = p.lookups.per_sample_weights;
    N = p.lookups.num_indices;
    num_offsets = p.lookups.num_offsets;
    num_bags = num_offsets - 1;
    T = static_cast<std::int32_t>(p.tables.num_features());
    layout = make_output_layout(p);

    table_rows.assign(p.tables.rows.begin(), p.tables.rows.end());
    std::vector<std::int64_t> table_row_offset(p.tables.num_tables());
    std::int64_t K = 0;
    for (std::int64_t t = 0; t < p.tables.num_tables(); ++t) {
      table_row_offset[t] = K;
      K += p.tables.rows[t];
    }
    sentinel = K;
    // mutation build, bwd_shared_rows_twice: 64-bit keys (feature << 40 | row), every bit sorted,
    // up to N runs
    key32 = K < (std::int64_t{1} << 31) && !TBE_MUTANT_HOST(kBwdSharedRowsTwice);
    const std::int64_t sort_range =
        TBE_MUTANT_HOST(kBwdSortEndBitMaxTable) && p.tables.num_tables() > 0
            ? *std::max_element(p.tables.rows.begin(), p.tables.rows.end())
            : K;
    end_bit = bits_above(sort_range);
    if (TBE_MUTANT_HOST(kBwdSharedRowsTwice)) end_bit = 64;
    digit_bits = key32 ? detail::transpose_digit_bits(end_bit) : 8;
    sentinel_key = K;
    std::vector<std::int64_t> key_base = table_row_offset;  // per table, linearized ids
    if (const int rb = row_bits_of(p, tuning); rb > 0) {  // (K < 2^31: key32 already)
      row_bits = rb;
      end_bit = rb;
      digit_bits = detail::transpose_digit_bits(rb);
      sentinel_key = (p.tables.num_tables() << rb) | ((std::int64_t{1} << rb) - 1);
      run_key_bits = bits_above(sentinel_key);
      run_digit_bits = detail::transpose_digit_bits(run_key_bits);
      for (std::size_t t = 0; t < key_base.size(); ++t)
        key_base[t] = static_cast<std::int64_t>(t) << rb;
    }
    value_kind = pooling == PoolingMode::None ? SortedValue::Position
                 : (weighted || pooling == PoolingMode::Mean) ? SortedValue::PositionScaled
                                                              : SortedValue::Bag;

    std::vector<FeatureMeta> features(T);
    std::vector<std::int64_t> feature_key_base(T);
    for (std::int32_t f = 0; f < T; ++f) {
      const std::int32_t t = p.tables.feature_table_map[f];
      features[f] = FeatureMeta{p.tables.table_offsets[t], p.tables.rows[t], p.tables.dims[t], 0};
      feature_key_base[f] = key_base[t];
      feature_rows.push_back(p.tables.rows[t]);
    }
    MetaUpload up;
    const std::size_t o_feat = up.add(features.data(), features.size() * sizeof(FeatureMeta));
    const std::size_t o_fro = up.add(feature_key_base.data(), feature_key_base.size() * 8);
    const std::size_t o_ffb =
        up.add(layout.feature_bag_offset.data(), layout.feature_bag_offset.size() * 8);
    const std::size_t o_tro = up.add(table_row_offset.data(), table_row_offset.size() * 8);
    d_meta = up.upload("upload transpose metadata");
    char* base = static_cast<char*>(d_meta);
    d_features = reinterpret_cast<FeatureMeta*>(base + o_feat);
    d_feature_key_base = reinterpret_cast<std::int64_t*>(base + o_fro);
    d_feature_first_bag = reinterpret_cast<std::int64_t*>(base + o_ffb);
    d_table_row_offset = reinterpret_cast<std::int64_t*>(base + o_tro);

    const std::size_t isz = dtype_size(index_dtype);
    const std::size_t ksz = key32 ? 4 : 8;
    const std::size_t n = static_cast<std::size_t>(N);
    const bool scaled = value_kind == SortedValue::PositionScaled;
    WorkspaceLayout L;
    ws_counters = L.add(sizeof(DeviceCounters));
    ws_offsets = L.add(static_cast<std::size_t>(num_offsets) * isz);
    scan_bytes = detail::offsets_scan_temp_bytes(index_dtype, num_offsets);
    ws_scan = L.add(scan_bytes);
    ws_bounds_total = L.total;
    ws_keys_in = L.add(n * ksz);
    ws_keys_out = L.add(n * ksz);
    ws_vals_in = L.add(n * 4);
    ws_vals_out = L.add(n * 4);
    ws_pos_bag = L.add(scaled ? n * 4 : 0);
    ws_pos_scale = L.add(scaled ? n * 8 : 0);
    // R <= min(N, K + 1): distinct rows plus the sentinel run
    max_runs = TBE_MUTANT_HOST(kBwdSharedRowsTwice) ? N : std::min<std::int64_t>(N, K + 1);
    const std::size_t r = static_cast<std::size_t>(max_runs);
    ws_run_keys = L.add(r * ksz);
    ws_run_lengths = L.add(r * 4);
    ws_run_offsets = L.add((r + 1) * 4);
    ws_num_runs = L.add(sizeof(std::int32_t));
    // RowBits: the run order's permutation (the sort's other scratch and the reordered lengths
    // and offsets reuse the lookups' sort buffers, free by then: RunOrderArgs)
    ws_perm_in = L.add(row_bits > 0 ? r * 4 : 0);
    ws_perm_out = L.add(row_bits > 0 ? r * 4 : 0);
    temp_bytes = N > 0 ? detail::transpose_temp_bytes(key32, N, digit_bits) : 0;
    if (row_bits > 0 && N > 0)
      temp_bytes = std::max(temp_bytes, detail::sort_pairs32_temp_bytes(max_runs, run_digit_bits));
    ws_temp = L.add(temp_bytes);
    ws_total = L.total;
  }
  ~TransposePlan() {
    if (d_meta != nullptr) cudaFree(d_meta);
  }
  TransposePlan(const TransposePlan&) = delete;
  TransposePlan& operator=(const TransposePlan&) = delete;

  DeviceCounters* counters(char* ws) const { return reinterpret_cast<DeviceCounters*>(ws + ws_counters); }
  bool repairs() const { return mode == BoundsCheckMode::Warning || mode == BoundsCheckMode::Ignore; }
  /// The offsets the kernels use: repaired under WARNING/IGNORE, else the raw ones.
  const void* bag_offsets(char* ws) const { return repairs() ? ws + ws_offsets : offsets; }
  const unsigned long long* abort_key(char* ws) const {
    return mode == BoundsCheckMode::Fatal ? &counters(ws)->fatal_key : nullptr;
  }
  std::string sort_path() const { return key32 ? "bwd.sort.key32" : "bwd.sort.key64"; }
  std::string keys_path() const { return row_bits > 0 ? "bwd.sort.row_bits" : "bwd.sort.linear_ids"; }

  /// The bounds part: counters reset, then the FATAL check or the offsets repair and bad-bag count
  /// (bad indices are counted by whoever reads them next: linearize, or the small-table kernels).
  void enqueue_bounds(char* ws, cudaStream_t s) const {
    DeviceCounters* c = counters(ws);
    cuda_check(cudaMemsetAsync(c, 0, sizeof(DeviceCounters), s), "reset counters");
    cuda_check(cudaMemsetAsync(&c->fatal_key, 0xff, sizeof(unsigned long long), s),
               "reset fatal key");
    if (mode == BoundsCheckMode::Fatal) {
      detail::launch_fatal_check(index_dtype, indices, offsets, N, d_features, d_feature_first_bag,
                                 T, num_bags, c, s);
    } else if (repairs()) {
      detail::launch_offsets_repair(index_dtype, offsets, num_offsets, N, ws + ws_offsets,
                                    ws + ws_scan, scan_bytes, c, s);
      detail::launch_count_bad_bags(index_dtype, offsets, ws + ws_offsets, num_bags, c, s);
    }
  }

  /// Bounds part, then linearize + sort + RLE.
  void enqueue(char* ws, cudaStream_t s) const {
    enqueue_bounds(ws, s);
    DeviceCounters* c = counters(ws);
    detail::LinearizeArgs a;
    a.indices = indices;
    a.offsets = bag_offsets(ws);
    a.per_sample_weights = psw;
    a.features = d_features;
    a.feature_key_base = d_feature_key_base;
    a.feature_first_bag = d_feature_first_bag;
    a.num_features = T;
    a.num_bags = num_bags;
    a.N = N;
    a.sentinel = sentinel_key;
    a.value_kind = value_kind;
    a.mean = pooling == PoolingMode::Mean;
    a.check_indices = repairs();
    a.keys = ws + ws_keys_in;
    a.values = reinterpret_cast<std::uint32_t*>(ws + ws_vals_in);
    a.pos_bag = reinterpret_cast<std::int32_t*>(ws + ws_pos_bag);
    a.pos_scale = reinterpret_cast<double*>(ws + ws_pos_scale);
    a.counters = c;
    a.abort_key = abort_key(ws);
    detail::launch_linearize(index_dtype, key32, a, s);
    detail::SortRleArgs r;
    r.key32 = key32;
    r.end_bit = end_bit;
    r.digit_bits = digit_bits;
    r.n = N;
    r.max_runs = max_runs;
    r.keys_in = ws + ws_keys_in;
    r.keys_out = ws + ws_keys_out;
    r.values_in = reinterpret_cast<std::uint32_t*>(ws + ws_vals_in);
    r.values_out = reinterpret_cast<std::uint32_t*>(ws + ws_vals_out);
    r.run_keys = ws + ws_run_keys;
    r.run_lengths = reinterpret_cast<std::int32_t*>(ws + ws_run_lengths);
    r.run_offsets = reinterpret_cast<std::uint32_t*>(ws + ws_run_offsets);
    r.num_runs = reinterpret_cast<std::int32_t*>(ws + ws_num_runs);
    r.temp = ws + ws_temp;
    r.temp_bytes = temp_bytes;
    detail::launch_sort_rle(r, s);
    if (row_bits > 0 && N > 0) {  // the runs back in (table, row) order, keys as linearized ids
      detail::RunOrderArgs o;
      o.row_bits = row_bits;
      o.num_tables = static_cast<std::int32_t>(table_rows.size());
      o.table_row_offset = d_table_row_offset;
      o.sentinel = sentinel;
      o.max_runs = max_runs;
      o.num_runs = r.num_runs;
      o.run_keys = static_cast<std::uint32_t*>(r.run_keys);
      o.run_lengths = r.run_lengths;
      o.run_offsets = r.run_offsets;
      o.lengths_out = run_lengths_at(ws);
      o.offsets_out = run_offsets_at(ws);
      o.sort_keys_in = reinterpret_cast<std::uint32_t*>(ws + ws_keys_in);
      o.sort_keys_out = reinterpret_cast<std::uint32_t*>(ws + ws_keys_out);
      o.perm_in = reinterpret_cast<std::uint32_t*>(ws + ws_perm_in);
      o.perm_out = reinterpret_cast<std::uint32_t*>(ws + ws_perm_out);
      o.end_bit = run_key_bits;
      o.digit_bits = run_digit_bits;
      o.temp = ws + ws_temp;
      o.temp_bytes = temp_bytes;
      detail::launch_runs_to_table_order(o, s);
    }
  }

  /// The runs' lengths and offsets the run kernels read: the RLE's and the scan's, or (RowBits)
  /// the ones in (table, row) order, written over the lookups' sort input (free by then).
  std::int32_t* run_lengths_at(char* ws) const {
    return reinterpret_cast<std::int32_t*>(ws + (row_bits > 0 ? ws_keys_in : ws_run_lengths));
  }
  std::uint32_t* run_offsets_at(char* ws) const {
    return reinterpret_cast<std::uint32_t*>(ws + (row_bits > 0 ? ws_vals_in : ws_run_offsets));
  }

  /// Same lookups and transpose geometry (for a hoisted SortedLookups).
  bool compatible(const TransposePlan& o) const {
    return index_dtype == o.index_dtype && mode == o.mode && pooling == o.pooling &&
           weighted == o.weighted && indices == o.indices && offsets == o.offsets &&
           psw == o.psw && N == o.N && num_offsets == o.num_offsets && sentinel == o.sentinel &&
           value_kind == o.value_kind && T == o.T && table_rows == o.table_rows &&
           feature_rows == o.feature_rows;  // (the keys may differ: the run arrays do not)
  }
};

Status TransposeOp::can_implement(const ForwardProblem& p) {
  if (Status s = validate(p); !s.ok()) return s;
  return check_limits(p);
}

TransposeOp::TransposeOp(const ForwardProblem& p, const TransposeTuning& tuning) {
  throw_if_error(can_implement(p));
  plan_ = std::make_unique<TransposePlan>(p, tuning);
}
TransposeOp::~TransposeOp() = default;
TransposeOp::TransposeOp(TransposeOp&&) noexcept = default;
TransposeOp& TransposeOp::operator=(TransposeOp&&) noexcept = default;
std::size_t TransposeOp::workspace_bytes() const { return plan_->ws_total; }

void TransposeOp::run(void* d_workspace, cudaStream_t stream) {
  plan_->enqueue(static_cast<char*>(d_workspace), stream);
  last_workspace_ = static_cast<char*>(d_workspace);
}

SortedLookups TransposeOp::sorted() const {
  return SortedLookups{plan_.get(), last_workspace_};
}

// ============================================================================================
// BackwardPlan
// ============================================================================================
namespace {
/// The run kernels' group size for tables of D columns (lane l owns columns [4l, 4l + 4)).
int group_size_of(std::int32_t d) {
  constexpr int kCols = tuning::RunKernels::kColumnsPerLane;
  return std::max(1, next_pow2((d + kCols - 1) / kCols));
}

/// The knobs of BackwardTuning::RunLaunch and ShortGroups: InvalidArgument naming the field for a
/// value out of range (interleave_chunk_every) or a launch the other knobs (or the problem's D)
/// exclude.
void check_run_launch(const ForwardProblem& f, const BackwardTuning& knobs) {
  using RunLaunch = BackwardTuning::RunLaunch;
  if (knobs.short_groups == BackwardTuning::ShortGroups::PerDim) {
    if (knobs.run_launch == RunLaunch::Interleaved)
      throw InvalidArgument("tuning.short_groups",
                            "tuning.short_groups: PerDim takes the short runs in launches of their "
                            "own, which tuning.run_launch = Interleaved excludes");
    std::int32_t dmax = 1;
    for (std::int64_t fi = 0; fi < f.tables.num_features(); ++fi)
      dmax = std::max(dmax, f.tables.dims[f.tables.feature_table_map[fi]]);
    if (group_size_of(dmax) > tuning::kWarpThreads)
      throw InvalidArgument("tuning.short_groups",
                            "tuning.short_groups: PerDim runs warp groups (D <= " +
                                std::to_string(tuning::kWarpThreads * tuning::RunKernels::kColumnsPerLane) +
                                "); this call's largest D is " + std::to_string(dmax));
  }
  if (knobs.interleave_chunk_every < 1 || knobs.interleave_chunk_every > 64)
    throw InvalidArgument("tuning.interleave_chunk_every",
                          "tuning.interleave_chunk_every: " + std::to_string(knobs.interleave_chunk_every) +
                              " is outside [1, 64]");
  if (knobs.run_launch != RunLaunch::Interleaved) return;
  if (knobs.chunk_schedule == BackwardTuning::ChunkSchedule::Static)
    throw InvalidArgument("tuning.run_launch",
                          "tuning.run_launch: Interleaved takes the chunks from a device counter, "
                          "which tuning.chunk_schedule = Static excludes");
  if (knobs.short_runs == BackwardTuning::ShortRuns::Registers)
    throw InvalidArgument("tuning.run_launch",
                          "tuning.run_launch: Interleaved runs the staged short-run instance, "
                          "which tuning.short_runs = Registers excludes");
}
}  // namespace

struct BackwardPlan {
  TransposePlan transpose;
  detail::RunTypes types{};
  detail::RunArgs run{};          ///< filled at construction; per-call pointers set by run()
  detail::PswGradArgs psw{};
  DType accumulation{};
  bool adagrad = false, want_sr = false;
  BackwardStrategy strategy;
  std::int64_t max_long = 0, max_chunks = 0;
  int route_grid = 1;
  // --- device metadata ---
  void* d_meta = nullptr;
  // --- workspace (backward part) ---
  std::size_t ws_counters = 0, ws_long = 0, ws_chunk_run = 0, ws_run_counters = 0,
              ws_partials = 0, ws_chunk_keys = 0, ws_chunk_keys_out = 0, ws_chunk_ids = 0,
              ws_chunk_order = 0, ws_chunk_temp = 0, chunk_temp_bytes = 0, ws_total = 0;
  int chunk_key_bits = 32;
  bool chunk_order_one_cta = false;  ///< BackwardTuning::ChunkOrder resolved
  bool interleaved = false;          ///< BackwardTuning::RunLaunch resolved
  /// BackwardTuning::ShortGroups resolved: one short-run launch per group size (dim_classes,
  /// their tables at d_class_tables + first), after the table-range search into ws_table_runs
  bool per_dim = false;
  struct DimClass {
    std::int32_t group_size, first, count;
  };
  std::vector<DimClass> dim_classes;
  const std::int32_t* d_class_tables = nullptr;
  std::size_t ws_table_runs = 0;
  // --- problem pointers ---
  BackwardProblem problem;
  // --- last run ---
  cudaStream_t stream = nullptr;
  char* workspace = nullptr;
  const TransposePlan* used_transpose = nullptr;
  char* transpose_ws = nullptr;
  bool ran = false, hoisted = false, psw_ran = false;
  /// No sort (BackwardTuning::Sort::Auto and every feature takes the small-table path): the
  /// bounds part of the transpose, then the small-table kernels alone (docs/small-table.md
  /// "Without the sort").
  bool no_sort = false;
  bool split_k_warp = false;  ///< BackwardTuning::SplitK::Warp
  // --- small-table histogram path (docs/small-table.md) ---
  std::vector<SmallTableFeature> small_decision;
  std::vector<std::int32_t> small_features;
  detail::SmallFeatureMeta* d_small = nullptr;
  std::int64_t small_batch = 0;
  std::int32_t small_blocks = 0;     ///< split-K blocks per feature (P)
  std::int32_t small_block_tiles = 0;  ///< 16-bag k-tiles per split-K block
  std::int64_t small_min_run = 0;    ///< SL from which the histogram path owns a row
  std::size_t ws_small_counts = 0, ws_small_partials = 0, ws_small_sl = 0, ws_small_scratch = 0;
  const SmallTableCounts* saved_counts = nullptr;
  std::uint64_t saved_batch = 0;
  bool used_saved = false;
  SmallTableBackwardStats small_stats;
  cudaEvent_t* phase_events = nullptr;
  void phase(int i, cudaStream_t s) const {
    if (phase_events != nullptr) cuda_check(cudaEventRecord(phase_events[i], s), "record phase event");
  }

  /// p and s passed BackwardOp::can_implement.
  explicit BackwardPlan(const BackwardProblem& p, const BackwardStrategy& s,
                        const BackwardTuning& knobs)
      : transpose((check_run_launch(p.forward, knobs), p.forward), knobs.transpose) {
    // (check_run_launch and the transpose's keys are checked before anything is allocated)
    const SmallTableTuning& small = knobs.small_table;
    problem = p;
    strategy = s;
    const ForwardProblem& f = p.forward;
    const PrecisionPolicy& pol = f.options.policy;
    accumulation = pol.accumulation;
    adagrad = p.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad;
    want_sr = pol.write_back == RoundingMode::Stochastic && f.tables.dtype != DType::F32;

    // --- tables (linearized row offsets) and groups ---
    const std::int64_t num_tables = f.tables.num_tables();
    std::vector<detail::BwdTableMeta> tables(num_tables);
    std::int64_t K = 0;
    for (std::int64_t t = 0; t < num_tables; ++t) {
      tables[t] = detail::BwdTableMeta{K, f.tables.table_offsets[t], f.tables.dims[t], -1};
      K += f.tables.rows[t];
    }
    small_decision = detail::small_table_eligibility(f, small);
    const std::vector<detail::SmallFeatureMeta> small_meta =
        detail::small_table_meta(f, small_decision);
    for (const SmallTableFeature& d : small_decision) {
      if (!d.eligible) continue;
      tables[f.tables.feature_table_map[d.feature]].small_slot =
          static_cast<std::int32_t>(small_features.size());
      small_features.push_back(d.feature);
    }
    small_batch = f.lookups.is_vbe() ? 0 : f.lookups.batch_size;
    split_k_warp = knobs.split_k == BackwardTuning::SplitK::Warp;
    no_sort = knobs.sort == BackwardTuning::Sort::Auto && !small_features.empty() &&
              static_cast<std::int64_t>(small_features.size()) == f.tables.num_features();
    // split-K, per feature P blocks of T_b whole k-tiles: at least kBackwardTargetBlocks blocks
    // over the features (the k-loop is latency-bound) and at least sqrt(tiles) per feature, so
    // that neither T_b nor P, and hence the minimum run 42 + T_b + P, grows with B alone (many
    // features at a large B would otherwise get one block of every tile each)
    const std::int64_t k_tiles = detail::small_table_padded_bags(small_batch) / 16;
    if (!small_features.empty() && k_tiles > 0) {
      const auto ns = static_cast<std::int64_t>(small_features.size());
      std::int64_t root = 1;
      while (root * root < k_tiles) ++root;
      const std::int64_t want = std::min(
          k_tiles, std::max(root, (tuning::SmallTable::kBackwardTargetBlocks + ns - 1) / ns));
      small_block_tiles = static_cast<std::int32_t>((k_tiles + want - 1) / want);
      small_blocks = static_cast<std::int32_t>((k_tiles + small_block_tiles - 1) / small_block_tiles);
    }
    // docs/oracle.md "Small-table histogram path": rows with SL - 1 >= 41 + tiles + blocks are
    // inside the B.1 enclosure; shorter rows take the generic run kernels
    small_min_run = 42 + small_block_tiles + small_blocks;
    constexpr int kCols = tuning::RunKernels::kColumnsPerLane;  // one vector per lane
    std::int32_t dmax = 1;
    bool all_d4 = true, all_off4 = true;
    for (std::int64_t fi = 0; fi < f.tables.num_features(); ++fi) {
      const std::int32_t t = f.tables.feature_table_map[fi];
      dmax = std::max(dmax, f.tables.dims[t]);
      all_d4 = all_d4 && f.tables.dims[t] % kCols == 0;
      all_off4 = all_off4 && f.tables.table_offsets[t] % kCols == 0;
    }
    const int G = group_size_of(dmax);
    types = detail::RunTypes{f.tables.dtype, accumulation, pol.output, G > tuning::kWarpThreads};
    // --- short-run group sizes (BackwardTuning::ShortGroups): the tables the features read, by G
    std::vector<bool> read(static_cast<std::size_t>(num_tables), false);
    for (std::int64_t fi = 0; fi < f.tables.num_features(); ++fi) read[f.tables.feature_table_map[fi]] = true;
    std::vector<std::int32_t> class_tables;  // grouped by ascending G, tables in order inside
    for (int cg = 1; cg <= G; cg *= 2) {
      const auto first = static_cast<std::int32_t>(class_tables.size());
      for (std::int64_t t = 0; t < num_tables; ++t)
        if (read[t] && group_size_of(f.tables.dims[t]) == cg) class_tables.push_back(static_cast<std::int32_t>(t));
      const auto count = static_cast<std::int32_t>(class_tables.size()) - first;
      if (count > 0) dim_classes.push_back(DimClass{cg, first, count});
    }
    using ShortGroups = BackwardTuning::ShortGroups;
    per_dim = !types.block_group &&
              (knobs.short_groups == ShortGroups::PerDim ||
               (knobs.short_groups == ShortGroups::Auto && dim_classes.size() >= 2 &&
                knobs.run_launch != BackwardTuning::RunLaunch::Interleaved));

    // --- output segments (bag -> grad_output row), as the forward ---
    const OutputLayout& lay = transpose.layout;
    std::vector<std::int64_t> seg_first;
    std::vector<SegmentMeta> segs;
    if (f.lookups.is_vbe()) {
      const std::int32_t R = f.lookups.vbe_ranks;
      for (std::int32_t fi = 0; fi < transpose.T; ++fi)
        for (std::int32_t r = 0; r < R; ++r) {
          const std::size_t i = TBE_MUTANT_HOST(kBwdVbeRankFeatureSwapped)
                                    ? static_cast<std::size_t>(r) * transpose.T + fi
                                    : static_cast<std::size_t>(fi) * R + r;
          seg_first.push_back(lay.vbe_bag_offset[i]);
          segs.push_back(SegmentMeta{lay.vbe_output_offset[i], f.tables.dim_of_feature(fi), fi, 0});
        }
    } else {
      for (std::int32_t fi = 0; fi < transpose.T; ++fi) {
        seg_first.push_back(lay.feature_bag_offset[fi]);
        segs.push_back(SegmentMeta{lay.feature_col_offset[fi], lay.total_dim, fi, 0});
      }
    }
    MetaUpload up;
    const std::size_t o_tab = up.add(tables.data(), tables.size() * sizeof(detail::BwdTableMeta));
    const std::size_t o_sfb = up.add(seg_first.data(), seg_first.size() * 8);
    const std::size_t o_seg = up.add(segs.data(), segs.size() * sizeof(SegmentMeta));
    const std::size_t o_small =
        up.add(small_meta.data(), small_meta.size() * sizeof(detail::SmallFeatureMeta));
    const std::size_t o_class = up.add(class_tables.data(), class_tables.size() * 4);
    d_meta = up.upload("upload backward metadata");
    char* base = static_cast<char*>(d_meta);
    d_small = reinterpret_cast<detail::SmallFeatureMeta*>(base + o_small);
    d_class_tables = reinterpret_cast<const std::int32_t*>(base + o_class);

    // --- run kernel arguments (constant part) ---
    detail::RunArgs& a = run;
    a.key32 = transpose.key32;  // (a hoisted transpose has the same K: compatible())
    a.sentinel = transpose.sentinel;
    a.value_kind = transpose.value_kind;
    a.grad_output = p.grad_output;
    a.seg_first_bag = reinterpret_cast<std::int64_t*>(base + o_sfb);
    a.segs = reinterpret_cast<SegmentMeta*>(base + o_seg);
    a.num_segs = static_cast<std::int32_t>(segs.size());
    a.num_bags = transpose.num_bags;
    a.bags_per_segment = f.lookups.is_vbe() ? 0 : f.lookups.batch_size;
    a.none_dim = f.options.pooling == PoolingMode::None ? dmax : 0;
    const std::size_t osz = dtype_size(pol.output), wsz = dtype_size(f.tables.dtype);
    a.grad_vec = all_d4 && (reinterpret_cast<std::uintptr_t>(p.grad_output) % (kCols * osz)) == 0;
    a.tables = reinterpret_cast<detail::BwdTableMeta*>(base + o_tab);
    a.num_tables = static_cast<std::int32_t>(num_tables);
    a.weights_in = f.tables.weights;
    a.weights_vec = all_d4 && all_off4 &&
                    (reinterpret_cast<std::uintptr_t>(f.tables.weights) % (kCols * wsz)) == 0;
    a.momentum_in = p.momentum;
    const OptimizerConfig& o = p.options.optimizer;
    a.adagrad = adagrad;
    a.wd_mode = o.weight_decay_mode == WeightDecayMode::L2 ? 1
                : o.weight_decay_mode == WeightDecayMode::Decoupled ? 2 : 0;
    a.lr = static_cast<float>(o.learning_rate);  // RNE: effective_hyper_parameter
    a.eps = static_cast<float>(o.eps);
    a.weight_decay = static_cast<float>(o.weight_decay);
    a.max_norm = static_cast<float>(o.max_norm);
    a.max_gradient = static_cast<float>(o.max_gradient);
    a.stochastic = want_sr;
    a.sr_seed = p.options.sr_seed;
    a.sr_offset = p.options.sr_offset;
    a.long_threshold = s.long_run_threshold;
    a.chunk_size = s.chunk_size;
    a.fused = s.long_runs == BackwardStrategy::LongRuns::Fused;
    a.deterministic = s.deterministic;
    a.row_stride = (dmax + kCols - 1) / kCols * kCols;
    a.acc_size = static_cast<std::int32_t>(dtype_size(accumulation));
    a.group_size = G;
    a.per_dim = per_dim;

    const std::int64_t N = transpose.N;
    // the short-run kernel instance (BackwardTuning::ShortRuns; block groups have one instance)
    using ShortRuns = BackwardTuning::ShortRuns;
    const double lookups_per_row = K > 0 ? static_cast<double>(N) / static_cast<double>(K) : 0.0;
    const bool staged_short =
        knobs.short_runs == ShortRuns::Staged ||
        (knobs.short_runs == ShortRuns::Auto &&
         lookups_per_row >= tuning::RunKernels::kShortStagedMinLookupsPerRow);
    a.short_staged = staged_short && !types.block_group && tuning::RunKernels::kShortStageRows > 0;
    a.dynamic_chunks = knobs.chunk_schedule == BackwardTuning::ChunkSchedule::Dynamic;
    // one launch for short runs and chunks (BackwardTuning::RunLaunch; knobs checked above):
    // where the staged short-run instance runs (its ring serves both work items)
    using RunLaunch = BackwardTuning::RunLaunch;
    interleaved = tuning::RunKernels::kOneLaunchRing && a.short_staged && !per_dim &&
                  (knobs.run_launch == RunLaunch::Interleaved ||
                   (knobs.run_launch == RunLaunch::Auto && a.dynamic_chunks));
    a.interleave_chunk_every = knobs.interleave_chunk_every;

    // --- workspace (backward part): counters | long runs | chunk->run | counters | partials ---
    max_long = N / s.long_run_threshold + 1;
    max_chunks = N / s.chunk_size + max_long + 1;
    a.max_long = static_cast<std::uint32_t>(max_long);
    a.max_chunks = static_cast<std::uint32_t>(max_chunks);
    WorkspaceLayout L;
    ws_counters = L.add(sizeof(detail::BackwardDeviceCounters));
    ws_long = L.add(static_cast<std::size_t>(max_long) * sizeof(detail::LongRun));
    ws_chunk_run = L.add(static_cast<std::size_t>(max_chunks) * 4);
    ws_run_counters = L.add(static_cast<std::size_t>(max_long) * 4);
    const std::size_t rows = static_cast<std::size_t>(s.deterministic ? max_chunks : max_long);
    ws_partials = L.add(rows * a.row_stride * dtype_size(accumulation));
    const std::size_t mc = static_cast<std::size_t>(max_chunks);
    ws_chunk_keys = L.add(mc * 4);
    ws_chunk_keys_out = L.add(mc * 4);
    ws_chunk_ids = L.add(mc * 4);
    ws_chunk_order = L.add(mc * 4);
    // the chunk-order sort (BackwardTuning::ChunkOrder): one CTA when the slots fit
    using ChunkOrder = BackwardTuning::ChunkOrder;
    const bool fits = max_chunks <= tuning::Preprocess::kChunkOrderOneCtaSlots;
    if (knobs.chunk_order == ChunkOrder::OneCta && !fits)
      throw InvalidArgument("tuning.chunk_order",
                            "tuning.chunk_order: OneCta sorts at most " +
                                std::to_string(tuning::Preprocess::kChunkOrderOneCtaSlots) +
                                " chunk slots; this call has " + std::to_string(max_chunks) +
                                " (N = " + std::to_string(N) + ")");
    chunk_order_one_cta = knobs.chunk_order == ChunkOrder::OneCta ||
                          (knobs.chunk_order == ChunkOrder::Auto && fits);
    chunk_temp_bytes = detail::sort_pairs32_temp_bytes(max_chunks, 8);  // CUB's own digit
    ws_chunk_temp = L.add(chunk_temp_bytes);
    const auto ns = static_cast<std::size_t>(small_features.size());
    const std::size_t small_tiles = ns * static_cast<std::size_t>(small_blocks);
    ws_small_counts = L.add(detail::small_table_counts_bytes(static_cast<std::int64_t>(ns), small_batch));
    ws_small_partials = L.add(small_tiles * tuning::SmallTable::kMaxRows *
                              tuning::SmallTable::kMaxDim * sizeof(float));
    ws_small_sl = L.add(small_tiles * tuning::SmallTable::kMaxRows * sizeof(std::int32_t));
    ws_small_scratch = L.add(ns > 0 ? sizeof(DeviceCounters) : 0);
    ws_table_runs = L.add(per_dim ? static_cast<std::size_t>(num_tables + 1) * 4 : 0);
    ws_total = L.total;
    // key bits: sorted values are < max(N, bags) < 2^31; unused slots hold 0xffffffff
    chunk_key_bits = 32;

    int dev = 0, sms = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
    constexpr int kRouteBlock = tuning::Preprocess::kBlockThreads;
    route_grid = static_cast<int>(std::max<std::int64_t>(
        1, std::min<std::int64_t>((N + kRouteBlock - 1) / kRouteBlock,
                                  static_cast<std::int64_t>(sms) *
                                      tuning::Preprocess::kRouteBlocksPerSm)));

    // --- per-sample-weight gradient arguments (constant part) ---
    psw.weights = f.tables.weights;
    psw.indices = f.lookups.indices;
    psw.grad_output = p.grad_output;
    psw.features = transpose.d_features;
    psw.seg_first_bag = a.seg_first_bag;
    psw.segs = a.segs;
    psw.num_segs = a.num_segs;
    psw.num_bags = a.num_bags;
    psw.bags_per_segment = a.bags_per_segment;
    psw.N = N;
    psw.mean = f.options.pooling == PoolingMode::Mean;
    psw.check_indices = transpose.repairs();
    psw.max_gradient = a.max_gradient;
    psw.group_size = std::min(tuning::kWarpThreads, G);
  }
  ~BackwardPlan() {
    if (d_meta != nullptr) cudaFree(d_meta);
  }
};

Status BackwardOp::can_implement(const BackwardProblem& p, const BackwardStrategy& s) {
  if (Status st = validate(p, s); !st.ok()) return st;
  if (Status st = check_limits(p.forward); !st.ok()) return st;
  return check_kernels(p);
}

Status BackwardOp::can_implement(const BackwardProblem& p, const BackwardStrategy& s,
                                 const BackwardOutputs& out) {
  if (Status st = validate(p, s); !st.ok()) return st;
  if (Status st = validate(p, out); !st.ok()) return st;
  if (Status st = check_limits(p.forward); !st.ok()) return st;
  return check_kernels(p);
}

BackwardOp::BackwardOp(const BackwardProblem& p, const BackwardStrategy& s)
    : BackwardOp(p, s, BackwardTuning{}) {}
BackwardOp::BackwardOp(const BackwardProblem& p, const BackwardStrategy& s,
                       const BackwardTuning& knobs) {
  throw_if_error(can_implement(p, s));
  plan_ = std::make_unique<BackwardPlan>(p, s, knobs);
}
BackwardOp::BackwardOp(const BackwardProblem& p, Validated, const BackwardStrategy& s,
                       const BackwardTuning& knobs)
    : plan_(std::make_unique<BackwardPlan>(p, s, knobs)) {}
BackwardOp::~BackwardOp() = default;
BackwardOp::BackwardOp(BackwardOp&&) noexcept = default;
BackwardOp& BackwardOp::operator=(BackwardOp&&) noexcept = default;

std::size_t BackwardOp::workspace_bytes(bool hoisted) const {
  const TransposePlan& t = plan_->transpose;
  return plan_->ws_total + (hoisted ? 0 : plan_->no_sort ? t.ws_bounds_total : t.ws_total);
}

void BackwardOp::run(const BackwardOutputs& out, void* d_workspace, cudaStream_t stream,
                     const SortedLookups& hoisted) {
  throw_if_error(validate(plan_->problem, out));
  run(kValidated, out, d_workspace, stream, hoisted);
}

void BackwardOp::run(Validated, const BackwardOutputs& out, void* d_workspace, cudaStream_t stream,
                     const SortedLookups& hoisted) {
  BackwardPlan& P = *plan_;
  const bool small = !P.small_features.empty();
  if (small && P.saved_counts != nullptr) {  // checked before anything is enqueued
    const SmallTableCounts& sc = *P.saved_counts;
    std::string why;
    if (!sc.written) why = "it was never written by a ForwardOp::run()";
    else if (sc.batch != P.saved_batch)
      why = "stale: written for batch " + std::to_string(sc.batch) + ", this backward runs batch " +
            std::to_string(P.saved_batch);
    else if (sc.batch_size != P.small_batch || sc.features != P.small_features)
      why = "written for B = " + std::to_string(sc.batch_size) + " and " +
            std::to_string(sc.features.size()) + " small-table features; this backward has B = " +
            std::to_string(P.small_batch) + " and " + std::to_string(P.small_features.size());
    else if (sc.data == nullptr || sc.bytes < detail::small_table_counts_bytes(
                                                  static_cast<std::int64_t>(P.small_features.size()),
                                                  P.small_batch))
      why = "its buffer is smaller than the forward's layout";
    if (!why.empty())
      throw InvalidArgument("small_table_counts", "small_table_counts: " + why);
  }
  const TransposePlan* tp = &P.transpose;
  char* ws = static_cast<char*>(d_workspace);
  char* tws = ws + P.ws_total;
  if (hoisted.impl != nullptr && hoisted.workspace == nullptr)
    throw InvalidArgument("hoisted", "hoisted: the SortedLookups comes from a TransposeOp whose "
                                     "run() was not called (no workspace)");
  if (hoisted.valid()) {
    tp = static_cast<const TransposePlan*>(hoisted.impl);
    if (!tp->compatible(P.transpose))
      throw InvalidArgument("hoisted",
                            "hoisted: the SortedLookups was produced for different lookups or "
                            "geometry (N = " + std::to_string(tp->N) + " vs " +
                                std::to_string(P.transpose.N) + ")");
    tws = hoisted.workspace;
  }
  P.stream = stream;
  P.workspace = ws;
  P.used_transpose = tp;
  P.transpose_ws = tws;
  P.hoisted = hoisted.valid();
  P.ran = true;

  P.phase(0, stream);
  if (!P.hoisted) {
    if (P.no_sort) tp->enqueue_bounds(tws, stream);
    else tp->enqueue(tws, stream);
  }
  P.phase(1, stream);

  detail::RunArgs a = P.run;
  if (!P.no_sort) {  // the transpose's outputs (without the sort, only its bounds part exists)
    a.run_keys = tws + tp->ws_run_keys;
    a.run_lengths = tp->run_lengths_at(tws);
    a.run_offsets = tp->run_offsets_at(tws);
    a.num_runs = reinterpret_cast<const std::int32_t*>(tws + tp->ws_num_runs);
    a.sorted_values = reinterpret_cast<const std::uint32_t*>(tws + tp->ws_vals_out);
    a.pos_bag = reinterpret_cast<const std::int32_t*>(tws + tp->ws_pos_bag);
    a.pos_scale = reinterpret_cast<const double*>(tws + tp->ws_pos_scale);
  }
  a.abort_key = tp->abort_key(tws);
  a.weights_out = out.weights;
  a.momentum_out = out.momentum;
  a.weights_vec = a.weights_vec &&
                  (reinterpret_cast<std::uintptr_t>(out.weights) %
                   (tuning::RunKernels::kColumnsPerLane * dtype_size(P.types.weights))) == 0;
  a.counters = reinterpret_cast<detail::BackwardDeviceCounters*>(ws + P.ws_counters);
  a.long_runs = reinterpret_cast<detail::LongRun*>(ws + P.ws_long);
  a.chunk_run = reinterpret_cast<std::uint32_t*>(ws + P.ws_chunk_run);
  a.run_counters = reinterpret_cast<unsigned*>(ws + P.ws_run_counters);
  a.partials = ws + P.ws_partials;
  a.accumulators = ws + P.ws_partials;
  a.chunk_keys = reinterpret_cast<std::uint32_t*>(ws + P.ws_chunk_keys);
  a.chunk_ids = reinterpret_cast<std::uint32_t*>(ws + P.ws_chunk_ids);
  a.chunk_order = reinterpret_cast<const std::uint32_t*>(ws + P.ws_chunk_order);
  if (!P.no_sort && !P.chunk_order_one_cta)  // the device-wide sort reads every slot: unused ones sort last
    cuda_check(cudaMemsetAsync(a.chunk_keys, 0xff, static_cast<std::size_t>(P.max_chunks) * 4, stream),
               "reset chunk keys");

  cuda_check(cudaMemsetAsync(a.counters, 0, sizeof(detail::BackwardDeviceCounters), stream),
             "reset backward counters");
  detail::CountsView small_counts;
  P.used_saved = small && P.saved_counts != nullptr;
  // Without the sort (and not hoisted) nothing else reads the indices: the small-table kernels
  // count the bad ones into the transpose's counters, which the sort's linearize does otherwise.
  const bool count_bad_indices = P.no_sort && !P.hoisted && tp->repairs();
  if (small) {
    const auto ns = static_cast<std::int64_t>(P.small_features.size());
    if (P.used_saved) {
      small_counts = detail::small_table_counts_view(P.saved_counts->data, ns, P.small_batch);
    } else {  // the backward's own histogram: the forward kernel in counts-only mode
      small_counts = detail::small_table_counts_view(ws + P.ws_small_counts, ns, P.small_batch);
      cuda_check(cudaMemsetAsync(small_counts.invalid, 0, static_cast<std::size_t>(ns) * 4, stream),
                 "reset small-table invalid flags");
      detail::SmallTableForwardArgs c;
      c.indices = tp->indices;
      c.offsets = tp->bag_offsets(tws);
      c.features = P.d_small;
      c.num_small = static_cast<std::int32_t>(ns);
      c.batch_size = P.small_batch;
      c.num_bags = tp->num_bags;
      c.check_indices = tp->repairs();
      c.compute_output = false;
      c.save = small_counts;
      c.counters = count_bad_indices ? tp->counters(tws)
                                     : reinterpret_cast<DeviceCounters*>(ws + P.ws_small_scratch);  // counted by the transpose
      c.abort_key = tp->abort_key(tws);
      detail::launch_small_table_forward(P.types.grad, tp->index_dtype, c, stream);
    }
    if (count_bad_indices && P.used_saved)  // the saved histogram read no index of this call
      detail::launch_repair_indices(tp->index_dtype, tp->indices, tp->offsets, tp->bag_offsets(tws),
                                    nullptr, tp->d_features, tp->d_feature_first_bag, tp->T,
                                    tp->num_bags, false, tp->counters(tws), stream);
    a.small_invalid = small_counts.invalid;
    a.small_min_run = P.small_min_run;
  }
  P.psw_ran = false;
  if (!P.no_sort) {  // the generic kernels: routing, chunk order, psw gradient, short and long runs
    a.grid = P.route_grid;
    detail::launch_route(a, stream);
    if (P.chunk_order_one_cta)
      detail::launch_chunk_order_one_cta(a.chunk_keys, &a.counters->num_chunks, P.chunk_key_bits,
                                         reinterpret_cast<std::uint32_t*>(ws + P.ws_chunk_order), stream);
    else
      detail::launch_sort_pairs32(P.max_chunks, P.chunk_key_bits, 8, a.chunk_keys,
                                  reinterpret_cast<std::uint32_t*>(ws + P.ws_chunk_keys_out),
                                  a.chunk_ids, reinterpret_cast<std::uint32_t*>(ws + P.ws_chunk_order),
                                  ws + P.ws_chunk_temp, P.chunk_temp_bytes, stream);
    P.phase(2, stream);
    P.psw_ran = out.per_sample_weight_grad != nullptr;
    if (P.psw_ran) {  // before any update: reads the weights as they were
      detail::PswGradArgs g = P.psw;
      g.offsets = tp->bag_offsets(tws);
      g.pos_bag = a.pos_bag;
      g.out = out.per_sample_weight_grad;
      g.abort_key = a.abort_key;
      detail::launch_psw_grad(P.types.weights, P.accumulation, P.types.grad, tp->index_dtype, g,
                              stream);
    }
    P.phase(3, stream);
    if (P.interleaved) {  // short runs and chunks in one launch: its time is phase 3's
      detail::launch_runs_interleaved(P.types, a, stream);
      P.phase(4, stream);
    } else {
      if (P.per_dim) {  // ShortGroups::PerDim: each table's runs, then one launch per group size
        detail::RunArgs c = a;
        c.table_runs = reinterpret_cast<std::uint32_t*>(ws + P.ws_table_runs);
        detail::launch_table_runs(c, stream);
        for (const BackwardPlan::DimClass& k : P.dim_classes) {
          c.group_size = k.group_size;
          c.class_tables = P.d_class_tables + k.first;
          c.num_class_tables = k.count;
          detail::launch_short_runs(P.types, c, stream);
        }
      } else {
        detail::launch_short_runs(P.types, a, stream);
      }
      P.phase(4, stream);
      detail::launch_long_chunks(P.types, a, stream);
    }
    P.phase(5, stream);
    if (!a.fused) detail::launch_long_apply(P.types, a, stream);
  } else {
    for (int i = 2; i <= 5; ++i) P.phase(i, stream);  // phase timings stay defined (zero)
  }
  if (small) {
    detail::SmallTableBackwardArgs h;
    h.features = P.d_small;
    h.num_small = static_cast<std::int32_t>(P.small_features.size());
    h.batch_size = P.small_batch;
    h.num_bags = tp->num_bags;
    h.offsets = tp->bag_offsets(tws);
    h.mean = P.problem.forward.options.pooling == PoolingMode::Mean;
    h.counts = small_counts;
    h.grad_output = P.problem.grad_output;
    h.out_stride = tp->layout.total_dim;
    h.partials = reinterpret_cast<float*>(ws + P.ws_small_partials);
    h.partial_sl = reinterpret_cast<std::int32_t*>(ws + P.ws_small_sl);
    h.blocks_per_feature = P.small_blocks;
    h.block_tiles = P.small_block_tiles;
    h.min_run = P.small_min_run;
    h.exact_rows = P.no_sort;
    h.warp_columns = P.split_k_warp;
    h.indices = tp->indices;
    h.check_indices = tp->repairs();
    h.run = a;
    detail::launch_small_table_backward(P.types.grad, tp->index_dtype, h, stream);
  }
  P.phase(6, stream);
}

void BackwardOp::set_phase_events(cudaEvent_t* events) { plan_->phase_events = events; }

const std::vector<SmallTableFeature>& BackwardOp::small_table_features() const {
  return plan_->small_decision;
}
void BackwardOp::use_small_table_counts(const SmallTableCounts* counts, std::uint64_t batch) {
  plan_->saved_counts = counts;
  plan_->saved_batch = batch;
}
SmallTableBackwardStats BackwardOp::small_table_stats() const { return plan_->small_stats; }

BackwardStats BackwardOp::finish() {
  BackwardPlan& P = *plan_;
  if (!P.ran) throw DeviceError("BackwardOp::finish: run() was not called");
  cuda_check(cudaStreamSynchronize(P.stream), "backward (stream synchronize)");
  cuda_check(cudaGetLastError(), "backward (kernels)");
  const TransposePlan& tp = *P.used_transpose;
  DeviceCounters bc{};
  cuda_check(cudaMemcpy(&bc, tp.counters(P.transpose_ws), sizeof bc, cudaMemcpyDeviceToHost),
             "read bounds counters");
  if (tp.mode == BoundsCheckMode::Fatal && bc.fatal_key != detail::kFatalNone)
    throw BoundsCheckError(detail::describe_fatal(bc.fatal_key, tp.index_dtype, tp.indices,
                                                  tp.offsets, tp.num_bags, tp.N, tp.layout,
                                                  tp.feature_rows, tp.counters(P.transpose_ws),
                                                  P.stream));
  detail::BackwardDeviceCounters c{};
  cuda_check(cudaMemcpy(&c, P.workspace + P.ws_counters, sizeof c, cudaMemcpyDeviceToHost),
             "read backward counters");
  BackwardStats st;
  if (tp.repairs()) st.warnings = static_cast<std::int64_t>(bc.bad_bags + bc.bad_last_offset + bc.bad_indices);
  BackwardPathCounters& k = st.counters;
  k.short_runs = static_cast<std::int64_t>(c.short_runs);
  k.short_lookups = static_cast<std::int64_t>(c.short_lookups);
  const bool fused = P.strategy.long_runs == BackwardStrategy::LongRuns::Fused;
  (fused ? k.fused_runs : k.chunked_runs) = static_cast<std::int64_t>(c.long_runs);
  (fused ? k.fused_lookups : k.chunked_lookups) = static_cast<std::int64_t>(c.long_lookups);
  k.chunks = static_cast<std::int64_t>(c.chunks);
  P.small_stats = SmallTableBackwardStats{static_cast<std::int64_t>(c.small_table_rows),
                                          static_cast<std::int64_t>(c.small_table_lookups),
                                          P.used_saved,
                                          static_cast<std::int64_t>(c.small_table_exact_rows),
                                          static_cast<std::int64_t>(c.small_table_exact_lookups),
                                          P.no_sort};
  k.histogram_runs = P.small_stats.rows;
  k.histogram_lookups = P.small_stats.lookups;
  k.histogram_exact_runs = P.small_stats.exact_rows;
  k.histogram_exact_lookups = P.small_stats.exact_lookups;
  // the split that decided which rows took the product (also when all of them were exact)
  const bool small_ran = P.small_stats.rows + P.small_stats.exact_rows > 0;
  k.histogram_min_run = small_ran ? P.small_min_run : 0;
  k.histogram_blocks = small_ran ? P.small_blocks : 0;
  k.histogram_block_tiles = small_ran ? P.small_block_tiles : 0;
  st.runs = k.short_runs + static_cast<std::int64_t>(c.long_runs) + k.histogram_runs +
            k.histogram_exact_runs;
  st.lookups = k.short_lookups + static_cast<std::int64_t>(c.long_lookups) + k.histogram_lookups +
               k.histogram_exact_lookups;
  st.paths.push_back(P.no_sort ? "bwd.small_table.no_sort" : tp.sort_path());
  if (!P.no_sort) {
    st.paths.push_back(tp.keys_path());
    if (tp.digit_bits == tuning::Preprocess::kWideDigitBits) st.paths.push_back("bwd.sort.wide_digits");
  }
  if (P.hoisted) st.paths.push_back("bwd.hoisted");
  if (k.short_runs > 0) {
    st.paths.push_back("bwd.short");
    if (!P.per_dim) {
      st.paths.push_back(P.run.short_staged ? "bwd.short.staged" : "bwd.short.registers");
    } else {  // per-D launches: the staged instance for the groups that can stage (G >= its ring)
      bool staged = false, registers = false;
      for (const BackwardPlan::DimClass& d : P.dim_classes)
        (P.run.short_staged && d.group_size >= tuning::RunKernels::kShortStageRows ? staged : registers) = true;
      if (staged) st.paths.push_back("bwd.short.staged");
      if (registers) st.paths.push_back("bwd.short.registers");
      st.paths.push_back("bwd.short.per_dim");
    }
  }
  if (c.long_runs > 0) {
    st.paths.push_back(fused ? "bwd.long.fused" : "bwd.long.chunked");
    st.paths.push_back(P.chunk_order_one_cta ? "bwd.chunk_order.one-cta" : "bwd.chunk_order.device-wide");
    st.paths.push_back(P.run.dynamic_chunks ? "bwd.chunk_schedule.dynamic" : "bwd.chunk_schedule.static");
  }
  if (k.short_runs > 0 || c.long_runs > 0)
    st.paths.push_back(P.interleaved ? "bwd.runs.interleaved" : "bwd.runs.separate");
  if (P.psw_ran) st.paths.push_back("bwd.psw_grad");
  if (P.small_stats.rows > 0) {
    st.paths.push_back("bwd.small_table");
    st.paths.push_back(P.split_k_warp ? "bwd.small_table.split_k.warp" : "bwd.small_table.split_k.block");
  }
  if (P.small_stats.exact_rows > 0) st.paths.push_back("bwd.small_table.exact");
  if (P.used_saved) st.paths.push_back("bwd.small_table.saved_counts");
  if (P.want_sr) st.paths.push_back("bwd.sr");
  if (!P.no_sort) {  // the generic run kernels ran
    if (!P.strategy.deterministic) st.paths.push_back("bwd.nondeterministic");
    st.paths.push_back(P.types.block_group ? "bwd.group.block" : "bwd.group.warp");
  }
  {  // how the run kernels gathered grad_output rows (kernels/backward_runs.cuh accumulate_sorted):
     // staged for warp groups of >= R lanes with aligned rows (short runs: only those longer
     // than kRowsInFlight, counted by the router), else registers
    const auto shape = [&](int stage_rows) {
      return detail::staged_gather_shape(P.types.block_group, P.run.grad_vec, P.run.group_size, stage_rows);
    };
    const bool short_shape = shape(P.run.short_staged ? tuning::RunKernels::kShortStageRows : 0);
    const bool long_shape = shape(tuning::RunKernels::kLongStageRows);
    const auto short_over = static_cast<std::int64_t>(c.short_runs_over_batch);
    const bool staged = (short_shape && short_over > 0) || (long_shape && c.long_runs > 0);
    const bool registers = (k.short_runs > (short_shape ? short_over : 0)) || (!long_shape && c.long_runs > 0);
    if (staged) st.paths.push_back("bwd.gather.staged");
    if (registers) st.paths.push_back("bwd.gather.registers");
  }
  switch (tp.mode) {
    case BoundsCheckMode::Fatal: st.paths.push_back("bounds.fatal_check"); break;
    case BoundsCheckMode::None: break;
    default: st.paths.push_back("bounds.fused");
  }
  return st;
}

}  // namespace tbe::cuda
