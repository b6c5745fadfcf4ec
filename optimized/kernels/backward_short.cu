// Short runs (SL < long_run_threshold): one group per run gathers the run's grad_output rows in
// sorted order, accumulates them in registers (Acc), applies the optimizer and stores the row with
// plain stores (kernels/backward_run_work.cuh short_run; BackwardTuning::RunLaunch's one launch
// runs the same item from kernels/backward_interleaved.cu instead). Two instances per type
// (RunArgs::short_staged, chosen by the host per call): the register gather at 4 blocks per SM,
// and the staged one (runs longer than one register batch staged through per-lane cp.async rings
// for warp groups: kernels/backward_runs.cuh) at 3. Persistent
// grid: groups stride over the runs up to the device count R (the launch is sized by the device,
// not by R, so nothing is read back); long runs and the sentinel run (positions outside every bag)
// are skipped. With BackwardTuning::ShortGroups::PerDim a third kernel (two instances, as above)
// takes the runs of one group size's tables per launch (short_runs_per_dim).
#include <stdexcept>

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

// BackwardTuning::ShortGroups::PerDim: the runs of a.class_tables only, at their group size
// (a.group_size, warp groups). The tables' runs are taken as one sequence (table after table):
// group gid takes runs gid, gid + groups, ... of it, so every group gets the same number of runs
// however many each table has (a stride restarted at each table's first run would load the first
// groups with one run of every table).
template <class W, class Acc, class Out, int kStage>
__global__ void __launch_bounds__(kRunBlock, kStage > 0 ? tuning::RunKernels::kShortMinBlocksPerSmStaged
                                                        : tuning::RunKernels::kShortMinBlocksPerSm)
short_runs_per_dim(const RunArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const RunGroup<false> g = RunGroup<false>::make(a.group_size);
  // (32-bit: R < 2^31 runs, groups < 2^31)
  const auto groups = static_cast<std::uint32_t>(g.num_groups);
  std::uint32_t phase = static_cast<std::uint32_t>(g.gid);  // (gid - runs before this table) mod groups
  for (std::int32_t i = 0; i < a.num_class_tables; ++i) {
    const std::int32_t t = a.class_tables[i];
    const std::uint32_t lo = a.table_runs[t], hi = a.table_runs[t + 1];
    short_runs_pipelined<W, Acc, Out, false, kStage>(a, g, static_cast<std::int64_t>(lo) + phase, hi, groups);
    const std::uint32_t n = (hi - lo) % groups;  // this table's runs, mod groups
    phase = phase >= n ? phase - n : phase + groups - n;
  }
}

}  // namespace

template <DType kW, DType kAcc, DType kOut, bool kBlock>
void launch_short_runs_t(const RunArgs& a, cudaStream_t stream) {
  using W = storage_t<kW>;
  using Acc = storage_t<kAcc>;
  using Out = storage_t<kOut>;
  constexpr int kStaged = tuning::RunKernels::kShortStageRows;
  if constexpr (!kBlock) {
    if (a.class_tables != nullptr) {  // ShortGroups::PerDim (the host never asks it of block groups)
      if (a.group_size == 1)  // one lane per run: its own instance (kStageLane)
        return launch_persistent<short_runs_per_dim<W, Acc, Out, kStageLane>, false>(a, stream);
      if constexpr (kStaged > 0) {  // the staged instance where the group can stage its rows
        if (a.short_staged && a.group_size >= kStaged)
          return launch_persistent<short_runs_per_dim<W, Acc, Out, kStaged>, false,
                                   kRunStageBytes<Out, false, kStaged>>(a, stream);
      }
      return launch_persistent<short_runs_per_dim<W, Acc, Out, 0>, false>(a, stream);
    }
  }
  if constexpr (kBlock) {
    if (a.class_tables != nullptr)
      throw std::logic_error("short runs: per-D launches (ShortGroups::PerDim) of block groups");
  }
  if constexpr (!kBlock && kStaged > 0) {
    if (a.short_staged)
      return launch_persistent<short_runs_group_per_run<W, Acc, Out, kBlock, kStaged>, kBlock,
                               kRunStageBytes<Out, kBlock, kStaged>>(a, stream);
  }
  launch_persistent<short_runs_group_per_run<W, Acc, Out, kBlock, 0>, kBlock>(a, stream);
}

TBE_BWD_INSTANTIATE(launch_short_runs_t)

}  // namespace tbe::cuda::detail
