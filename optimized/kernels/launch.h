// Host-visible interface of the kernel families (optimized/kernels/*.cu): argument structs and
// launch functions. Plain C++ (no device code), included by the host operator (src/) and by the
// kernels. Kernels trust these arguments: the host operator validated the problem first.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "dispatch/tuning.h"
#include "tbe/cuda/mutation.h"
#include "tbe/types.h"

namespace tbe::cuda::detail {

/// Per-feature metadata on device ([T]).
struct FeatureMeta {
  std::int64_t table_offset;  ///< element offset of the feature's table in the weights buffer
  std::int64_t rows;          ///< E of the feature's table
  std::int32_t dim;           ///< D of the feature's table
  std::int32_t pad;
};

/// One output segment: a run of bags of one feature (non-VBE: all bags of feature f; VBE: the bags
/// of (f, r)), with the address of its output block. Bag k of the segment writes
/// out_base + (k - first_bag) * out_stride.
struct SegmentMeta {
  std::int64_t out_base;
  std::int64_t out_stride;
  std::int32_t feature;
  std::int32_t pad;
};

/// Device counters at the head of the workspace (zeroed / reset by every run()).
struct DeviceCounters {
  unsigned long long bad_bags;
  unsigned long long bad_last_offset;
  unsigned long long bad_indices;
  unsigned long long fatal_key;  ///< FATAL priority key (~0: none); see bounds_check.cu
  long long locate_bag;          ///< FATAL index violation: bag holding the position
  long long locate_value;        ///< ... and the index value
  unsigned long long small_table_mma_bags;     ///< small-table bags multiplied on tensor cores
  unsigned long long small_table_direct_bags;  ///< small-table bags summed directly
};
/// fatal_key encoding: bag k -> k (k < num_bags), last offset -> num_bags, index at position p ->
/// kFatalIndexBase + p. atomicMin picks the first offender in find_first_violation order.
inline constexpr unsigned long long kFatalIndexBase = 1ull << 62;
inline constexpr unsigned long long kFatalNone = ~0ull;

/// Division by a divisor fixed at launch (the Granlund–Montgomery method of CUTLASS's FastDivmod):
/// n / divisor = umulhi(n, multiplier) >> shift for 0 <= n < 2^31 (kernels/common.cuh fast_div),
/// one IMAD.HI and a shift instead of a ~20-instruction integer division.
struct FastDiv {
  std::uint32_t divisor = 1, multiplier = 0, shift = 0;  ///< divisor 1: multiplier unused
  static FastDiv make(std::uint32_t d) {
    FastDiv f;
    f.divisor = d;
    if (d > 1) {
      std::uint32_t l = 0;  // ceil(log2 d)
      while ((std::uint64_t{1} << l) < d) ++l;
      const std::uint64_t p = 31 + l;
      f.multiplier = static_cast<std::uint32_t>(((std::uint64_t{1} << p) + d - 1) / d);
      f.shift = static_cast<std::uint32_t>(p - 32);
    }
    return f;
  }
  /// The same quotient on the host (the device form: kernels/common.cuh fast_div, whose __umulhi
  /// is the high word of this product).
  std::uint32_t div(std::uint32_t n) const {
    return divisor == 1 ? n
                        : static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * multiplier) >> 32) >> shift;
  }
};

/// One span of a merged group-per-bag launch (ForwardTuning::merge_launches): the bags
/// [bag_begin, bag_end) of a run of consecutive features with one group size, gathered by the
/// launch's blocks [first_block, first_block + ceil(bags / (kBlockThreads / group_size))).
/// A launch's spans are ordered by first_block (spans[0].first_block = 0). 24 bytes.
struct PooledSpan {
  std::int64_t bag_begin, bag_end;
  std::int32_t group_size;   ///< threads per bag: 1, 2, ..., 32
  std::uint32_t first_block;
};
static_assert(sizeof(PooledSpan) == 24, "PooledSpan: 24 bytes");

/// Pooled (SUM / MEAN) gather over the bags [bag_begin, bag_end) with one group size (one launch
/// per run of features that share the group size and vector path), or, group-per-bag kernel only,
/// over a list of spans each with its own group size (`spans` non-null: bag_begin, bag_end and
/// group_size unused).
struct PooledArgs {
  const void* weights = nullptr;          ///< [Σ E·D] W
  const void* indices = nullptr;          ///< [N] Idx (raw or repaired)
  const void* offsets = nullptr;          ///< [num_bags + 1] Idx (raw or repaired)
  const void* orig_offsets = nullptr;     ///< fused check: raw offsets, to count repaired bags
  const float* per_sample_weights = nullptr;
  void* output = nullptr;                 ///< Out
  const FeatureMeta* features = nullptr;  ///< [T]
  const std::int64_t* seg_first_bag = nullptr;  ///< [num_segs] ascending
  const SegmentMeta* segs = nullptr;            ///< [num_segs]
  std::int32_t num_segs = 0;
  std::int64_t bag_begin = 0, bag_end = 0;
  std::int64_t num_bags = 0;              ///< all bags (T·B or Σ batch sizes)
  std::int64_t bags_per_segment = 0;      ///< > 0: every segment has this many bags (non-VBE B)
  FastDiv segment_div;                    ///< by bags_per_segment (when in [1, 2^32) and num_bags < 2^31)
  std::int32_t group_size = tuning::PooledGather::kMaxGroupSize;  ///< threads per bag: 1, 2, ..., 32
  /// Merged launch (ForwardTuning::merge_launches; group-per-bag kernel, not pipelined): [num_spans]
  /// spans on device, ordered by first_block, and the launch's blocks in all (span_blocks < 2^31).
  const PooledSpan* spans = nullptr;
  std::int32_t num_spans = 0;
  std::int64_t span_blocks = 0;
  /// Every table of the launch has <= 2^32 rows and ForwardTuning::row_index32: a lookup's row
  /// index is broadcast and multiplied as 32 bits (path "forward.pooled.row_index32").
  bool rows32 = false;
  /// ForwardTuning::prefer_l1: the group-per-bag kernel asks for the max L1 carveout (it uses no
  /// shared memory), the streamed kernel for the smallest carveout holding 3 of its blocks
  bool prefer_l1 = true;
  bool mean = false;
  bool check_indices = false;             ///< fused bounds check: bad index -> row 0, counted
  /// Streamed kernel only: consecutive bags per warp, 1..32; 0: its launch chooses from the bag
  /// count (ForwardTuning::staged_bags_per_warp)
  std::int32_t bags_per_warp = 0;
  DeviceCounters* counters = nullptr;
  const unsigned long long* abort_key = nullptr;  ///< FATAL: skip all work if != kFatalNone
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};

/// NONE (sequence) pooling: one group of threads per output row p in [0, N).
struct SequenceArgs {
  const void* weights = nullptr;
  const void* indices = nullptr;
  const void* offsets = nullptr;          ///< [num_bags + 1]
  void* output = nullptr;                 ///< [N, D] Out
  const FeatureMeta* features = nullptr;
  const std::int64_t* feature_first_bag = nullptr;  ///< [T + 1]
  std::int32_t num_features = 0;
  std::int64_t num_bags = 0;
  std::int64_t num_rows = 0;              ///< N
  std::int32_t dim = 0;                   ///< D (common)
  std::int32_t group_size = tuning::PooledGather::kMaxGroupSize;
  bool check_indices = false;
  DeviceCounters* counters = nullptr;
  const unsigned long long* abort_key = nullptr;
  TBE_MUTANT_FIELD  ///< mutation build only (tbe/cuda/mutation.h)
};

/// Type-level dispatch keys (src/forward_dispatch.cpp maps them to an instance through
/// dispatch/dispatch.h).
struct PooledTypes {
  DType weights, accumulation, output, index;
  bool vectorized;
  bool pipelined;      ///< ForwardTuning::pipelined: the persistent variant where one is compiled
  int rows_in_flight;  ///< ForwardTuning::rows_in_flight: 4 selects the fewer-registers variant
                       ///< where one is compiled (kCompiledPooledTuning); else 8 rows run
  /// ForwardTuning::staged_rows where the launch may stream (vector path, G = 32, no column
  /// chunks) and the types are compiled for it (kCompiledPooledTuning), else 0.
  int staged_rows = 0;
  /// The narrow vector path (16-bit weights, tuning::PooledGather::kNarrowVectorBytes; with
  /// vectorized false): the default kernel's 8-byte instance.
  bool narrow = false;
};
struct SequenceTypes {
  DType weights, output, index;
  bool vectorized;
};

/// Elements per vector (tuning::PooledGather::kVectorBytes = 16) of a weight type: 4 for FP32,
/// 8 for FP16/BF16.
constexpr int vector_width(DType w) {
  return tuning::PooledGather::kVectorBytes / static_cast<int>(dtype_size(w));
}

/// Template instances (defined in kernels/pooled_gather_*.cu and kernels/sequence.cu; the
/// compiled combinations are listed in dispatch/dispatch.h).
/// kPipelined: persistent grid, each group loops over bags with the next bag's offsets and first
/// index tile prefetched (compiled for kCompiledPooledTuning only); otherwise one group per bag.
/// kRows: row loads in flight per lane (tuning::PooledGather::kRowsInFlight = 4 everywhere;
/// kRowsInFlightMany = 8 also compiled for kCompiledPooledTuning). kVecBytes: a lane's vector
/// in bytes (tuning::PooledGather::kVectorBytes; kNarrowVectorBytes for 16-bit weights, default
/// kernel only, kernels/pooled_gather_narrow.cu) or 0 (one element per lane).
template <DType kW, DType kAcc, DType kOut, DType kIdx, int kVecBytes, bool kPipelined, int kRows>
void launch_pooled_t(const PooledArgs& args, cudaStream_t stream);
/// The streamed kernel (kernels/pooled_gather_streamed.cuh), a ring of kR rows per warp.
template <DType kW, DType kAcc, DType kOut, DType kIdx, int kR>
void launch_pooled_streamed_t(const PooledArgs& args, cudaStream_t stream);
template <DType kW, DType kOut, DType kIdx, bool kVec>
void launch_sequence_t(const SequenceArgs& args, cudaStream_t stream);

// --- the forward's dispatch (src/forward_dispatch.cpp): runtime types -> template instance ---
void launch_pooled(const PooledTypes& types, const PooledArgs& args, cudaStream_t stream);
void launch_sequence(const SequenceTypes& types, const SequenceArgs& args, cudaStream_t stream);

// --- bounds check / repair family (kernels/bounds_check.cu) ---
/// CUB temp bytes of the offsets max-scan over n items.
std::size_t offsets_scan_temp_bytes(DType index, std::int64_t n);
/// Repaired offsets (max-scan form) of `offsets` [num_offsets] into `repaired` [num_offsets];
/// counts a last offset != N into counters->bad_last_offset.
void launch_offsets_repair(DType index, const void* offsets, std::int64_t num_offsets,
                           std::int64_t num_indices, void* repaired, void* scan_temp,
                           std::size_t scan_temp_bytes, DeviceCounters* counters,
                           cudaStream_t stream);
/// Counts repaired bags (compares repaired with raw offsets).
void launch_count_bad_bags(DType index, const void* offsets, const void* repaired,
                           std::int64_t num_bags, DeviceCounters* counters, cudaStream_t stream);
/// Separate pass: for every bag of the repaired offsets, copies its indices into `repaired_indices`
/// with bad ones replaced by 0 (per feature E), counting bad indices; if count_bags, also counts
/// repaired bags against the raw offsets. repaired_indices == nullptr: counts only (the backward
/// without a sort, whose saved histogram read no index).
void launch_repair_indices(DType index, const void* indices, const void* offsets,
                           const void* repaired_offsets, void* repaired_indices,
                           const FeatureMeta* features, const std::int64_t* feature_first_bag,
                           std::int32_t num_features, std::int64_t num_bags, bool count_bags,
                           DeviceCounters* counters, cudaStream_t stream);
/// FATAL check pass on the raw offsets/indices: atomicMin of the priority key.
void launch_fatal_check(DType index, const void* indices, const void* offsets,
                        std::int64_t num_indices, const FeatureMeta* features,
                        const std::int64_t* feature_first_bag, std::int32_t num_features,
                        std::int64_t num_bags, DeviceCounters* counters, cudaStream_t stream);
/// After a FATAL index violation at position p: finds the bag holding p and the index value.
void launch_fatal_locate(DType index, const void* indices, const void* offsets,
                         std::int64_t num_bags, std::int64_t position, DeviceCounters* counters,
                         cudaStream_t stream);

}  // namespace tbe::cuda::detail
