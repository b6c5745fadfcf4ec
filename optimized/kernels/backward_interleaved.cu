// Short runs and long-run chunks in one persistent launch (BackwardTuning::RunLaunch, the default
// where it can run; docs/backward.md "Work routing"): two pools of work items with a device cursor
// each, the chunk order (counters->chunk_cursor, one chunk per take) and the runs
// (counters->run_cursor, batches of tuning::RunKernels::kShortRunsPerGrab runs). Every
// interleave_chunk_every-th warp of the grid starts on the chunks (default: every warp), the
// others on the short runs; each group whose pool is empty moves to the other one. No SM idles
// between two launches' tails, and with every warp on the chunks first the chunks in flight stay
// consecutive in their order (nearby grad_output rows: L2 hits). The items are
// kernels/backward_run_work.cuh's: the same bits as the two launches. Warp groups with the staged
// gather only (the host takes this launch where the staged short-run instance would run: its ring
// serves both items).
#include <stdexcept>

#include "kernels/backward_run_work.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

constexpr int kStage = tuning::RunKernels::kShortStageRows;
/// One ring serves both work items (the host takes this launch only then).
constexpr bool kOneRing = tuning::RunKernels::kOneLaunchRing;

/// The short runs in batches of kShortRunsPerGrab consecutive runs from counters->run_cursor; the
/// next batch is taken one batch ahead (its atomic in flight while this batch runs); a batch runs
/// through short_runs_pipelined.
template <class W, class Acc, class Out>
__device__ __forceinline__ void short_runs_dynamic(const RunArgs& a, const RunGroup<false>& g,
                                                   std::int64_t R) {
  constexpr unsigned kGrab = tuning::RunKernels::kShortRunsPerGrab;
  unsigned int* const cursor = &a.counters->run_cursor;
  std::int64_t base = take(g, cursor, kGrab);
  while (base < R) {
    const std::int64_t next = take(g, cursor, kGrab);
    short_runs_pipelined<W, Acc, Out, false, kStage>(
        a, g, base, min(base + static_cast<std::int64_t>(kGrab), R), 1);
    base = next;
  }
}

template <class W, class Acc, class Out>
__global__ void __launch_bounds__(kRunBlock, tuning::RunKernels::kShortMinBlocksPerSmStaged)
runs_interleaved(const RunArgs a) {
  if constexpr (!kOneRing) return;  // never launched (a sweep build with two ring depths)
  if (fatal_aborted(a.abort_key)) return;
  const RunGroup<false> g = RunGroup<false>::make(a.group_size);
  const std::int64_t R = TBE_MUTANT_SWAP(a, kBwdRleLastRunDropped, *a.num_runs - 1, *a.num_runs);
  // by warp, so that the groups of one warp (G < 32) start on the same pool
  const std::int64_t warp = static_cast<std::int64_t>(blockIdx.x) * (kRunBlock / 32) + (threadIdx.x >> 5);
  const bool chunks_first = warp % a.interleave_chunk_every == 0;
  for (int pass = 0; pass < 2; ++pass) {
    if ((pass == 0) == chunks_first)
      long_chunks_dynamic<W, Acc, Out, false>(a, g);
    else
      short_runs_dynamic<W, Acc, Out>(a, g, R);
  }
}

}  // namespace

template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_runs_interleaved_t(const RunArgs& a, cudaStream_t stream) {
  static_assert(!kBlock, "warp groups only (TBE_BWD_INSTANTIATE_WARP)");
  if constexpr (!kOneRing) throw std::logic_error("runs_interleaved: the short and long rings differ");
  using Out = storage_t<kOut>;
  launch_persistent<runs_interleaved<storage_t<kW>, storage_t<kAcc>, Out>, false,
                    kRunStageBytes<Out, false, kStage>>(a, stream);
}

TBE_BWD_INSTANTIATE_WARP(launch_runs_interleaved_t)

}  // namespace tbe::cuda::detail
