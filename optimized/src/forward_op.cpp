// Host side of the device-level forward operator: can_implement, launch plan, workspace layout,
// enqueue (no sync), finish (counters, FATAL offender). Kernels live in optimized/kernels/.
#include "tbe/cuda/forward.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/launch.h"
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

namespace {

/// Threads per bag: enough lanes to cover one row in one pass (a power of two, at most
/// tuning::PooledGather::kMaxGroupSize: wider rows loop over column chunks).
int group_size_for(std::int32_t dim, int vec) {
  return std::min(next_pow2((dim + vec - 1) / vec), tuning::PooledGather::kMaxGroupSize);
}

}  // namespace

/// One pooled launch: a run of consecutive features with the same group size and vector path.
struct PooledLaunch {
  std::int64_t bag_begin, bag_end;
  int group_size;
  bool vectorized;       ///< 16-byte vectors (tuning::PooledGather::kVectorBytes)
  bool chunked = false;  ///< some feature's D > group_size · VEC (column chunks)
  /// 8-byte vectors of 16-bit weights (ForwardTuning::narrow_vectors; vectorized is false)
  bool narrow = false;
  /// PooledTypes::staged_rows of the launch: ForwardTuning::staged_rows when it may stream
  /// (vector path, a warp per bag, no column chunks, types compiled for it), else 0.
  int staged_rows = 0;
  /// Merged launch (ForwardTuning::merge_launches): its spans are ForwardPlan::d_spans
  /// [span_begin, span_begin + span_count), span_blocks blocks in all; span_count 0: one range.
  std::int32_t span_begin = 0, span_count = 0;
  std::int64_t span_blocks = 0;
};

namespace {
/// The vector path of a launch: 16-byte vectors, 8-byte (narrow), one element.
int vector_path(const PooledLaunch& l) { return l.vectorized ? 2 : l.narrow ? 1 : 0; }

/// Blocks of the group-per-bag kernel over `bags` bags at group size g.
std::int64_t group_per_bag_blocks(std::int64_t bags, int g) {
  const std::int64_t per_block = tuning::PooledGather::kBlockThreads / g;
  return (bags + per_block - 1) / per_block;
}

/// ForwardTuning::merge_launches: the launches that run the group-per-bag kernel (`group[i]`)
/// become one launch per vector path, over the spans of its members (each keeping its group
/// size), in plan order; a merged launch stays under 2^31 blocks (else a second one starts).
/// Launches on the other kernels, and a path with one such launch, are kept as they are.
/// Returns the new launch list; `spans` receives every merged launch's spans.
std::vector<PooledLaunch> merge_group_per_bag(const std::vector<PooledLaunch>& launches,
                                              const std::vector<bool>& group,
                                              std::vector<detail::PooledSpan>& spans) {
  constexpr std::int64_t kMaxBlocks = std::numeric_limits<std::int32_t>::max();
  std::vector<PooledLaunch> out;
  for (int path : {2, 1, 0}) {  // members of one merged launch share the vector path
    std::vector<PooledLaunch> members;
    for (std::size_t i = 0; i < launches.size(); ++i)
      if (group[i] && vector_path(launches[i]) == path) members.push_back(launches[i]);
    if (members.size() < 2) continue;
    PooledLaunch* m = nullptr;
    for (const PooledLaunch& l : members) {
      const std::int64_t blocks = group_per_bag_blocks(l.bag_end - l.bag_begin, l.group_size);
      if (m == nullptr || m->span_blocks + blocks > kMaxBlocks) {
        out.push_back(PooledLaunch{l.bag_begin, l.bag_end, l.group_size, l.vectorized, false});
        m = &out.back();
        m->narrow = l.narrow;
        m->span_begin = static_cast<std::int32_t>(spans.size());
      }
      spans.push_back(detail::PooledSpan{l.bag_begin, l.bag_end, l.group_size,
                                         static_cast<std::uint32_t>(m->span_blocks)});
      ++m->span_count;
      m->span_blocks += blocks;
      m->chunked = m->chunked || l.chunked;
      m->bag_begin = std::min(m->bag_begin, l.bag_begin);
      m->bag_end = std::max(m->bag_end, l.bag_end);
      m->group_size = std::max(m->group_size, l.group_size);
    }
  }
  // the launches not merged, in plan order, after the merged ones
  for (std::size_t i = 0; i < launches.size(); ++i) {
    if (group[i]) {
      std::size_t same_path = 0;
      for (std::size_t j = 0; j < launches.size(); ++j)
        same_path += group[j] && vector_path(launches[j]) == vector_path(launches[i]);
      if (same_path >= 2) continue;
    }
    out.push_back(launches[i]);
  }
  return out;
}
}  // namespace

struct ForwardPlan {
  // --- problem (device data pointers, host metadata copies) ---
  DType weights_dtype{}, index_dtype{}, output_dtype{}, accumulation{};
  PoolingMode pooling{};
  BoundsCheckMode mode{};
  bool fused = true;
  ForwardTuning tuning;
  std::int64_t bags_per_segment = 0;
  const void* weights = nullptr;
  const void* indices = nullptr;
  const void* offsets = nullptr;
  const float* per_sample_weights = nullptr;
  std::int64_t N = 0, num_bags = 0, num_offsets = 0;
  std::int32_t T = 0;
  std::vector<std::int64_t> feature_rows;
  OutputLayout layout;
  // --- device metadata (one allocation) ---
  void* d_meta = nullptr;
  FeatureMeta* d_features = nullptr;
  std::int64_t* d_feature_first_bag = nullptr;
  std::int64_t* d_seg_first_bag = nullptr;
  SegmentMeta* d_segs = nullptr;
  std::int32_t num_segs = 0;
  detail::PooledSpan* d_spans = nullptr;  ///< the merged launches' spans (PooledLaunch::span_begin)
  // --- small-table histogram path (docs/small-table.md) ---
  std::vector<SmallTableFeature> small_decision;  ///< [T]
  std::vector<std::int32_t> small_features;       ///< eligible features, ascending
  detail::SmallFeatureMeta* d_small = nullptr;
  std::int64_t batch_size = 0;
  SmallTableCounts* save_counts = nullptr;        ///< save_small_table_counts()
  std::uint64_t save_batch = 0;
  SmallTableStats small_stats;
  // --- launches ---
  std::vector<PooledLaunch> pooled;
  bool rows32 = false;  ///< PooledArgs::rows32 for every pooled launch
  int seq_group = 32;
  bool seq_vectorized = false;
  std::int32_t seq_dim = 0;
  /// ForwardTuning::launch_streams: the side streams the launches spread over (besides the
  /// caller's), the fork event (recorded on the caller's stream) and one join event per side
  /// stream (the caller's stream waits on each). Empty with one stream or one launch.
  std::vector<cudaStream_t> side_streams;
  cudaEvent_t fork_event = nullptr;
  std::vector<cudaEvent_t> join_events;
  // --- workspace layout (byte offsets) ---
  std::size_t ws_offsets = 0, ws_scan = 0, ws_indices = 0, ws_total = 0, scan_bytes = 0;
  // --- last run ---
  cudaStream_t stream = nullptr;
  char* workspace = nullptr;
  bool ran = false;
  std::vector<std::string> paths;

  ~ForwardPlan() {
    if (d_meta != nullptr) cudaFree(d_meta);
    for (cudaEvent_t e : join_events) cudaEventDestroy(e);
    if (fork_event != nullptr) cudaEventDestroy(fork_event);
    for (cudaStream_t st : side_streams) cudaStreamDestroy(st);
  }

  /// Launch i's stream: round robin over the caller's stream s and the side streams.
  cudaStream_t launch_stream(std::size_t i, cudaStream_t s) const {
    const std::size_t k = i % (side_streams.size() + 1);
    return k == 0 ? s : side_streams[k - 1];
  }
  /// Side streams start after everything enqueued on s so far (fork) / s continues after all of
  /// their work (join).
  void fork(cudaStream_t s) const {
    if (side_streams.empty()) return;
    cuda_check(cudaEventRecord(fork_event, s), "forward: record the fork event");
    for (cudaStream_t st : side_streams) cuda_check(cudaStreamWaitEvent(st, fork_event, 0), "forward: fork");
  }
  void join(cudaStream_t s) const {
    for (std::size_t j = 0; j < side_streams.size(); ++j) {
      cuda_check(cudaEventRecord(join_events[j], side_streams[j]), "forward: record a join event");
      cuda_check(cudaStreamWaitEvent(s, join_events[j], 0), "forward: join");
    }
  }
  std::size_t index_size() const { return dtype_size(index_dtype); }
  DeviceCounters* counters() const { return reinterpret_cast<DeviceCounters*>(workspace); }
  unsigned long long* fatal_key() const { return &counters()->fatal_key; }
  void* repaired_offsets() const { return workspace + ws_offsets; }
  void* repaired_indices() const { return workspace + ws_indices; }

  void reset_counters(cudaStream_t s) const {
    cuda_check(cudaMemsetAsync(workspace, 0, sizeof(DeviceCounters), s), "reset counters");
    cuda_check(cudaMemsetAsync(fatal_key(), 0xff, sizeof(unsigned long long), s),
               "reset fatal key");
  }

  void forward(void* out, const void* offs, const void* idx, bool check, const void* orig_offsets,
               const unsigned long long* abort_key, cudaStream_t s) const {
    if (pooling == PoolingMode::None) {
      detail::SequenceArgs a;
      a.weights = weights;
      a.indices = idx;
      a.offsets = offs;
      a.output = out;
      a.features = d_features;
      a.feature_first_bag = d_feature_first_bag;
      a.num_features = T;
      a.num_bags = num_bags;
      a.num_rows = N;
      a.dim = seq_dim;
      a.group_size = seq_group;
      a.check_indices = check;
      a.counters = counters();
      a.abort_key = abort_key;
      if (orig_offsets != nullptr)
        detail::launch_count_bad_bags(index_dtype, orig_offsets, offs, num_bags, counters(), s);
      detail::launch_sequence({weights_dtype, output_dtype, index_dtype, seq_vectorized}, a, s);
      return;
    }
    fork(s);
    std::size_t launch = 0;
    for (const PooledLaunch& l : pooled) {
      const cudaStream_t ls = launch_stream(launch++, s);
      detail::PooledArgs a;
      a.weights = weights;
      a.indices = idx;
      a.offsets = offs;
      a.orig_offsets = orig_offsets;
      a.per_sample_weights = per_sample_weights;
      a.output = out;
      a.features = d_features;
      a.seg_first_bag = d_seg_first_bag;
      a.segs = d_segs;
      a.num_segs = num_segs;
      a.bag_begin = l.bag_begin;
      a.bag_end = l.bag_end;
      a.num_bags = num_bags;
      a.group_size = l.group_size;
      if (l.span_count > 0) {
        a.spans = d_spans + l.span_begin;
        a.num_spans = l.span_count;
        a.span_blocks = l.span_blocks;
      }
      a.rows32 = rows32;
      a.bags_per_segment = bags_per_segment;
      if (bags_per_segment > 0 && bags_per_segment < (std::int64_t{1} << 32))
        a.segment_div = detail::FastDiv::make(static_cast<std::uint32_t>(bags_per_segment));
      a.prefer_l1 = tuning.prefer_l1;
      a.mean = pooling == PoolingMode::Mean;
      a.check_indices = check;
      a.bags_per_warp = tuning.staged_bags_per_warp;
      a.counters = counters();
      a.abort_key = abort_key;
      detail::launch_pooled({weights_dtype, accumulation, output_dtype, index_dtype, l.vectorized,
                             tuning.pipelined, tuning.rows_in_flight, l.staged_rows, l.narrow},
                            a, ls);
    }
    if (!small_features.empty()) {
      detail::SmallTableForwardArgs a;
      a.weights = weights;
      a.indices = idx;
      a.offsets = offs;
      a.orig_offsets = orig_offsets;
      a.output = out;
      a.out_stride = layout.total_dim;
      a.features = d_small;
      a.num_small = static_cast<std::int32_t>(small_features.size());
      a.batch_size = batch_size;
      a.num_bags = num_bags;
      a.mean = pooling == PoolingMode::Mean;
      a.check_indices = check;
      if (save_counts != nullptr)
        a.save = detail::small_table_counts_view(save_counts->data, a.num_small, batch_size);
      a.counters = counters();
      a.abort_key = abort_key;
      detail::launch_small_table_forward(output_dtype, index_dtype, a, launch_stream(launch++, s));
    }
    join(s);
  }

  BoundsViolation describe(unsigned long long key) const {
    return detail::describe_fatal(key, index_dtype, indices, offsets, num_bags, N, layout,
                                  feature_rows, counters(), stream);
  }
};

namespace {
/// The tuning's values (ForwardTuning's docs), each named as "tuning.<knob>".
Status check_tuning(const ForwardTuning& t) {
  using G = tuning::PooledGather;
  const auto bad = [](const char* knob, const std::string& value, const char* allowed) {
    return Status::Invalid(std::string("tuning.") + knob, std::string("tuning.") + knob + ": " +
                                                              value + " is not " + allowed);
  };
  if (t.rows_in_flight != G::kRowsInFlight && t.rows_in_flight != G::kRowsInFlightMany)
    return bad("rows_in_flight", std::to_string(t.rows_in_flight), "4 or 8");
  if (t.staged_rows != ForwardTuning::kStagedRowsAuto && t.staged_rows != 0 &&
      t.staged_rows != G::kStreamedRowsFew && t.staged_rows != G::kStreamedRowsMany)
    return bad("staged_rows", std::to_string(t.staged_rows),
               "kStagedRowsAuto (-1), 0, 8 or 16");
  if (t.staged_auto_min_bags < 0)
    return bad("staged_auto_min_bags", std::to_string(t.staged_auto_min_bags), ">= 0");
  if (t.launch_streams < 1 || t.launch_streams > ForwardTuning::kMaxLaunchStreams)
    return bad("launch_streams", std::to_string(t.launch_streams), "in 1..8");
  if (t.staged_bags_per_warp < 0 || t.staged_bags_per_warp > tuning::kWarpThreads)
    return bad("staged_bags_per_warp", std::to_string(t.staged_bags_per_warp),
               "in 0..32 (0: chosen from the launch's bag count)");
  const double l = t.small_table.expected_bag_length;
  if (!(l >= 0) || l == std::numeric_limits<double>::infinity()) {
    std::ostringstream v;
    v << l;  // shortest form: -1, -1e-300, nan, inf
    return bad("small_table.expected_bag_length", v.str(),
               "finite and >= 0 (0: measured from the offsets)");
  }
  return Status::Ok();
}
}  // namespace

Status ForwardOp::can_implement(const ForwardProblem& p, const ForwardTuning& tuning) {
  if (Status s = validate(p); !s.ok()) return s;
  const DType acc = p.options.policy.accumulation;
  if (!dispatch::contains(dispatch::kAccumulationTypes, acc))
    return Status::Invalid("options.policy.accumulation",
                           "options.policy.accumulation: " + to_string(acc) +
                               " is not supported by the CUDA backend (fp32 or fp64)");
  return check_tuning(tuning);
}

namespace {
/// p, after can_implement(p, tuning) passed (else InvalidArgument).
const ForwardProblem& implementable(const ForwardProblem& p, const ForwardTuning& tuning) {
  throw_if_error(ForwardOp::can_implement(p, tuning));
  return p;
}
}  // namespace

ForwardOp::ForwardOp(const ForwardProblem& p, const ForwardStrategy& strategy,
                     const ForwardTuning& tuning)
    : ForwardOp(implementable(p, tuning), kValidated, strategy, tuning) {}

ForwardOp::ForwardOp(const ForwardProblem& p, Validated, const ForwardStrategy& strategy,
                     const ForwardTuning& tuning)
    : plan_(std::make_unique<ForwardPlan>()) {
  const PrecisionPolicy& pol = p.options.policy;
  ForwardPlan& P = *plan_;
  P.weights_dtype = p.tables.dtype;
  P.index_dtype = p.lookups.index_dtype;
  P.output_dtype = pol.output;
  P.accumulation = pol.accumulation;
  P.pooling = p.options.pooling;
  P.mode = p.options.bounds_check;
  P.fused = strategy.fused_bounds_check;
  P.tuning = tuning;
  P.bags_per_segment = p.lookups.is_vbe() ? 0 : p.lookups.batch_size;
  P.weights = p.tables.weights;
  P.indices = p.lookups.indices;
  P.offsets = p.lookups.offsets;
  P.per_sample_weights = p.lookups.per_sample_weights;
  P.N = p.lookups.num_indices;
  P.num_offsets = p.lookups.num_offsets;
  P.num_bags = P.num_offsets - 1;
  P.T = static_cast<std::int32_t>(p.tables.num_features());
  P.layout = make_output_layout(p);
  P.batch_size = p.lookups.is_vbe() ? 0 : p.lookups.batch_size;
  P.small_decision = detail::small_table_eligibility(p, tuning.small_table);
  for (const SmallTableFeature& d : P.small_decision)
    if (d.eligible) P.small_features.push_back(d.feature);
  const std::vector<detail::SmallFeatureMeta> small_meta =
      detail::small_table_meta(p, P.small_decision);

  // --- per-feature metadata and output segments ---
  std::vector<FeatureMeta> features(P.T);
  for (std::int32_t f = 0; f < P.T; ++f) {
    const std::int32_t t = p.tables.feature_table_map[f];
    features[f] = FeatureMeta{p.tables.table_offsets[t], p.tables.rows[t], p.tables.dims[t], 0};
    P.feature_rows.push_back(p.tables.rows[t]);
  }
  std::vector<std::int64_t> seg_first;
  std::vector<SegmentMeta> segs;
  if (p.lookups.is_vbe()) {
    const std::int32_t R = p.lookups.vbe_ranks;
    for (std::int32_t f = 0; f < P.T; ++f)
      for (std::int32_t r = 0; r < R; ++r) {
        const std::size_t i = TBE_MUTANT_HOST(kFwdVbeRankFeatureSwapped)
                                  ? static_cast<std::size_t>(r) * P.T + f
                                  : static_cast<std::size_t>(f) * R + r;
        seg_first.push_back(P.layout.vbe_bag_offset[i]);
        segs.push_back(SegmentMeta{P.layout.vbe_output_offset[i], features[f].dim, f, 0});
      }
  } else {
    for (std::int32_t f = 0; f < P.T; ++f) {
      seg_first.push_back(P.layout.feature_bag_offset[f]);
      segs.push_back(SegmentMeta{P.layout.feature_col_offset[f], P.layout.total_dim, f, 0});
    }
  }
  P.num_segs = static_cast<std::int32_t>(segs.size());

  // --- launch plan: group size from D, 16-byte vectors where row starts allow them ---
  std::vector<detail::PooledSpan> spans;  // the merged launches' (PooledLaunch::span_begin)
  const int vec = detail::vector_width(P.weights_dtype);
  const bool base_aligned =
      reinterpret_cast<std::uintptr_t>(P.weights) % tuning::PooledGather::kVectorBytes == 0;
  auto vectorizable = [&](std::int32_t f) {
    return base_aligned && features[f].dim % vec == 0 && features[f].table_offset % vec == 0;
  };
  // the narrow path (16-bit weights): 4-element, 8-byte vectors where 16-byte ones do not fit
  constexpr int kNarrow = 4;
  const bool narrow_types = tuning.narrow_vectors && dtype_size(P.weights_dtype) == 2 &&
                            reinterpret_cast<std::uintptr_t>(P.weights) % tuning::PooledGather::kNarrowVectorBytes == 0;
  auto narrowable = [&](std::int32_t f) {
    return narrow_types && features[f].dim % kNarrow == 0 && features[f].table_offset % kNarrow == 0;
  };
  bool any_vec = false, any_narrow = false, any_scalar = false, any_chunked = false;
  if (P.pooling == PoolingMode::None) {
    P.seq_dim = P.T > 0 ? features[0].dim : 1;
    P.seq_vectorized = true;
    for (std::int32_t f = 0; f < P.T; ++f) P.seq_vectorized = P.seq_vectorized && vectorizable(f);
    if (P.T == 0) P.seq_vectorized = false;
    P.seq_group = group_size_for(P.seq_dim, P.seq_vectorized ? vec : 1);
    P.paths.push_back(P.seq_vectorized ? "forward.sequence.vec" + std::to_string(vec)
                                       : std::string("forward.sequence.scalar"));
  } else {
    for (std::int32_t f = 0; f < P.T; ++f) {
      if (P.small_decision[f].eligible) continue;  // the small-table launch owns its bags
      const bool v = vectorizable(f);
      const bool nv = !v && narrowable(f);
      const int w = v ? vec : nv ? kNarrow : 1;
      const int g = group_size_for(features[f].dim, w);
      (v ? any_vec : nv ? any_narrow : any_scalar) = true;
      const bool chunked = features[f].dim > g * w;
      if (chunked) any_chunked = true;
      const std::int64_t b0 = P.layout.feature_bag_offset[f], b1 = P.layout.feature_bag_offset[f + 1];
      if (!P.pooled.empty() && P.pooled.back().group_size == g && P.pooled.back().vectorized == v &&
          P.pooled.back().narrow == nv && P.pooled.back().bag_end == b0) {
        P.pooled.back().bag_end = b1;
        P.pooled.back().chunked = P.pooled.back().chunked || chunked;
      } else {
        P.pooled.push_back(PooledLaunch{b0, b1, g, v, chunked});
        P.pooled.back().narrow = nv;
      }
    }
    if (!P.pooled.empty()) {
      std::int64_t max_rows = 0;
      for (std::int32_t f = 0; f < P.T; ++f)
        if (!P.small_decision[f].eligible) max_rows = std::max(max_rows, P.feature_rows[f]);
      P.rows32 = tuning.row_index32 && max_rows <= (std::int64_t{1} << 32);
      P.paths.push_back(P.rows32 ? "forward.pooled.row_index32" : "forward.pooled.row_index64");
    }
    if (any_vec) P.paths.push_back("forward.pooled.vec" + std::to_string(vec));
    if (any_narrow) P.paths.push_back("forward.pooled.narrow_vec4");
    if (any_scalar) P.paths.push_back("forward.pooled.scalar");
    if (any_chunked) P.paths.push_back("forward.pooled.column_chunks");
    const bool pipelined_compiled =
        any_vec && dispatch::contains(dispatch::kCompiledPooledTuning,
                                      {P.weights_dtype, P.accumulation, P.output_dtype});
    // the streamed kernel takes the launches it can (the rest keep the tuning's other kernel):
    // every such launch with staged_rows 8 / 16; with Auto, those of at least
    // staged_auto_min_bags bags, unless the tuning asks for the pipelined or 8-rows kernel
    const bool auto_rows = tuning.staged_rows == ForwardTuning::kStagedRowsAuto;
    const bool streamed_tuned =
        pipelined_compiled &&
        (tuning.staged_rows == tuning::PooledGather::kStreamedRowsFew ||
         tuning.staged_rows == tuning::PooledGather::kStreamedRowsMany ||
         (auto_rows && !tuning.pipelined &&
          tuning.rows_in_flight != tuning::PooledGather::kRowsInFlightMany));
    const int streamed_rows = auto_rows ? tuning::PooledGather::kStreamedRowsAuto : tuning.staged_rows;
    const std::int64_t streamed_min_bags = auto_rows ? tuning.staged_auto_min_bags : 0;
    // the kernel of each launch, as forward_dispatch.cpp picks it: streamed, else pipelined
    // (vector path, compiled types), else group per bag (also reported when there is no launch
    // and no small-table feature: T = 0)
    bool any_streamed = false, any_pipelined = false,
         any_group = P.pooled.empty() && P.small_features.empty();
    std::vector<bool> group(P.pooled.size(), false);  // runs the group-per-bag kernel
    for (std::size_t i = 0; i < P.pooled.size(); ++i) {
      PooledLaunch& l = P.pooled[i];
      if (streamed_tuned && l.vectorized && !l.chunked &&
          l.group_size == tuning::PooledGather::kMaxGroupSize &&
          l.bag_end - l.bag_begin >= streamed_min_bags)
        l.staged_rows = streamed_rows;
      if (l.staged_rows > 0) any_streamed = true;
      else if (tuning.pipelined && pipelined_compiled && l.vectorized) any_pipelined = true;
      else any_group = true;
      // mergeable: the group-per-bag kernel with kRowsInFlight rows (the dispatch's 8-rows
      // instance takes vector launches of the compiled types when the tuning asks for 8)
      group[i] = l.staged_rows == 0 && !(tuning.pipelined && pipelined_compiled && l.vectorized) &&
                 !(tuning.rows_in_flight == tuning::PooledGather::kRowsInFlightMany &&
                   pipelined_compiled && l.vectorized);
    }
    if (any_streamed) P.paths.push_back("forward.pooled.streamed");
    if (any_pipelined) P.paths.push_back("forward.pooled.pipelined");
    if (any_group) P.paths.push_back("forward.pooled.group_per_bag");
    if (tuning.merge_launches) {
      P.pooled = merge_group_per_bag(P.pooled, group, spans);
      if (!spans.empty()) P.paths.push_back("forward.pooled.merged_launch");
    }
    if (!P.small_features.empty()) P.paths.push_back("forward.small_table");
    if (p.lookups.is_vbe()) P.paths.push_back("forward.vbe");
    // launch_streams: the launches (pooled, then small-table) over that many streams, at most one
    // per launch
    const std::size_t launches = P.pooled.size() + (P.small_features.empty() ? 0 : 1);
    const std::size_t streams = std::min<std::size_t>(static_cast<std::size_t>(tuning.launch_streams), launches);
    if (streams > 1) {
      P.paths.push_back("forward.launch_streams");
      cuda_check(cudaEventCreateWithFlags(&P.fork_event, cudaEventDisableTiming), "forward: create an event");
      for (std::size_t j = 1; j < streams; ++j) {
        cudaStream_t st = nullptr;
        cuda_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "forward: create a stream");
        P.side_streams.push_back(st);
        cudaEvent_t e = nullptr;
        cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "forward: create an event");
        P.join_events.push_back(e);
      }
    }
  }
  // --- upload (one buffer, kWorkspaceAlignment-aligned pieces) ---
  WorkspaceLayout meta;
  const std::size_t o_feat = meta.add(features.size() * sizeof(FeatureMeta));
  const std::size_t o_ffb = meta.add(P.layout.feature_bag_offset.size() * 8);
  const std::size_t o_sfb = meta.add(seg_first.size() * 8);
  const std::size_t o_seg = meta.add(segs.size() * sizeof(SegmentMeta));
  const std::size_t o_small = meta.add(small_meta.size() * sizeof(detail::SmallFeatureMeta));
  const std::size_t o_spans = meta.add(spans.size() * sizeof(detail::PooledSpan));
  const std::size_t meta_bytes = meta.total;
  std::vector<char> host(meta_bytes, 0);
  if (!features.empty()) std::memcpy(host.data() + o_feat, features.data(), features.size() * sizeof(FeatureMeta));
  std::memcpy(host.data() + o_ffb, P.layout.feature_bag_offset.data(), P.layout.feature_bag_offset.size() * 8);
  if (!seg_first.empty()) std::memcpy(host.data() + o_sfb, seg_first.data(), seg_first.size() * 8);
  if (!segs.empty()) std::memcpy(host.data() + o_seg, segs.data(), segs.size() * sizeof(SegmentMeta));
  if (!small_meta.empty())
    std::memcpy(host.data() + o_small, small_meta.data(),
                small_meta.size() * sizeof(detail::SmallFeatureMeta));
  if (!spans.empty())
    std::memcpy(host.data() + o_spans, spans.data(), spans.size() * sizeof(detail::PooledSpan));
  cuda_check(cudaMalloc(&P.d_meta, meta_bytes), "cudaMalloc(forward metadata)");
  cuda_check(cudaMemcpy(P.d_meta, host.data(), meta_bytes, cudaMemcpyHostToDevice),
             "upload forward metadata");
  char* base = static_cast<char*>(P.d_meta);
  P.d_features = reinterpret_cast<FeatureMeta*>(base + o_feat);
  P.d_feature_first_bag = reinterpret_cast<std::int64_t*>(base + o_ffb);
  P.d_seg_first_bag = reinterpret_cast<std::int64_t*>(base + o_sfb);
  P.d_segs = reinterpret_cast<SegmentMeta*>(base + o_seg);
  P.d_small = reinterpret_cast<detail::SmallFeatureMeta*>(base + o_small);
  P.d_spans = reinterpret_cast<detail::PooledSpan*>(base + o_spans);

  switch (P.mode) {
    case BoundsCheckMode::Fatal: P.paths.push_back("bounds.fatal_check"); break;
    case BoundsCheckMode::None: break;
    default: P.paths.push_back(P.fused ? "bounds.fused" : "bounds.separate");
  }

  // --- workspace: counters | repaired offsets | scan temp | repaired indices ---
  const std::size_t isz = P.index_size();
  WorkspaceLayout ws;
  ws.add(sizeof(DeviceCounters));  // at 0
  P.ws_offsets = ws.add(static_cast<std::size_t>(P.num_offsets) * isz);
  P.scan_bytes = detail::offsets_scan_temp_bytes(P.index_dtype, P.num_offsets);
  P.ws_scan = ws.add(P.scan_bytes);
  P.ws_indices = ws.add(static_cast<std::size_t>(P.N) * isz);
  P.ws_total = ws.total;
}

ForwardOp::~ForwardOp() = default;
ForwardOp::ForwardOp(ForwardOp&&) noexcept = default;
ForwardOp& ForwardOp::operator=(ForwardOp&&) noexcept = default;

std::size_t ForwardOp::workspace_bytes() const { return plan_->ws_total; }
const OutputLayout& ForwardOp::layout() const { return plan_->layout; }

const std::vector<SmallTableFeature>& ForwardOp::small_table_features() const {
  return plan_->small_decision;
}
std::size_t ForwardOp::small_table_counts_bytes() const {
  return detail::small_table_counts_bytes(static_cast<std::int64_t>(plan_->small_features.size()),
                                          plan_->batch_size);
}
void ForwardOp::save_small_table_counts(SmallTableCounts* counts, std::uint64_t batch) {
  if (counts != nullptr && (counts->data == nullptr || counts->bytes < small_table_counts_bytes()))
    throw InvalidArgument("small_table_counts",
                          "small_table_counts: a buffer of " + std::to_string(counts->bytes) +
                              " bytes at " + (counts->data == nullptr ? "null" : "a device address") +
                              "; the forward needs " + std::to_string(small_table_counts_bytes()) +
                              " bytes (ForwardOp::small_table_counts_bytes())");
  plan_->save_counts = counts;
  plan_->save_batch = batch;
}
SmallTableStats ForwardOp::small_table_stats() const { return plan_->small_stats; }

void ForwardOp::run(void* d_output, void* d_workspace, cudaStream_t stream) {
  ForwardPlan& P = *plan_;
  P.stream = stream;
  P.workspace = static_cast<char*>(d_workspace);
  P.ran = true;
  P.reset_counters(stream);
  if (P.save_counts != nullptr && !P.small_features.empty()) {
    const auto n = static_cast<std::int64_t>(P.small_features.size());
    const detail::CountsView v = detail::small_table_counts_view(P.save_counts->data, n, P.batch_size);
    cuda_check(cudaMemsetAsync(v.invalid, 0, static_cast<std::size_t>(n) * sizeof(std::uint32_t), stream),
               "reset small-table invalid flags");
    P.save_counts->batch = P.save_batch;
    P.save_counts->written = true;
    P.save_counts->batch_size = P.batch_size;
    P.save_counts->features = P.small_features;
  }
  switch (P.mode) {
    case BoundsCheckMode::None:
      P.forward(d_output, P.offsets, P.indices, false, nullptr, nullptr, stream);
      break;
    case BoundsCheckMode::Fatal:
      detail::launch_fatal_check(P.index_dtype, P.indices, P.offsets, P.N, P.d_features,
                                 P.d_feature_first_bag, P.T, P.num_bags, P.counters(), stream);
      P.forward(d_output, P.offsets, P.indices, false, nullptr, P.fatal_key(), stream);
      break;
    case BoundsCheckMode::Warning:
    case BoundsCheckMode::Ignore:
      detail::launch_offsets_repair(P.index_dtype, P.offsets, P.num_offsets, P.N,
                                    P.repaired_offsets(), P.workspace + P.ws_scan, P.scan_bytes,
                                    P.counters(), stream);
      if (P.fused) {
        P.forward(d_output, P.repaired_offsets(), P.indices, true, P.offsets, nullptr, stream);
      } else {
        detail::launch_repair_indices(P.index_dtype, P.indices, P.offsets, P.repaired_offsets(),
                                      P.repaired_indices(), P.d_features, P.d_feature_first_bag,
                                      P.T, P.num_bags, true, P.counters(), stream);
        P.forward(d_output, P.repaired_offsets(), P.repaired_indices(), false, nullptr, nullptr,
                  stream);
      }
      break;
  }
}

ForwardStats ForwardOp::finish() {
  ForwardPlan& P = *plan_;
  if (!P.ran) throw DeviceError("ForwardOp::finish: run() was not called");
  cuda_check(cudaStreamSynchronize(P.stream), "forward (stream synchronize)");
  cuda_check(cudaGetLastError(), "forward (kernels)");
  DeviceCounters c{};
  cuda_check(cudaMemcpy(&c, P.counters(), sizeof c, cudaMemcpyDeviceToHost), "read counters");
  if (P.mode == BoundsCheckMode::Fatal && c.fatal_key != detail::kFatalNone)
    throw BoundsCheckError(P.describe(c.fatal_key));
  ForwardStats stats;
  if (P.mode == BoundsCheckMode::Warning || P.mode == BoundsCheckMode::Ignore)
    stats.warnings = static_cast<std::int64_t>(c.bad_bags + c.bad_last_offset + c.bad_indices);
  stats.paths = P.paths;
  P.small_stats = SmallTableStats{static_cast<std::int64_t>(c.small_table_mma_bags),
                                  static_cast<std::int64_t>(c.small_table_direct_bags)};
  if (P.small_stats.mma_bags > 0) stats.paths.push_back("forward.small_table.mma");
  if (P.small_stats.direct_bags > 0) stats.paths.push_back("forward.small_table.direct");
  return stats;
}

RepairResult ForwardOp::repair(void* d_workspace, cudaStream_t stream) {
  ForwardPlan& P = *plan_;
  P.stream = stream;
  P.workspace = static_cast<char*>(d_workspace);
  P.ran = true;
  const std::size_t isz = P.index_size();
  auto download = [&](const void* src, std::int64_t n) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    if (n == 0) return v;
    dispatch::dispatch_index(P.index_dtype, "lookups.index_dtype", [&](auto idx) {
      using Idx = dispatch::storage_t<decltype(idx)::value>;
      if constexpr (std::is_same_v<Idx, std::int64_t>) {
        cuda_check(cudaMemcpy(v.data(), src, n * sizeof(Idx), cudaMemcpyDeviceToHost),
                   "download repair");
      } else {
        std::vector<Idx> t(static_cast<std::size_t>(n));
        cuda_check(cudaMemcpy(t.data(), src, n * sizeof(Idx), cudaMemcpyDeviceToHost),
                   "download repair");
        std::copy(t.begin(), t.end(), v.begin());
      }
    });
    return v;
  };
  RepairResult res;
  P.reset_counters(stream);
  if (P.mode == BoundsCheckMode::Fatal)
    detail::launch_fatal_check(P.index_dtype, P.indices, P.offsets, P.N, P.d_features,
                               P.d_feature_first_bag, P.T, P.num_bags, P.counters(), stream);
  if (P.mode == BoundsCheckMode::Warning || P.mode == BoundsCheckMode::Ignore) {
    detail::launch_offsets_repair(P.index_dtype, P.offsets, P.num_offsets, P.N,
                                  P.repaired_offsets(), P.workspace + P.ws_scan, P.scan_bytes,
                                  P.counters(), stream);
    if (P.N > 0)
      cuda_check(cudaMemcpyAsync(P.repaired_indices(), P.indices, P.N * isz,
                                 cudaMemcpyDeviceToDevice, stream), "copy indices");
    detail::launch_repair_indices(P.index_dtype, P.indices, P.offsets, P.repaired_offsets(),
                                  P.repaired_indices(), P.d_features, P.d_feature_first_bag, P.T,
                                  P.num_bags, true, P.counters(), stream);
  }
  cuda_check(cudaStreamSynchronize(stream), "repair (stream synchronize)");
  DeviceCounters c{};
  cuda_check(cudaMemcpy(&c, P.counters(), sizeof c, cudaMemcpyDeviceToHost), "read counters");
  if (P.mode == BoundsCheckMode::Fatal && c.fatal_key != detail::kFatalNone)
    throw BoundsCheckError(P.describe(c.fatal_key));
  if (P.mode == BoundsCheckMode::Warning || P.mode == BoundsCheckMode::Ignore) {
    res.offsets = download(P.repaired_offsets(), P.num_offsets);
    res.indices = download(P.repaired_indices(), P.N);
    res.bad_bags = static_cast<std::int64_t>(c.bad_bags);
    res.bad_last_offset = static_cast<std::int64_t>(c.bad_last_offset);
    res.bad_indices = static_cast<std::int64_t>(c.bad_indices);
    res.warnings = res.bad_bags + res.bad_last_offset + res.bad_indices;
  } else {
    res.offsets = download(P.offsets, P.num_offsets);
    res.indices = download(P.indices, P.N);
  }
  return res;
}

}  // namespace tbe::cuda
