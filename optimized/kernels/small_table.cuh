// Device helpers of the small-table histogram path (docs/small-table.md): the FP16 mma.m16n8k16
// with FP32 output, and FP16 pair packing. Fragment layouts (PTX ISA, mma.m16n8k16 .f16), with
// g = lane / 4 (groupID) and t = lane % 4 (threadID_in_group):
//   A 16×16 row-major, 4 .f16x2 registers: a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same),
//     a2 = (row g, cols 2t+8, 2t+9), a3 = (row g+8, same);
//   B 16×8 (K × N, "col"), 2 registers: b0 = (rows 2t, 2t+1; col g), b1 = (rows 2t+8, 2t+9; col g);
//   C/D 16×8 FP32: c0, c1 = (row g; cols 2t, 2t+1), c2, c3 = (row g+8; same cols).
// The lower 16 bits of a register hold the element with the lower index.
#pragma once

#include <cuda_fp16.h>

#include "dispatch/tuning.h"
#include "kernels/common.cuh"
#include "kernels/small_table_launch.h"

namespace tbe::cuda::detail {

inline constexpr int kStWarps = tuning::SmallTable::kWarps;
inline constexpr int kStBlock = kStWarps * tuning::kWarpThreads;
inline constexpr int kStMaxRows = tuning::SmallTable::kMaxRows;
inline constexpr int kStMaxDim = tuning::SmallTable::kMaxDim;
inline constexpr int kStTableStride = tuning::SmallTable::kTableStride;
inline constexpr int kStCountStride = tuning::SmallTable::kCountStride;
inline constexpr int kStSlice = tuning::SmallTable::kMaxExactCount;
inline constexpr int kStMaxKTiles = kStMaxRows / 16;
inline constexpr int kStMaxNTiles = kStMaxDim / 8;

/// d = A·B with FP32 output and a zero accumulator input: each call is one fused tensor-core
/// block whose result is then added in FP32 with IEEE rounding (docs/oracle.md
/// "Small-table histogram path": the bound counts one block per call).
__device__ __forceinline__ void mma_f16_zero_c(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

/// Two FP16 values as one .f16x2 register (lo in the lower 16 bits).
__device__ __forceinline__ unsigned pack_half2(__half lo, __half hi) {
  return static_cast<unsigned>(__half_as_ushort(lo)) |
         (static_cast<unsigned>(__half_as_ushort(hi)) << 16);
}

/// Two exact small integer counts (<= 2048) as one .f16x2 register.
__device__ __forceinline__ unsigned pack_counts(int2 c) {
  return pack_half2(__int2half_rn(c.x), __int2half_rn(c.y));
}

}  // namespace tbe::cuda::detail
