// Long runs (SL >= long_run_threshold), split into chunks of chunk_size sorted lookups:
// - chunk kernel: one group per chunk accumulates the chunk (same sorted gather as short runs) and
//   writes its partial row sum to the workspace (deterministic), or adds it to the run's
//   accumulator row with float atomics (deterministic = false: the order of the atomics varies);
//   Fused: the group then fences (__threadfence), counts itself on the run's arrival counter
//   (atomicAdd), and the last chunk to arrive sums the partials in chunk order (ld.cg, past L1)
//   and applies the optimizer in the same launch, then resets the counter;
// - apply kernel (Chunked): one group per long run sums its partials in chunk order and applies.
// A run's result depends only on its chunks' partials and their order, never on which slot or
// group handled it: deterministic mode is bitwise reproducible. The chunk and the partial sum are
// kernels/backward_run_work.cuh long_chunk / reduce_partials (BackwardTuning::RunLaunch::
// Interleaved takes the same chunks from kernels/backward_interleaved.cu instead).
#include "kernels/backward_run_work.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

/// kDynamic (BackwardTuning::ChunkSchedule::Dynamic): each group takes the next chunk of the order
/// from counters->chunk_cursor; else group g takes chunks g, g + groups, ... (Static). Two
/// instances, so that neither schedule pays for the other's code.
template <class W, class Acc, class Out, bool kBlock, bool kDynamic>
__global__ void __launch_bounds__(kBlock ? kMaxBlockGroup : kRunBlock,
                                  kBlock ? tuning::RunKernels::kBlockGroupMinBlocksPerSm
                                         : tuning::RunKernels::kLongMinBlocksPerSm)
long_chunks_group_per_chunk(const RunArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const RunGroup<kBlock> g = RunGroup<kBlock>::make(a.group_size);
  if constexpr (kDynamic) {
    long_chunks_dynamic<W, Acc, Out, kBlock>(a, g);
  } else {
    const std::int64_t num_chunks = a.counters->num_chunks;
    for (std::int64_t idx = g.gid; idx < num_chunks; idx += g.num_groups)
      long_chunk<W, Acc, Out, kBlock>(a, g, idx);
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
  using W = storage_t<kW>;
  using Acc = storage_t<kAcc>;
  using Out = storage_t<kOut>;
  constexpr int kSmem = kRunStageBytes<Out, kBlock, tuning::RunKernels::kLongStageRows>;
  if (a.dynamic_chunks)
    launch_persistent<long_chunks_group_per_chunk<W, Acc, Out, kBlock, true>, kBlock, kSmem>(a, stream);
  else
    launch_persistent<long_chunks_group_per_chunk<W, Acc, Out, kBlock, false>, kBlock, kSmem>(a, stream);
}

template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_long_apply_t(const RunArgs& a, cudaStream_t stream) {
  launch_persistent<long_apply_group_per_run<storage_t<kW>, storage_t<kAcc>, storage_t<kOut>, kBlock>,
                    kBlock>(a, stream);
}

TBE_BWD_INSTANTIATE(launch_long_chunks_t)
TBE_BWD_INSTANTIATE(launch_long_apply_t)

}  // namespace tbe::cuda::detail
