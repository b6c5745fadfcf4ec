// TMA tensor maps (tensor_map.h).
#include "src/tensor_map.h"

#include <string>

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "tbe/cuda/check.h"
#include "tbe/errors.h"

namespace tbe::cuda::detail {

namespace {
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    cuda_check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                cudaEnableDefault, &q),
               "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (q != cudaDriverEntryPointSuccess || p == nullptr)
      throw DeviceError("cuTensorMapEncodeTiled: not provided by the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}
}  // namespace

CUtensorMap make_tensor_map_2d_swizzle128(const void* base, bool bf16, std::int64_t rows,
                                          std::int64_t cols, int box_cols, int box_rows) {
  CUtensorMap m{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};  // bytes, dims 1..
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(
      &m, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw DeviceError("cuTensorMapEncodeTiled: error " + std::to_string(static_cast<int>(r)) +
                      " for a [" + std::to_string(rows) + ", " + std::to_string(cols) +
                      "] tensor, box " + std::to_string(box_cols) + " x " +
                      std::to_string(box_rows));
  return m;
}

}  // namespace tbe::cuda::detail
