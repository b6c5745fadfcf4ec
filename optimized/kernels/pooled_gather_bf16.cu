// Instantiations of the pooled gather for bf16 weights (one file per weight type keeps nvcc time and
// memory per translation unit bounded).
#include "kernels/pooled_gather.cuh"

namespace tbe::cuda::detail {
TBE_INSTANTIATE_POOLED_FOR(DType::BF16)
}  // namespace tbe::cuda::detail
