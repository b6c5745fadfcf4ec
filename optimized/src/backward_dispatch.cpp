// The backward's dispatch: runtime (weights, accumulation, grad_output dtype, group kind) -> the
// template instance of a run kernel, over dispatch/dispatch.h kCompiledBackward (BackwardOp's
// can_implement rejects the other combinations before any launch).
#include <stdexcept>

#include "dispatch/dispatch.h"
#include "kernels/backward_launch.h"
#include "kernels/small_table_launch.h"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

enum class Which { Short, Chunks, Apply, Interleaved };

template <DType W, DType Acc, DType Out>
void by_group(Which which, const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  switch (which) {
    case Which::Short:
      return t.block_group ? launch_short_runs_t<W, Acc, Out, true>(a, s)
                           : launch_short_runs_t<W, Acc, Out, false>(a, s);
    case Which::Chunks:
      return t.block_group ? launch_long_chunks_t<W, Acc, Out, true>(a, s)
                           : launch_long_chunks_t<W, Acc, Out, false>(a, s);
    case Which::Apply:
      return t.block_group ? launch_long_apply_t<W, Acc, Out, true>(a, s)
                           : launch_long_apply_t<W, Acc, Out, false>(a, s);
    case Which::Interleaved:  // warp groups only: the plan never takes it for block groups
      if (t.block_group) throw std::logic_error("launch_runs_interleaved: block groups have no instance");
      return launch_runs_interleaved_t<W, Acc, Out, false>(a, s);
  }
}

void dispatch_runs(Which which, const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch::dispatch_combo<dispatch::kCompiledBackward>(
      {t.weights, t.accumulation, t.grad}, "options.policy", [&](auto w, auto acc, auto out) {
        by_group<decltype(w)::value, decltype(acc)::value, decltype(out)::value>(which, t, a, s);
      });
}

}  // namespace

void launch_short_runs(const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch_runs(Which::Short, t, a, s);
  check_launch("short_runs_group_per_run");
}
void launch_long_chunks(const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch_runs(Which::Chunks, t, a, s);
  check_launch("long_chunks_group_per_chunk");
}
void launch_long_apply(const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch_runs(Which::Apply, t, a, s);
  check_launch("long_apply_group_per_run");
}
void launch_runs_interleaved(const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch_runs(Which::Interleaved, t, a, s);
  check_launch("runs_interleaved");
}

void launch_small_table_backward(DType grad, DType index, const SmallTableBackwardArgs& a,
                                 cudaStream_t s) {
  dispatch::dispatch_combo<dispatch::kCompiledSmallTable>(
      {DType::F16, DType::F32, grad}, "options.policy", [&](auto, auto, auto g) {
        dispatch::dispatch_index(index, "lookups.index_dtype", [&](auto idx) {
          launch_small_table_backward_t<decltype(g)::value, decltype(idx)::value>(a, s);
        });
      });
  check_launch("small_table_grad_split_k(_warp) / small_table_apply_block_per_row");
}

}  // namespace tbe::cuda::detail
