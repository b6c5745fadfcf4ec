// Pooled (SUM / MEAN) gather: a group of G threads (G = 1..32, a power of two, chosen from D)
// owns one bag at a time; lane l of the group owns columns [c0 + l·VEC, c0 + l·VEC + VEC) of each
// column chunk c0 = 0, G·VEC, ... (one chunk when D <= G·VEC; D > 1024 loops over chunks).
// Per chunk the group walks the bag in tiles of G lookups: each lane holds one index (and its
// per-sample weight), then kRowsInFlight row vectors are loaded back to back (each index broadcast
// with a shuffle inside the group) before they are accumulated in index order: several
// independent gathers in flight per lane and a deterministic summation order.
// The groups of a warp (G < 32) run their loops in lock step, to the warp's longest bag, with
// per-lane predicates: the broadcasts are then full-warp shuffles with a constant mask (a group
// mask known only at run time made ptxas wrap every shuffle in a MATCH / REDUX / VOTE convergence
// check). Whole batches (every group has kRowsInFlight more rows, every lane a column) skip the
// per-row predicates. The row index is broadcast and multiplied as 32 bits when the launch's
// tables allow it (PooledArgs::rows32). Measured (ncu, FP32 weights on seed-large): 775 warp
// instructions per bag before, 666 after, 13-15 per lookup in the loop (bench/results/README.md).
// Pipelined variant (tuning table only): the grid holds only resident blocks and each group loops
// over bags with a stride of all groups; while bag k is gathered, the first index tile of the next
// bag and the offsets of the one after are already in flight. It needs ~40 more registers, so it
// is compiled for 2 resident blocks per SM; the default variant (one group per bag) for 3.
// Shapes: W[Σ E·D] weights; indices[N]; offsets[num_bags + 1]; output per SegmentMeta.
#pragma once

#include <stdexcept>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/common.cuh"

namespace tbe::cuda::detail {

inline constexpr int kPooledBlock = tuning::PooledGather::kBlockThreads;
/// A lane's vector in bytes: the vector path, the narrow path of 16-bit weights (launch_pooled_t).
inline constexpr int kPooledVec = tuning::PooledGather::kVectorBytes;
inline constexpr int kPooledNarrowVec = tuning::PooledGather::kNarrowVectorBytes;

template <class W, class Acc, class Out, class Idx, int VEC, int kRowsInFlight>
struct PooledGather {
  const PooledArgs& a;
  int G, glane;
  int group_base;  ///< lane of the group's first thread in the warp

  static constexpr unsigned kFullWarp = 0xffffffffu;


  /// Indices each lane holds per tile: 2 for 16-bit weights (G = 16 for D = 128, so a tile of 32
  /// covers typical bags in one prefetch), 1 for FP32 (G = 32 already covers them; saves registers).
  static constexpr int kSlots = sizeof(W) == 2 ? 2 : 1;
  /// One lane's share of an index tile: positions base + h·G + glane, h < kSlots.
  struct Tile {
    std::int64_t idx[kSlots];
    float w[kSlots];
  };

  __device__ __forceinline__ Tile load_tile(std::int64_t base, std::int64_t end) const {
    const Idx* indices = static_cast<const Idx*>(a.indices);
    const float* psw = a.per_sample_weights;
    Tile t;
#pragma unroll
    for (int h = 0; h < kSlots; ++h) {
      t.idx[h] = 0;
      t.w[h] = 1.0f;
    }
#pragma unroll
    for (int h = 0; h < kSlots; ++h) {
      const std::int64_t p = base + h * G + glane;
      if (p < end) {
        t.idx[h] = static_cast<std::int64_t>(__ldg(indices + p));
        if (psw != nullptr) t.w[h] = __ldg(psw + p);
      }
    }
    return t;
  }

  /// Address of columns [c, c + VEC) of row r (table_c = table + c, row_bytes = D·sizeof(W)):
  /// kRows32 multiplies the row index as 32 bits into a 64-bit byte offset (one IMAD.WIDE.U32;
  /// valid when every table of the launch has <= 2^32 rows, PooledArgs::rows32), else in 64 bits.
  template <bool kRows32>
  __device__ __forceinline__ const W* row_address(const W* table_c, std::int64_t r, int D,
                                                  std::uint32_t row_bytes) const {
    if constexpr (kRows32) {
      const std::uint32_t r32 = static_cast<std::uint32_t>(r);
      return reinterpret_cast<const W*>(
          reinterpret_cast<const char*>(table_c) +
          TBE_MUTANT_SWAP(a, kFwdRowOffset32, static_cast<std::uint64_t>(r32 * static_cast<std::uint32_t>(D)) * sizeof(W), static_cast<std::uint64_t>(r32) * row_bytes));
    } else {
      return table_c + TBE_MUTANT_SWAP(a, kFwdRowOffset32, static_cast<std::int32_t>(static_cast<std::uint32_t>(r) * static_cast<std::uint32_t>(D)), r * D);
    }
  }

  /// Sums this lane's columns [c, c + VEC) over the bag (tiles of TS lookups; `first` is the first
  /// tile) into acc, in index order; L_warp (the warp's longest bag) bounds the lock-step loops.
  template <bool kRows32, bool kWeighted>
  __device__ __forceinline__ void sum_columns(Acc (&acc)[VEC], std::int64_t start, std::int64_t end,
                                              std::int64_t L_warp, const Tile& first,
                                              const W* table_c, int D, std::int64_t rows,
                                              bool active, bool count_bad) const {
    const int TS = kSlots * G;  // lookups per tile
    const std::uint32_t row_bytes = static_cast<std::uint32_t>(D) * sizeof(W);
    const bool warp_active = __all_sync(kFullWarp, active);
    for (std::int64_t off = 0; off < L_warp; off += TS) {
      const std::int64_t base = start + off;
      // this group's lookups in the tile, and the warp's most
      const int n = static_cast<int>(max(std::int64_t{0}, min(static_cast<std::int64_t>(TS), end - base)));
      const int n_warp = static_cast<int>(min(static_cast<std::int64_t>(TS), L_warp - off));
      Tile t = off == 0 ? first : load_tile(base, end);
      if (a.check_indices) {
#pragma unroll
        for (int h = 0; h < kSlots; ++h) {
          if (h * G + glane < n && (t.idx[h] < 0 || t.idx[h] >= rows)) {
            t.idx[h] = TBE_MUTANT_SWAP(a, kBoundsRepairToLastRow, rows - 1, 0);  // bad index -> row 0, its weight kept
            if (count_bad) atomicAdd(&a.counters->bad_indices, 1ull);
          }
        }
      }
      // Batches of kRowsInFlight rows, in index order. While every group of the warp still has a
      // whole batch and every lane a column (the common case), without per-row predicates.
      const int n_min = G < tuning::kWarpThreads ? __reduce_min_sync(kFullWarp, n) : n;
      int j = 0;
      if (warp_active)
        for (; j + kRowsInFlight <= n_min; j += kRowsInFlight)
          batch<kRows32, kWeighted, true>(acc, t, j, n, true, table_c, D, row_bytes);
      for (; j < n_warp; j += kRowsInFlight)
        batch<kRows32, kWeighted, false>(acc, t, j, n, active, table_c, D, row_bytes);
    }
  }

  /// Rows [j, j + kRowsInFlight) of a tile (n of them this group's): loaded back to back, then
  /// accumulated in index order. kFull: all rows exist and the lane's columns are active.
  template <bool kRows32, bool kWeighted, bool kFull>
  __device__ __forceinline__ void batch(Acc (&acc)[VEC], const Tile& t, int j, int n, bool active,
                                        const W* table_c, int D, std::uint32_t row_bytes) const {
    RawRow<W, VEC> rows_raw[kRowsInFlight];
    float ws[kRowsInFlight];
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u) {
      const bool live = kFull || (j + u < n && active);
      const int jj = kFull || j + u < n ? j + u : 0;
      const bool hi = kSlots > 1 && jj >= G;  // group-uniform
      const int src = group_base | (jj & (G - 1));
      std::int64_t r;
      if constexpr (kRows32) {
        r = static_cast<std::uint32_t>(__shfl_sync(
            kFullWarp, static_cast<std::uint32_t>(hi ? t.idx[kSlots - 1] : t.idx[0]), src));
      } else {
        r = __shfl_sync(kFullWarp, hi ? t.idx[kSlots - 1] : t.idx[0], src);
      }
      if constexpr (kWeighted) ws[u] = __shfl_sync(kFullWarp, hi ? t.w[kSlots - 1] : t.w[0], src);
      if (live) rows_raw[u] = load_raw<W, VEC>(row_address<kRows32>(table_c, r, D, row_bytes));
    }
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u) {
      if (kFull || (j + u < n && active)) {
        float x[VEC];
        raw_to_float<W, VEC>(rows_raw[u], x);
        if (TBE_MUTANT_SWAP(a, kFwdPswIgnoredScalar, kWeighted && VEC != 1, kWeighted)) {
#pragma unroll
          for (int v = 0; v < VEC; ++v) acc[v] = fma(Acc(ws[u]), widen<Acc>(x[v]), acc[v]);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) TBE_MUTANT_SWAP(a, kFwdFp32AccUnderFp64, acc[v] = Acc(static_cast<float>(acc[v]) + x[v]), acc[v] += widen<Acc>(x[v]));
        }
      }
    }
  }

  /// Gathers bag k = [start, end); `first` is this lane's share of the bag's first tile.
  /// The warp's groups run in lock step (loop counts from the warp's longest bag, per-lane
  /// predicates), so every index broadcast is a full-warp shuffle with a constant mask; a group
  /// with live == false (past the launch's last bag) takes part with an empty bag and writes
  /// nothing.
  template <bool kRows32, bool kWeighted>
  __device__ __forceinline__ void bag(bool live, std::int64_t k, std::int64_t start,
                                      std::int64_t end, const Tile& first) const {
    int D = 0;  // dead group: no column is active
    std::int64_t rows = 0;
    const W* table = static_cast<const W*>(a.weights);
    Out* out = nullptr;
    if (live) {
      const std::int64_t s = pooled_segment_of(a, k);
      const SegmentMeta seg = a.segs[s];
      const FeatureMeta fm = a.features[seg.feature];
      D = fm.dim;
      rows = fm.rows;
      table += fm.table_offset;
      out = static_cast<Out*>(a.output) + pooled_out_offset(a, s, seg, k);
    }
    // fused bounds check: bag k was repaired iff its repaired end differs from the raw one
    // (k + 1 < num_bags; the last offset is counted by the scan), or k == 0 and its start moved.
    // The raw offsets are loaded here and compared after the gather (no stall on them).
    std::int64_t raw_end = end;
    bool count_bag = live && a.orig_offsets != nullptr && glane == 0;
    if (count_bag) {
      const Idx* raw = static_cast<const Idx*>(a.orig_offsets);
      if (k + 1 < a.num_bags) raw_end = static_cast<std::int64_t>(raw[k + 1]);
      if (k == 0 && static_cast<std::int64_t>(raw[0]) != start) {  // one bag: no deferral
        atomicAdd(&a.counters->bad_bags, 1ull);
        count_bag = false;
      }
    }
    const std::int64_t L = end - start;
    // the warp's longest bag: every group's loops run to it (G < 32: several bags per warp)
    std::int64_t L_warp = L;
    for (int o = G; o < tuning::kWarpThreads; o <<= 1) L_warp = max(L_warp, __shfl_xor_sync(kFullWarp, L_warp, o));

    // Column chunks (D > G·VEC, then G = 32: one group per warp). At least one pass, so a dead
    // group of a shared warp (D = 0) follows its live neighbours' single pass (G < 32 means
    // D <= G·VEC: one pass for every live group too).
    const int chunk_end = TBE_MUTANT_SWAP(a, kFwdColumnChunkTailDropped, D > G * VEC ? D / (G * VEC) * (G * VEC) : D, TBE_MUTANT_SWAP(a, kFwdLastColumnChunkDropped, D > G * VEC ? D - G * VEC : D, D));
    int c0 = 0;
    do {
      const int c = c0 + glane * VEC;
      const bool active = TBE_MUTANT_SWAP(a, kFwdTailOfDUnwritten, c + VEC < D, c < D);  // vector path: D % VEC == 0, so c < D means a full vector
      Acc acc[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = Acc(0);
      const W* table_c = table + c;
      sum_columns<kRows32, kWeighted>(acc, start, end, L_warp, first, table_c, D, rows, active, c0 == 0);
      if (active) {
        Out o[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          const Acc x = TBE_MUTANT_SWAP(a, kFwdMeanMissing, acc[v], TBE_MUTANT_SWAP(a, kFwdMeanDoubled, (a.mean && L > 0) ? acc[v] / Acc(L) / Acc(L) : acc[v], (a.mean && L > 0) ? acc[v] / Acc(L) : acc[v]));
          o[v] = round_out<Out>(x);
        }
        store_out<Out, VEC>(out + c, o);
      }
      c0 += G * VEC;
    } while (c0 < chunk_end);
    if (count_bag && raw_end != end) atomicAdd(&a.counters->bad_bags, 1ull);
  }

};

/// The span of a merged launch that block b belongs to: the last span whose first_block <= b
/// (spans ordered by first_block, spans[0].first_block = 0). Each warp searches on its own, 32
/// spans per step (one load per lane, a ballot), so a launch of up to 32 spans costs one load
/// before the bag's offsets; the span record is then read from the same lines (L1).
__device__ __forceinline__ int span_of_block(const PooledArgs& a, std::uint32_t b, int lane) {
  const PooledSpan* spans = a.spans;
  const int num_spans = a.num_spans;
  int found = 0;
  for (int base = 0; base < num_spans; base += tuning::kWarpThreads) {
    const int i = base + lane;
    const bool started = i < num_spans && TBE_MUTANT_SWAP(a, kFwdSpanStartsLate, __ldg(&spans[i].first_block) < b,
                                                     __ldg(&spans[i].first_block) <= b);
    const unsigned m = __ballot_sync(0xffffffffu, started);
    if (m != 0) found = base + 31 - __clz(m);
    if (m != 0xffffffffu) break;  // ordered: no later span starts at or before b
  }
  return found;
}

/// One kernel per combination of the launch's uniform flags (kRows32 = PooledArgs::rows32,
/// kWeighted = per-sample weights, kSpans = a merged launch's span list), so each gets its own
/// register allocation (one kernel holding all four spilled 100-476 bytes in its FP64-accumulation
/// instances; bench/results/README.md, session 20). kSpans: a block's group size comes from a
/// load, not from the launch's parameters, so the launches of one range keep the instance whose
/// group size the compiler sees as the launch's constant.
template <class W, class Acc, class Out, class Idx, int VEC, bool kPipelined, int kRows,
          bool kRows32, bool kWeighted, bool kSpans>
__global__ void __launch_bounds__(kPooledBlock, kPipelined
                                                     ? tuning::PooledGather::kMinBlocksPerSmPipelined
                                                     : tuning::PooledGather::kMinBlocksPerSm)
pooled_gather_group_per_bag(const PooledArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const int lane = threadIdx.x & 31;
  // the block's bags and group size: the launch's, or those of its span (merged launch)
  std::int64_t span_begin = a.bag_begin, span_end = a.bag_end;
  int G = a.group_size;
  std::uint32_t block = blockIdx.x;
  if constexpr (kSpans) {
    static_assert(!kPipelined, "the persistent grid strides over one range");
    const PooledSpan sp = a.spans[span_of_block(a, block, lane)];
    span_begin = sp.bag_begin;
    span_end = sp.bag_end;
    G = sp.group_size;
    block -= sp.first_block;
  }
  const int log2_g = __ffs(G) - 1;  // G is a power of two: shifts, not divisions
  using Gather = PooledGather<W, Acc, Out, Idx, VEC, kRows>;
  const Gather gather{a, G, lane & (G - 1), lane & ~(G - 1)};
  const std::int64_t groups_per_block = kPooledBlock >> log2_g;
  std::int64_t k = span_begin + static_cast<std::int64_t>(block) * groups_per_block +
                   (threadIdx.x >> log2_g);
  const std::int64_t bag_end = TBE_MUTANT_SWAP(a, kFwdLastBagSkipped, span_end - 1, span_end);
  bool live = k < bag_end;
  // a warp leaves only as a whole: its groups share the full-warp index shuffles
  if (!__any_sync(Gather::kFullWarp, live)) return;
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  std::int64_t cur_s = 0, cur_e = 0;
  if (live) {
    cur_s = offsets[k];
    cur_e = offsets[k + 1];
  }
  typename Gather::Tile cur = gather.load_tile(cur_s, cur_e);
  if constexpr (!kPipelined) {
    gather.template bag<kRows32, kWeighted>(live, k, cur_s, cur_e, cur);
  } else {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * groups_per_block;
    std::int64_t kn = k + stride;
    std::int64_t nxt_s = 0, nxt_e = 0;
    if (kn < bag_end) {
      nxt_s = offsets[kn];
      nxt_e = offsets[kn + 1];
    }
    while (true) {
      // in flight while bag k is gathered: the next bag's first index tile, the offsets after it
      const typename Gather::Tile nxt =
          gather.load_tile(nxt_s, kn < bag_end ? nxt_e : nxt_s);  // empty range past the end
      const std::int64_t knn = kn + stride;
      std::int64_t nn_s = 0, nn_e = 0;
      if (knn < bag_end) {
        nn_s = offsets[knn];
        nn_e = offsets[knn + 1];
      }
      gather.template bag<kRows32, kWeighted>(live, k, cur_s, cur_e, cur);
      live = kn < bag_end;
      if (!__any_sync(Gather::kFullWarp, live)) break;
      k = kn; cur_s = nxt_s; cur_e = nxt_e; cur = nxt;
      kn = knn; nxt_s = nn_s; nxt_e = nn_e;
    }
  }
}

template <DType kW, DType kAcc, DType kOut, DType kIdx, int kVecBytes, bool kPipelined, int kRows,
          bool kRows32, bool kWeighted, bool kSpans>
void launch_pooled_kernel(const PooledArgs& a, cudaStream_t stream) {
  using W = storage_t<kW>;
  constexpr int VEC = kVecBytes > 0 ? kVecBytes / static_cast<int>(sizeof(W)) : 1;
  auto* kernel = pooled_gather_group_per_bag<W, storage_t<kAcc>, storage_t<kOut>, storage_t<kIdx>,
                                             VEC, kPipelined, kRows, kRows32, kWeighted, kSpans>;
  std::int64_t blocks = 0;
  if constexpr (kSpans) {  // merged launch: the host counted each span's blocks
    blocks = a.span_blocks;
  } else {
    const std::int64_t bags = a.bag_end - a.bag_begin;
    const std::int64_t per_block = kPooledBlock / a.group_size;
    blocks = (bags + per_block - 1) / per_block;
  }
  if (blocks <= 0) return;
  static int carveout_set = -1;  // per instance: the L1 preference last applied
  if (carveout_set != static_cast<int>(a.prefer_l1)) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                         a.prefer_l1 ? cudaSharedmemCarveoutMaxL1 : cudaSharedmemCarveoutDefault);
    carveout_set = static_cast<int>(a.prefer_l1);
  }
  if constexpr (kPipelined) {
    static const int resident_blocks = [&] {  // per instance: resident blocks on the device
      int dev = 0, sms = 0, per_sm = 0;
      cudaGetDevice(&dev);
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPooledBlock, 0);
      cudaGetLastError();
      return std::max(1, sms * per_sm);
    }();
    blocks = std::min<std::int64_t>(blocks, resident_blocks);
  }
  kernel<<<static_cast<unsigned>(blocks), kPooledBlock, 0, stream>>>(a);
}

/// The group-per-bag launch with the kernel instance of the launch's flags (32-bit row
/// arithmetic, per-sample weights, a merged launch's spans; all uniform over the grid). Spans
/// are compiled for the default kernel only (one group per bag, kRowsInFlight rows): the plan
/// merges no launch of the pipelined or 8-rows kernels (src/forward_op.cpp). kVecBytes: the
/// bytes of a lane's vector (tuning::PooledGather::kVectorBytes, kNarrowVectorBytes for 16-bit
/// weights) or 0 (one element).
template <DType kW, DType kAcc, DType kOut, DType kIdx, int kVecBytes, bool kPipelined, int kRows>
void launch_pooled_t(const PooledArgs& a, cudaStream_t stream) {
  constexpr bool kMayMerge = !kPipelined && kRows == tuning::PooledGather::kRowsInFlight;
  if (!kMayMerge && a.spans != nullptr)
    throw std::logic_error("pooled gather: a merged launch on the pipelined or 8-rows kernel");
  dispatch::dispatch_flag(a.rows32, [&](auto rows32) {
    constexpr bool kRows32 = decltype(rows32)::value;
    dispatch::dispatch_flag(a.per_sample_weights != nullptr, [&](auto weighted) {
      constexpr bool kWeighted = decltype(weighted)::value;
      dispatch::dispatch_flag(kMayMerge && a.spans != nullptr, [&](auto spans) {
        constexpr bool kSpans = decltype(spans)::value;
        if constexpr (kMayMerge || !kSpans)
          launch_pooled_kernel<kW, kAcc, kOut, kIdx, kVecBytes, kPipelined, kRows, kRows32, kWeighted,
                               kSpans>(a, stream);
      });
    });
  });
}

// Instantiations, one macro per weights type (kernels/pooled_gather_<w>.cu); every instance
// must be a row of dispatch/dispatch.h's tables (static_assert), and the dispatch references every
// row (so a row without its instance is a link error).
#define TBE_INSTANTIATE_POOLED_FOR(W)                                                        \
  TBE_INSTANTIATE_POOLED_ACC(W, DType::F32)                                                  \
  TBE_INSTANTIATE_POOLED_ACC(W, DType::F64)
#define TBE_INSTANTIATE_POOLED_ACC(W, ACC)                                                   \
  TBE_INSTANTIATE_POOLED_OUT(W, ACC, DType::F32)                                             \
  TBE_INSTANTIATE_POOLED_OUT(W, ACC, DType::F16)                                             \
  TBE_INSTANTIATE_POOLED_OUT(W, ACC, DType::BF16)
#define TBE_POOLED_INSTANCE(W, ACC, OUT, IDX, VEC, PIPE, ROWS)                               \
  template void launch_pooled_t<W, ACC, OUT, IDX, VEC, PIPE, ROWS>(const PooledArgs&, cudaStream_t);
#define TBE_INSTANTIATE_POOLED_OUT(W, ACC, OUT)                                              \
  static_assert(dispatch::contains(dispatch::kCompiledForward, dispatch::TypeCombo{W, ACC, OUT})); \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I32, kPooledVec, false, tuning::PooledGather::kRowsInFlight) \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I32, 0, false, tuning::PooledGather::kRowsInFlight)          \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I64, kPooledVec, false, tuning::PooledGather::kRowsInFlight) \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I64, 0, false, tuning::PooledGather::kRowsInFlight)
/// The narrow vector path of 16-bit weights (kernels/pooled_gather_narrow.cu): 8-byte vectors of
/// 4 elements for rows whose starts are 8- but not 16-byte aligned or whose D % 8 == 4; the
/// default kernel only (ForwardTuning::narrow_vectors).
#define TBE_INSTANTIATE_POOLED_NARROW_FOR(W)                                                 \
  TBE_INSTANTIATE_POOLED_NARROW_ACC(W, DType::F32)                                           \
  TBE_INSTANTIATE_POOLED_NARROW_ACC(W, DType::F64)
#define TBE_INSTANTIATE_POOLED_NARROW_ACC(W, ACC)                                            \
  TBE_INSTANTIATE_POOLED_NARROW_OUT(W, ACC, DType::F32)                                      \
  TBE_INSTANTIATE_POOLED_NARROW_OUT(W, ACC, DType::F16)                                      \
  TBE_INSTANTIATE_POOLED_NARROW_OUT(W, ACC, DType::BF16)
#define TBE_INSTANTIATE_POOLED_NARROW_OUT(W, ACC, OUT)                                       \
  static_assert(dispatch::contains(dispatch::kCompiledForward, dispatch::TypeCombo{W, ACC, OUT})); \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I32, kPooledNarrowVec, false, tuning::PooledGather::kRowsInFlight) \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I64, kPooledNarrowVec, false, tuning::PooledGather::kRowsInFlight)
/// The ForwardTuning variants (kCompiledPooledTuning: FP32 output, vector path): the pipelined
/// persistent grid and 8 rows in flight.
#define TBE_INSTANTIATE_POOLED_TUNING(W, ACC)                                                \
  static_assert(dispatch::contains(dispatch::kCompiledPooledTuning,                          \
                                   dispatch::TypeCombo{W, ACC, DType::F32}));                \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I64, kPooledVec, true,                      \
                      tuning::PooledGather::kRowsInFlight)                                   \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I32, kPooledVec, true,                      \
                      tuning::PooledGather::kRowsInFlight)                                   \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I64, kPooledVec, false,                     \
                      tuning::PooledGather::kRowsInFlightMany)                               \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I32, kPooledVec, false,                     \
                      tuning::PooledGather::kRowsInFlightMany)

}  // namespace tbe::cuda::detail
