// The forward's dispatch: runtime dtypes of a planned launch -> the template instance that runs it
// (weights × accumulator × output × index × vector path (× the tuning variants)), through the
// tables and helpers of dispatch/dispatch.h. Pooling mode, per-sample weights and the fused
// bounds check are uniform runtime flags of the group-per-bag kernel (a warp-uniform branch costs
// nothing measurable there; templating them would multiply the instance count by 8); the
// streamed kernel's launcher templates weights, check and 32-bit rows (its FP64 instance spilled
// with the check's registers in every variant: kernels/pooled_gather_streamed.cuh).
#include <stdexcept>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/launch.h"
#include "kernels/small_table_launch.h"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

template <DType W, DType Acc, DType Out, DType Idx>
void pooled_vec(const PooledTypes& t, const PooledArgs& a, cudaStream_t s) {
  constexpr int R = tuning::PooledGather::kRowsInFlight;
  constexpr int kMany = tuning::PooledGather::kRowsInFlightMany;
  constexpr int kVec = tuning::PooledGather::kVectorBytes;
  if constexpr (dispatch::contains(dispatch::kCompiledPooledTuning, dispatch::TypeCombo{W, Acc, Out})) {
    constexpr int kFew = tuning::PooledGather::kStreamedRowsFew;
    constexpr int kManyRing = tuning::PooledGather::kStreamedRowsMany;
    if (t.vectorized && t.staged_rows == kFew)
      return launch_pooled_streamed_t<W, Acc, Out, Idx, kFew>(a, s);
    if (t.vectorized && t.staged_rows == kManyRing)
      return launch_pooled_streamed_t<W, Acc, Out, Idx, kManyRing>(a, s);
    if (t.vectorized && t.pipelined) return launch_pooled_t<W, Acc, Out, Idx, kVec, true, R>(a, s);
    if (t.vectorized && t.rows_in_flight == kMany)
      return launch_pooled_t<W, Acc, Out, Idx, kVec, false, kMany>(a, s);
  }
  if constexpr (W == DType::F16 || W == DType::BF16) {  // kernels/pooled_gather_narrow.cu
    if (t.narrow) return launch_pooled_t<W, Acc, Out, Idx, tuning::PooledGather::kNarrowVectorBytes, false, R>(a, s);
  }
  if (t.narrow) throw std::logic_error("pooled gather: the narrow vector path of a 32-bit weight type");
  if (t.vectorized) launch_pooled_t<W, Acc, Out, Idx, kVec, false, R>(a, s);
  else launch_pooled_t<W, Acc, Out, Idx, 0, false, R>(a, s);
}

template <DType W, DType Out, DType Idx>
void sequence_vec(const SequenceTypes& t, const SequenceArgs& a, cudaStream_t s) {
  if (t.vectorized) launch_sequence_t<W, Out, Idx, true>(a, s);
  else launch_sequence_t<W, Out, Idx, false>(a, s);
}

}  // namespace

void launch_pooled(const PooledTypes& t, const PooledArgs& a, cudaStream_t s) {
  // Each type on its own first (the arguments as tbe::validate names them), then the triple.
  if (!dispatch::contains(dispatch::kStorageTypes, t.weights))
    dispatch::throw_unsupported("tables.dtype", t.weights);
  if (!dispatch::contains(dispatch::kAccumulationTypes, t.accumulation))
    dispatch::throw_unsupported("options.policy.accumulation", t.accumulation);
  if (!dispatch::contains(dispatch::kStorageTypes, t.output))
    dispatch::throw_unsupported("options.policy.output", t.output);
  dispatch::dispatch_combo<dispatch::kCompiledForward>(
      {t.weights, t.accumulation, t.output}, "options.policy", [&](auto w, auto acc, auto out) {
        dispatch::dispatch_index(t.index, "lookups.index_dtype", [&](auto idx) {
          pooled_vec<decltype(w)::value, decltype(acc)::value, decltype(out)::value,
                     decltype(idx)::value>(t, a, s);
        });
      });
  check_launch("pooled_gather (group per bag, pipelined or streamed)");
}

void launch_sequence(const SequenceTypes& t, const SequenceArgs& a, cudaStream_t s) {
  dispatch::dispatch_float(t.weights, "tables.dtype", [&](auto w) {
    dispatch::dispatch_float(t.output, "options.policy.output", [&](auto out) {
      dispatch::dispatch_index(t.index, "lookups.index_dtype", [&](auto idx) {
        sequence_vec<decltype(w)::value, decltype(out)::value, decltype(idx)::value>(t, a, s);
      });
    });
  });
  check_launch("sequence_group_per_row");
}

void launch_small_table_forward(DType output, DType index, const SmallTableForwardArgs& a,
                                cudaStream_t s) {
  dispatch::dispatch_combo<dispatch::kCompiledSmallTable>(
      {DType::F16, DType::F32, output}, "options.policy", [&](auto, auto, auto out) {
        dispatch::dispatch_index(index, "lookups.index_dtype", [&](auto idx) {
          launch_small_table_forward_t<decltype(out)::value, decltype(idx)::value>(a, s);
        });
      });
  check_launch("small_table_forward_histogram");
}

}  // namespace tbe::cuda::detail
