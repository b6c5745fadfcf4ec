// Instantiations of the pooled gather's narrow vector path (8-byte vectors of 4 elements) for the
// 16-bit weight types (ForwardTuning::narrow_vectors; a file of its own keeps nvcc time and
// memory per translation unit bounded).
#include "kernels/pooled_gather.cuh"

namespace tbe::cuda::detail {
TBE_INSTANTIATE_POOLED_NARROW_FOR(DType::F16)
TBE_INSTANTIATE_POOLED_NARROW_FOR(DType::BF16)
}  // namespace tbe::cuda::detail
