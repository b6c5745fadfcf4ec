// Host construction of TMA tensor maps (the driver's cuTensorMapEncodeTiled, reached through the
// runtime's cudaGetDriverEntryPointByVersion so that nothing links libcuda).
#pragma once

#include <cstdint>

#include <cuda.h>

namespace tbe::cuda::detail {

/// A row-major 2-D tensor [rows, cols] of 16-bit elements (`bf16`: BF16, else FP16) at device
/// address `base` (16-byte aligned; cols·2 bytes a multiple of 16) as a tensor map with boxes of
/// box_cols × box_rows elements, 128-byte swizzle (box_cols·2 must be 128), zeros read outside the
/// tensor. rows, cols <= 2^32. Throws DeviceError if the driver rejects it.
CUtensorMap make_tensor_map_2d_swizzle128(const void* base, bool bf16, std::int64_t rows,
                                          std::int64_t cols, int box_cols, int box_rows);

}  // namespace tbe::cuda::detail
