// The one dispatch point: runtime dtypes of a planned launch -> the template instance that runs it
// (weights F32/F16/BF16 × accumulator F32/F64 × output F32/F16/BF16 × index I32/I64 × vector path).
// Pooling mode, per-sample weights and the fused bounds check are uniform runtime flags of the
// kernel (a warp-uniform branch costs nothing measurable; templating them would multiply the
// instance count by 8).
#include <string>

#include "kernels/launch.h"
#include "src/cuda_check.h"
#include "tbe/errors.h"

namespace tbe::cuda::detail {
namespace {

[[noreturn]] void unsupported(const char* what, DType t) {
  throw InvalidArgument(what, std::string(what) + ": " + to_string(t) +
                                  " is not supported by the CUDA backend");
}

/// Tuning table: the (weights, accumulator) pairs with a pipelined persistent variant and a
/// 4-rows-in-flight variant (vector path, FP32 output): FP32/FP64-acc, FP32/FP32-acc, FP16/FP32-acc.
template <DType W, DType Acc, DType Out>
constexpr bool has_pipelined =
    Out == DType::F32 && ((W == DType::F32) || (W == DType::F16 && Acc == DType::F32));

template <DType W, DType Acc, DType Out, DType Idx>
void pooled_vec(const PooledTypes& t, const PooledArgs& a, cudaStream_t s) {
  constexpr int R = 8;  // kRowsInFlightDefault
  if constexpr (has_pipelined<W, Acc, Out>) {
    if (t.vectorized && t.pipelined) return launch_pooled_t<W, Acc, Out, Idx, true, true, R>(a, s);
    if (t.vectorized && t.rows_in_flight == 4)
      return launch_pooled_t<W, Acc, Out, Idx, true, false, 4>(a, s);
  }
  if (t.vectorized) launch_pooled_t<W, Acc, Out, Idx, true, false, R>(a, s);
  else launch_pooled_t<W, Acc, Out, Idx, false, false, R>(a, s);
}
template <DType W, DType Acc, DType Out>
void pooled_idx(const PooledTypes& t, const PooledArgs& a, cudaStream_t s) {
  if (t.index == DType::I32) pooled_vec<W, Acc, Out, DType::I32>(t, a, s);
  else pooled_vec<W, Acc, Out, DType::I64>(t, a, s);
}
template <DType W, DType Acc>
void pooled_out(const PooledTypes& t, const PooledArgs& a, cudaStream_t s) {
  switch (t.output) {
    case DType::F32: return pooled_idx<W, Acc, DType::F32>(t, a, s);
    case DType::F16: return pooled_idx<W, Acc, DType::F16>(t, a, s);
    case DType::BF16: return pooled_idx<W, Acc, DType::BF16>(t, a, s);
    default: unsupported("options.policy.output", t.output);
  }
}
template <DType W>
void pooled_acc(const PooledTypes& t, const PooledArgs& a, cudaStream_t s) {
  switch (t.accumulation) {
    case DType::F32: return pooled_out<W, DType::F32>(t, a, s);
    case DType::F64: return pooled_out<W, DType::F64>(t, a, s);
    default: unsupported("options.policy.accumulation", t.accumulation);
  }
}

template <DType W, DType Out, DType Idx>
void sequence_vec(const SequenceTypes& t, const SequenceArgs& a, cudaStream_t s) {
  if (t.vectorized) launch_sequence_t<W, Out, Idx, true>(a, s);
  else launch_sequence_t<W, Out, Idx, false>(a, s);
}
template <DType W, DType Out>
void sequence_idx(const SequenceTypes& t, const SequenceArgs& a, cudaStream_t s) {
  if (t.index == DType::I32) sequence_vec<W, Out, DType::I32>(t, a, s);
  else sequence_vec<W, Out, DType::I64>(t, a, s);
}
template <DType W>
void sequence_out(const SequenceTypes& t, const SequenceArgs& a, cudaStream_t s) {
  switch (t.output) {
    case DType::F32: return sequence_idx<W, DType::F32>(t, a, s);
    case DType::F16: return sequence_idx<W, DType::F16>(t, a, s);
    case DType::BF16: return sequence_idx<W, DType::BF16>(t, a, s);
    default: unsupported("options.policy.output", t.output);
  }
}

}  // namespace

void launch_pooled(const PooledTypes& t, const PooledArgs& a, cudaStream_t s) {
  switch (t.weights) {
    case DType::F32: pooled_acc<DType::F32>(t, a, s); break;
    case DType::F16: pooled_acc<DType::F16>(t, a, s); break;
    case DType::BF16: pooled_acc<DType::BF16>(t, a, s); break;
    default: unsupported("tables.dtype", t.weights);
  }
  check_launch("pooled_gather_group_per_bag");
}

void launch_sequence(const SequenceTypes& t, const SequenceArgs& a, cudaStream_t s) {
  switch (t.weights) {
    case DType::F32: sequence_out<DType::F32>(t, a, s); break;
    case DType::F16: sequence_out<DType::F16>(t, a, s); break;
    case DType::BF16: sequence_out<DType::BF16>(t, a, s); break;
    default: unsupported("tables.dtype", t.weights);
  }
  check_launch("sequence_group_per_row");
}

}  // namespace tbe::cuda::detail
