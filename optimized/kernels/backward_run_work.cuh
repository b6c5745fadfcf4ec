// The work items of the backward run kernels, one definition each, shared by the launches that
// schedule them (kernels/backward_short.cu, backward_long.cu, backward_interleaved.cu):
// - short_run: one run below the long-run threshold, gathered and applied by one group;
// - long_chunk: one chunk of a long run (its partial, or its atomics), and under Fused the run's
//   apply by the group whose chunk arrived last;
// - reduce_partials: a long run's partials summed in chunk order (the fused apply and the apply
//   kernel);
// - take: a group's next index from a device cursor (the dynamic schedules).
// An item's result depends only on the item, never on the group or the launch that ran it: every
// schedule gives the same bits (deterministic mode).
#pragma once

#include "kernels/backward_optimizer.cuh"

namespace tbe::cuda::detail {

/// The group's next `n` items of a device cursor: lane 0 adds n (one atomicAdd), every lane gets
/// the old value. Each group takes past the end at most once per cursor and loop (plus one batch
/// ahead for short runs), so the 32-bit cursor stays far below 2^32 for N < 2^31 lookups.
template <bool kBlock>
__device__ __forceinline__ std::int64_t take(const RunGroup<kBlock>& g, unsigned int* cursor,
                                             unsigned int n) {
  unsigned taken = 0;
  if (g.glane == 0) taken = atomicAdd(cursor, n);
  return static_cast<std::int64_t>(g.broadcast(taken, 0));
}

/// One run of `sl` sorted lookups from `begin`, row `key`: a short run not owned by the
/// small-table histogram path is gathered in sorted order (kStage: kernels/backward_runs.cuh
/// accumulate_sorted) and its row updated; long runs and the sentinel run (positions outside
/// every bag) are skipped. Uniform inside the group.
template <class W, class Acc, class Out, bool kBlock, int kStage>
__device__ __forceinline__ void short_run(const RunArgs& a, const RunGroup<kBlock>& g,
                                          std::int32_t sl, std::int64_t key, std::uint32_t begin) {
  if (sl >= a.long_threshold || key >= a.sentinel || histogram_owns(a, key, sl)) return;
  const BwdTableMeta t = table_of(a, key);
  const RowState st = load_row_state<W, kBlock>(a, g, key, t);
  Acc acc[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
  accumulate_sorted<Out, Acc, kBlock, kStage, kRunRowsInFlight>(a, g, begin, begin + static_cast<std::uint32_t>(sl), t.dim, acc);
  apply_row<W, Acc, kBlock>(a, g, key, t, st, acc);
}

/// The short runs first, first + stride, ... below stop, each through short_run; software pipeline:
/// the next run's length, key and offset are in flight while this one runs. Both schedules take
/// it (the static stride of kernels/backward_short.cu, the batches of kernels/backward_interleaved.cu).
template <class W, class Acc, class Out, bool kBlock, int kStage>
__device__ __forceinline__ void short_runs_pipelined(const RunArgs& a, const RunGroup<kBlock>& g,
                                                     std::int64_t first, std::int64_t stop,
                                                     std::int64_t stride) {
  if (first >= stop) return;
  std::int32_t sl = a.run_lengths[first];
  std::int64_t key = run_key(a, first);
  std::uint32_t begin = a.run_offsets[first];
  for (std::int64_t i = first; i < stop; i += stride) {  // uniform inside a group
    const std::int64_t in = i + stride;
    std::int32_t sl_n = 0;
    std::int64_t key_n = 0;
    std::uint32_t begin_n = 0;
    if (in < stop) {
      sl_n = a.run_lengths[in];
      key_n = run_key(a, in);
      begin_n = a.run_offsets[in];
    }
    short_run<W, Acc, Out, kBlock, kStage>(a, g, sl, key, begin);
    sl = sl_n;
    key = key_n;
    begin = begin_n;
  }
}

/// Σ of the run's partials (or its atomic accumulator) for this lane's 4 columns, chunk order.
template <class Acc, bool kBlock>
__device__ __forceinline__ void reduce_partials(const RunArgs& a, const RunGroup<kBlock>& g,
                                                std::uint32_t slot, const LongRun& lr, int D,
                                                Acc (&total)[4]) {
  const int c = g.glane * 4;
  if (c >= D) return;
  if (!a.deterministic) {
    const Acc* row = static_cast<const Acc*>(a.accumulators) + static_cast<std::int64_t>(slot) * a.row_stride + c;
#pragma unroll
    for (int v = 0; v < 4; ++v) total[v] = load_cg(row + v);
    return;
  }
  const Acc* part = static_cast<const Acc*>(a.partials);
  for (std::uint32_t j = 0; j < TBE_MUTANT_SWAP(a, kBwdChunkPartialLost, lr.num_chunks - 1, lr.num_chunks); ++j) {
    const Acc* row = part + static_cast<std::int64_t>(lr.chunk_base + j) * a.row_stride + c;
#pragma unroll
    for (int v = 0; v < 4; ++v) total[v] += TBE_MUTANT_SWAP(a, kBwdChunkPartialDoubled, Acc(j == 0 ? 2 : 1) * load_cg(row + v), load_cg(row + v));
  }
}

/// Chunk `idx` of the chunk order (a.chunk_order: chunks by the position of their first lookup):
/// its chunk_size sorted lookups (fewer for a run's last chunk) gathered (kStage:
/// RunKernels::kLongStageRows) into its partial row (deterministic) or added to the run's
/// accumulator row with float atomics. Fused: the group then fences (__threadfence), counts itself
/// on the run's arrival counter (atomicAdd), and the last chunk to arrive sums the partials in
/// chunk order (ld.cg, past L1), applies the optimizer and resets the counter.
template <class W, class Acc, class Out, bool kBlock>
__device__ __forceinline__ void long_chunk(const RunArgs& a, const RunGroup<kBlock>& g,
                                           std::int64_t idx) {
  const std::int64_t ch = a.chunk_order[idx];
  const std::uint32_t slot = a.chunk_run[ch];
  const LongRun lr = a.long_runs[slot];
  const std::uint32_t j = static_cast<std::uint32_t>(ch) - lr.chunk_base;
  const std::int64_t key = run_key(a, lr.run);
  const BwdTableMeta t = table_of(a, key);
  const std::uint32_t run_begin = a.run_offsets[lr.run];
  const std::uint32_t run_end = run_begin + static_cast<std::uint32_t>(a.run_lengths[lr.run]);
  const std::uint32_t begin = run_begin + j * static_cast<std::uint32_t>(a.chunk_size);
  const std::uint32_t end = min(run_end, TBE_MUTANT_SWAP(a, kBwdChunkEndOffByOne, begin + static_cast<std::uint32_t>(a.chunk_size) - 1u, begin + static_cast<std::uint32_t>(a.chunk_size)));
  Acc acc[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
  accumulate_sorted<Out, Acc, kBlock, tuning::RunKernels::kLongStageRows, 0>(a, g, begin, end, t.dim, acc);
  const int c = g.glane * 4;
  if (c < t.dim) {
    if (a.deterministic) {
      Acc* row = static_cast<Acc*>(a.partials) + static_cast<std::int64_t>(ch) * a.row_stride + c;
#pragma unroll
      for (int v = 0; v < 4; ++v) row[v] = TBE_MUTANT_SWAP(a, kBwdFp16Partials, Acc(__half2float(__float2half_rn(static_cast<float>(acc[v])))), acc[v]);
    } else {
      Acc* row = static_cast<Acc*>(a.accumulators) + static_cast<std::int64_t>(slot) * a.row_stride + c;
#pragma unroll
      for (int v = 0; v < 4; ++v)
        if (c + v < t.dim) atomicAdd(row + v, acc[v]);
    }
  }
  if (!a.fused) return;
  TBE_MUTANT_SWAP(a, kBwdFusedFenceMissing, (void)0, __threadfence());  // this group's partial is visible device-wide before it is counted
  g.sync();
  unsigned prev = 0;
  if (g.glane == 0) prev = atomicAdd(&a.run_counters[slot], 1u);
  prev = g.broadcast(prev, 0);
  if (TBE_MUTANT_SWAP(a, kBwdFusedArrivalCount, prev, prev + 1) != lr.num_chunks) return;  // not the last chunk of the run
  __threadfence();  // acquire: every other chunk's partial is visible
  const RowState st = load_row_state<W, kBlock>(a, g, key, t);
  Acc total[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
  reduce_partials<Acc, kBlock>(a, g, slot, lr, t.dim, total);
  apply_row<W, Acc, kBlock>(a, g, key, t, st, total);
  if (g.glane == 0) a.run_counters[slot] = 0u;  // ready for the next call
}

/// Every chunk of the order, taken one at a time from counters->chunk_cursor
/// (BackwardTuning::ChunkSchedule::Dynamic; also the one launch's chunk pool).
template <class W, class Acc, class Out, bool kBlock>
__device__ __forceinline__ void long_chunks_dynamic(const RunArgs& a, const RunGroup<kBlock>& g) {
  const std::int64_t num_chunks = a.counters->num_chunks;
  unsigned int* const cursor = &a.counters->chunk_cursor;
  for (std::int64_t idx = take(g, cursor, 1u); idx < num_chunks; idx = take(g, cursor, 1u))
    long_chunk<W, Acc, Out, kBlock>(a, g, idx);
}

}  // namespace tbe::cuda::detail
