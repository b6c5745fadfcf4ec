// Shared pieces of tbe-bench's IKBO subcommands (ikbo_lce_bench.cu, ikbo_fa_bench.cu): device
// inputs uniform in [-1, 1) from a counter hash rounded to the storage type, the candidate-to-user
// maps (sorted runs, a seeded shuffle), the cuBLAS error exit and the cuBLAS GEMM rate each
// benchmark reports its TFLOP/s against (measured in the same run). CUDA code (included by .cu).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "bench_common.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/types.h"

namespace tbe::bench {

inline void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuBLAS error in %s: %s\n", what, cublasGetStatusString(e));
    std::exit(2);
  }
}

namespace ikbo_inputs {

__device__ __forceinline__ unsigned long long mix(unsigned long long x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}
template <class T>
__global__ void fill_uniform(T* p, std::int64_t n, unsigned long long seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double u = static_cast<double>(mix(seed * 0x9e3779b97f4a7c15ull + i) >> 11) * 0x1.0p-53;
    const float v = static_cast<float>(2.0 * u - 1.0);
    if constexpr (std::is_same_v<T, __half>) p[i] = __float2half_rn(v);
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) p[i] = __float2bfloat16_rn(v);
    else p[i] = v;
  }
}
/// n elements of FP16 or BF16 (t) at p: uniform [-1, 1) from (seed, i), rounded (RNE).
inline void fill(DType t, void* p, std::int64_t n, unsigned long long seed) {
  if (n <= 0) return;
  if (t == DType::F16) fill_uniform<<<4096, 256>>>(static_cast<__half*>(p), n, seed);
  else fill_uniform<<<4096, 256>>>(static_cast<__nv_bfloat16*>(p), n, seed);
  check(cudaGetLastError(), "fill");
}

inline cudaDataType cuda_type(DType t) { return t == DType::F16 ? CUDA_R_16F : CUDA_R_16BF; }

/// b -> floor(b·U / B): contiguous runs of B/U or B/U + 1 candidates.
inline std::vector<std::int32_t> sorted_map(std::int64_t B, std::int64_t U) {
  std::vector<std::int32_t> m(B);
  for (std::int64_t b = 0; b < B; ++b) m[b] = static_cast<std::int32_t>(b * U / B);
  return m;
}
/// m in a seeded random order (Fisher-Yates on an LCG).
inline std::vector<std::int32_t> shuffled(std::vector<std::int32_t> m, std::uint64_t seed) {
  std::uint64_t s = seed;
  for (std::size_t i = m.size(); i > 1; --i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(m[i - 1], m[(s >> 33) % i]);
  }
  return m;
}

}  // namespace ikbo_inputs

/// cuBLAS rate (TFLOP/s): 8192³ GEMM of dtype t (FP16 or BF16), FP32 accumulation, 16-bit
/// output, median of `iters` after warm-up (time_it, L2 not flushed: the operands do not fit).
inline double cublas_gemm_tflops(cublasHandle_t handle, DType t, cudaStream_t stream, int iters) {
  const std::int64_t n = 8192;
  cuda::DeviceBuffer a(n * n * 2), b(n * n * 2), d(n * n * 2);
  ikbo_inputs::fill(t, a.get(), n * n, 1);
  ikbo_inputs::fill(t, b.get(), n * n, 2);
  const float one = 1, zero = 0;
  check(cublasSetStream(handle, stream), "set stream");
  const cudaDataType ct = ikbo_inputs::cuda_type(t);
  const Timing tm = time_it([&] {
    check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.get(), ct, n, b.get(), ct,
                       n, &zero, d.get(), ct, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "gemm 8192");
  }, iters, stream, nullptr, 0);
  return 2.0 * n * n * n / (tm.median_ms * 1e-3) / 1e12;
}

}  // namespace tbe::bench
