// Asynchronous global -> shared copies (PTX ISA "cp.async", sm_80+): a thread issues copies that
// need no registers while in flight, commits them as a group and later waits until at most N of
// its groups are pending; after the wait the data is visible to that thread (other threads need a
// barrier). Used by the tensor-core kernels (tiles), the backward run kernels (grad_output rows
// staged per lane, kernels/backward_runs.cuh) and the streamed pooled gather (embedding rows,
// kernels/pooled_gather_streamed.cuh). Device code only (included by kernels/*.cu(h)).
#pragma once

namespace tbe::cuda::detail {

/// 16-byte cp.async (L2 only, .cg); src_bytes < 16 zero-fills the rest (0: all zeros, gmem unread).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
/// 16-byte cp.async (.cg: L2 only) to the shared-space address `smem` (16-byte aligned both sides).
__device__ __forceinline__ void cp_async16(unsigned smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem) : "memory");
}
/// 16-byte cp.async through L1 (.ca: hot rows stay in L1, as __ldg would keep them; the streamed
/// pooled gather) to the shared-space address `smem` (16-byte aligned both sides); src_bytes < 16
/// zero-fills the rest of the 16 bytes (0: sixteen zero bytes, gmem unread).
__device__ __forceinline__ void cp_async16_ca(unsigned smem, const void* gmem, unsigned src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes)
               : "memory");
}
/// 8-byte cp.async (.ca: .cg allows 16 bytes only) to the shared-space address `smem` (8-byte aligned).
__device__ __forceinline__ void cp_async8(unsigned smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most N committed groups of this thread are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace tbe::cuda::detail
