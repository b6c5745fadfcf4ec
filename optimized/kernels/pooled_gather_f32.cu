// Instantiations of the pooled gather for f32 weights (one file per weight type keeps nvcc time and
// memory per translation unit bounded).
#include "kernels/pooled_gather.cuh"

namespace tbe::cuda::detail {
TBE_INSTANTIATE_POOLED_FOR(DType::F32)
TBE_INSTANTIATE_POOLED_TUNING(DType::F32, DType::F64)
TBE_INSTANTIATE_POOLED_TUNING(DType::F32, DType::F32)
}  // namespace tbe::cuda::detail
