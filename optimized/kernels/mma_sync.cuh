// Warp-level tensor-core building blocks shared by the mma.sync kernels (IKBO LCE fused GEMM,
// IKBO attention): ldmatrix loads (the cp.async copies come from kernels/cp_async.cuh) and the
// m16n8k16 MMA with FP32 accumulation on FP16 / BF16 operands (PTX ISA "Warp-level matrix
// instructions"). Fragment layouts (g = lane / 4, c = lane % 4):
//   A 16×16 row-major: a[0] = (g, 2c..2c+1), a[1] = (g+8, 2c..), a[2] = (g, 2c+8..), a[3] = (g+8, 2c+8..)
//   B 16×8 "col-major": b0 = (k 2c..2c+1, n g), b1 = (k 2c+8..2c+9, n g)
//   C 16×8: d[0..1] = (g, 2c..2c+1), d[2..3] = (g+8, 2c..2c+1)
// Device code only (included by kernels/*.cu).
#pragma once

#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cp_async.cuh"

namespace tbe::cuda::detail {

/// Four 8×8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i receives it
/// (thread t: row t/4, elements 2(t%4), 2(t%4)+1).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
/// The same, transposed: thread t receives elements (row 2(t%4), col t/4) and (row 2(t%4)+1, col t/4).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

/// d += A·B (m16n8k16, FP32 accumulation), T = __half or __nv_bfloat16.
template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace tbe::cuda::detail
