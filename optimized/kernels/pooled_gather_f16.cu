// Instantiations of the pooled gather for f16 weights (one file per weight type keeps nvcc time and
// memory per translation unit bounded).
#include "kernels/pooled_gather.cuh"

namespace tbe::cuda::detail {
TBE_INSTANTIATE_POOLED_FOR(DType::F16)
TBE_INSTANTIATE_POOLED_TUNING(DType::F16, DType::F32)
}  // namespace tbe::cuda::detail
