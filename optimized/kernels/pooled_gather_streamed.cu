// Instantiations of the streamed pooled gather (kernels/pooled_gather_streamed.cuh): the
// kCompiledPooledTuning types × int32/int64 indices × the two ring depths.
#include "kernels/pooled_gather_streamed.cuh"

namespace tbe::cuda::detail {

#define TBE_STREAMED_INSTANCE(W, ACC, IDX, R) \
  template void launch_pooled_streamed_t<W, ACC, DType::F32, IDX, R>(const PooledArgs&, cudaStream_t);
#define TBE_STREAMED_TYPES(W, ACC)                                                              \
  static_assert(dispatch::contains(dispatch::kCompiledPooledTuning,                           \
                                   dispatch::TypeCombo{W, ACC, DType::F32}));                 \
  TBE_STREAMED_INSTANCE(W, ACC, DType::I32, tuning::PooledGather::kStreamedRowsFew)            \
  TBE_STREAMED_INSTANCE(W, ACC, DType::I64, tuning::PooledGather::kStreamedRowsFew)            \
  TBE_STREAMED_INSTANCE(W, ACC, DType::I32, tuning::PooledGather::kStreamedRowsMany)           \
  TBE_STREAMED_INSTANCE(W, ACC, DType::I64, tuning::PooledGather::kStreamedRowsMany)

TBE_STREAMED_TYPES(DType::F32, DType::F64)
TBE_STREAMED_TYPES(DType::F32, DType::F32)
TBE_STREAMED_TYPES(DType::F16, DType::F32)

}  // namespace tbe::cuda::detail
