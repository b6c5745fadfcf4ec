// Long runs (SL >= long_run_threshold), split into chunks of chunk_size sorted lookups:
// - chunk kernel: one group per chunk accumulates the chunk (same sorted gather as short runs) and
//   writes its partial row sum to the workspace (deterministic), or adds it to the run's
//   accumulator row with float atomics (deterministic = false: the order of the atomics varies);
//   Fused: the group then fences (__threadfence), counts itself on the run's arrival counter
//   (atomicAdd), and the last chunk to arrive sums the partials in chunk order (ld.cg, past L1)
//   and applies the optimizer in the same launch, then resets the counter;
// - apply kernel (Chunked): one group per long run sums its partials in chunk order and applies.
// A run's result depends only on its chunks' partials and their order, never on which slot or
// group handled it: deterministic mode is bitwise reproducible.
#include "kernels/backward_optimizer.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

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

template <class W, class Acc, class Out, bool kBlock>
__global__ void __launch_bounds__(kBlock ? kMaxBlockGroup : kRunBlock,
                                  kBlock ? tuning::RunKernels::kBlockGroupMinBlocksPerSm
                                         : tuning::RunKernels::kLongMinBlocksPerSm)
long_chunks_group_per_chunk(const RunArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const RunGroup<kBlock> g = RunGroup<kBlock>::make(a.group_size);
  const std::int64_t num_chunks = a.counters->num_chunks;
  // the group's next chunk: from the device cursor (Dynamic) or a fixed stride (Static)
  const auto next = [&](std::int64_t idx) -> std::int64_t {
    if (!a.dynamic_chunks) return idx < 0 ? g.gid : idx + g.num_groups;
    unsigned taken = 0;
    if (g.glane == 0) taken = atomicAdd(&a.counters->chunk_cursor, 1u);
    return static_cast<std::int64_t>(g.broadcast(taken, 0));
  };
  for (std::int64_t idx = next(-1); idx < num_chunks; idx = next(idx)) {
    const std::int64_t ch = a.chunk_order[idx];  // chunks by the position of their first lookup
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
    if (!a.fused) continue;
    TBE_MUTANT_SWAP(a, kBwdFusedFenceMissing, (void)0, __threadfence());  // this group's partial is visible device-wide before it is counted
    g.sync();
    unsigned prev = 0;
    if (g.glane == 0) prev = atomicAdd(&a.run_counters[slot], 1u);
    prev = g.broadcast(prev, 0);
    if (TBE_MUTANT_SWAP(a, kBwdFusedArrivalCount, prev, prev + 1) != lr.num_chunks) continue;  // not the last chunk of the run
    __threadfence();  // acquire: every other chunk's partial is visible
    const RowState st = load_row_state<W, kBlock>(a, g, key, t);
    Acc total[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
    reduce_partials<Acc, kBlock>(a, g, slot, lr, t.dim, total);
    apply_row<W, Acc, kBlock>(a, g, key, t, st, total);
    if (g.glane == 0) a.run_counters[slot] = 0u;  // ready for the next call
  }
}

template <class W, class Acc, class Out, bool kBlock>
__global__ void __launch_bounds__(kBlock ? kMaxBlockGroup : kRunBlock,
                                  kBlock ? tuning::RunKernels::kBlockGroupMinBlocksPerSm
                                         : tuning::RunKernels::kLongMinBlocksPerSm)
long_apply_group_per_run(const RunArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const RunGroup<kBlock> g = RunGroup<kBlock>::make(a.group_size);
  const std::int64_t num_long = a.counters->num_long;
  for (std::int64_t s = g.gid; s < num_long; s += g.num_groups) {
    const LongRun lr = a.long_runs[s];
    const std::int64_t key = run_key(a, lr.run);
    const BwdTableMeta t = table_of(a, key);
    const RowState st = load_row_state<W, kBlock>(a, g, key, t);
    Acc total[4] = {Acc(0), Acc(0), Acc(0), Acc(0)};
    reduce_partials<Acc, kBlock>(a, g, static_cast<std::uint32_t>(s), lr, t.dim, total);
    apply_row<W, Acc, kBlock>(a, g, key, t, st, total);
  }
}

}  // namespace

template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_long_chunks_t(const RunArgs& a, cudaStream_t stream) {
  using Out = storage_t<kOut>;
  launch_persistent<long_chunks_group_per_chunk<storage_t<kW>, storage_t<kAcc>, Out, kBlock>, kBlock,
                    kRunStageBytes<Out, kBlock, tuning::RunKernels::kLongStageRows>>(a, stream);
}

template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_long_apply_t(const RunArgs& a, cudaStream_t stream) {
  launch_persistent<long_apply_group_per_run<storage_t<kW>, storage_t<kAcc>, storage_t<kOut>, kBlock>,
                    kBlock>(a, stream);
}

TBE_BWD_INSTANTIATE(launch_long_chunks_t)
TBE_BWD_INSTANTIATE(launch_long_apply_t)

}  // namespace tbe::cuda::detail
