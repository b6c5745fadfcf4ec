// Short runs (SL < long_run_threshold): one group per run gathers the run's grad_output rows in
// sorted order, accumulates them in registers (Acc), applies the optimizer and stores the row with
// plain stores (kernels/backward_run_work.cuh short_run; BackwardTuning::RunLaunch's one launch
// runs the same item from kernels/backward_interleaved.cu instead). Two instances per type
// (RunArgs::short_staged, chosen by the host per call): the register gather at 4 blocks per SM,
// and the staged one (runs longer than one register batch staged through per-lane cp.async rings
// for warp groups: kernels/backward_runs.cuh) at 3. Persistent
// grid: groups stride over the runs up to the device count R (the launch is sized by the device,
// not by R, so nothing is read back); long runs and the sentinel run (positions outside every bag)
// are skipped.
#include "kernels/backward_run_work.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

// Warp groups: tuning::RunKernels::kShortMinBlocksPerSm blocks of 256 per SM with the register
// gather (kStage = 0), kShortMinBlocksPerSmStaged with the staged gather's rings (the table has the
// measurements). Block groups always gather through registers (kStage = 0).
template <class W, class Acc, class Out, bool kBlock, int kStage>
__global__ void __launch_bounds__(kBlock ? kMaxBlockGroup : kRunBlock,
                                  kBlock ? tuning::RunKernels::kBlockGroupMinBlocksPerSm
                                  : kStage > 0 ? tuning::RunKernels::kShortMinBlocksPerSmStaged
                                               : tuning::RunKernels::kShortMinBlocksPerSm)
short_runs_group_per_run(const RunArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const RunGroup<kBlock> g = RunGroup<kBlock>::make(a.group_size);
  const std::int64_t R = TBE_MUTANT_SWAP(a, kBwdRleLastRunDropped, *a.num_runs - 1, *a.num_runs);
  short_runs_pipelined<W, Acc, Out, kBlock, kStage>(a, g, g.gid, R, g.num_groups);
}

}  // namespace

template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_short_runs_t(const RunArgs& a, cudaStream_t stream) {
  using W = storage_t<kW>;
  using Acc = storage_t<kAcc>;
  using Out = storage_t<kOut>;
  constexpr int kStaged = tuning::RunKernels::kShortStageRows;
  if constexpr (!kBlock && kStaged > 0) {
    if (a.short_staged)
      return launch_persistent<short_runs_group_per_run<W, Acc, Out, kBlock, kStaged>, kBlock,
                               kRunStageBytes<Out, kBlock, kStaged>>(a, stream);
  }
  launch_persistent<short_runs_group_per_run<W, Acc, Out, kBlock, 0>, kBlock>(a, stream);
}

TBE_BWD_INSTANTIATE(launch_short_runs_t)

}  // namespace tbe::cuda::detail
