// The backward's dispatch point: runtime (weights, accumulation, grad_output dtype, group kind)
// -> the template instance of a run kernel. Compiled pairs (W, Acc): F32/F64, F32/F32, F16/F32,
// BF16/F32 (BackwardOp rejects the others before any launch).
#include <string>

#include "kernels/backward_launch.h"
#include "src/cuda_check.h"
#include "tbe/errors.h"

namespace tbe::cuda::detail {
namespace {

[[noreturn]] void unsupported(const RunTypes& t) {
  throw InvalidArgument("options.policy",
                        "options.policy: weights " + to_string(t.weights) + " with accumulation " +
                            to_string(t.accumulation) + " and output " + to_string(t.grad) +
                            " has no CUDA backward kernel (fp32 weights: fp32 or fp64 "
                            "accumulation; fp16/bf16 weights: fp32 accumulation)");
}

enum class Which { Short, Chunks, Apply };

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
  }
}

template <DType W, DType Acc>
void by_out(Which which, const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  switch (t.grad) {
    case DType::F32: return by_group<W, Acc, DType::F32>(which, t, a, s);
    case DType::F16: return by_group<W, Acc, DType::F16>(which, t, a, s);
    case DType::BF16: return by_group<W, Acc, DType::BF16>(which, t, a, s);
    default: unsupported(t);
  }
}

void dispatch(Which which, const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  if (t.weights == DType::F32 && t.accumulation == DType::F64) by_out<DType::F32, DType::F64>(which, t, a, s);
  else if (t.weights == DType::F32 && t.accumulation == DType::F32) by_out<DType::F32, DType::F32>(which, t, a, s);
  else if (t.weights == DType::F16 && t.accumulation == DType::F32) by_out<DType::F16, DType::F32>(which, t, a, s);
  else if (t.weights == DType::BF16 && t.accumulation == DType::F32) by_out<DType::BF16, DType::F32>(which, t, a, s);
  else unsupported(t);
}

}  // namespace

bool backward_types_supported(const RunTypes& t) {
  const bool pair = (t.weights == DType::F32 && (t.accumulation == DType::F64 || t.accumulation == DType::F32)) ||
                    ((t.weights == DType::F16 || t.weights == DType::BF16) && t.accumulation == DType::F32);
  const bool out = t.grad == DType::F32 || t.grad == DType::F16 || t.grad == DType::BF16;
  return pair && out;
}

void launch_short_runs(const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch(Which::Short, t, a, s);
  check_launch("short_runs_group_per_run");
}
void launch_long_chunks(const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch(Which::Chunks, t, a, s);
  check_launch("long_chunks_group_per_chunk");
}
void launch_long_apply(const RunTypes& t, const RunArgs& a, cudaStream_t s) {
  dispatch(Which::Apply, t, a, s);
  check_launch("long_apply_group_per_run");
}

}  // namespace tbe::cuda::detail
