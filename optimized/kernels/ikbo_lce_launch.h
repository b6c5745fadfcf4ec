// Host-visible interface of the IKBO LCE kernel family (optimized/kernels/ikbo_lce_*.cu): argument
// structs and launch functions. Plain C++ (no device code). Kernels trust these arguments: the
// host operator (src/ikbo_lce_op.cpp) validated the problem first. Every kernel that writes the
// output reads `map_error` first and exits without writing if it is set (map check failed).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "tbe/cuda/mutation.h"
#include "tbe/types.h"

namespace tbe::cuda::detail {

/// The LCE policy's rounding points as the kernels see them (tbe::ikbo::LceRounding; the host op
/// maps it, so this header stays free of the reference's interface).
enum class LceAdd : std::uint8_t {
  Published,    ///< user and candidate results in storage; out = RN(float(c) + float(u))
  RoundOnce,    ///< user and candidate results FP32; out = RN(c + u)
  UserRounded,  ///< user result in storage, candidate FP32; out = RN(fl32(c + float(u)))
};

/// map_error value meaning "no offender" (otherwise: the first bad position b).
inline constexpr unsigned long long kLceMapOk = ~0ull;

/// map_error := min(b) over b with cand_to_user[b] outside [0, U) (kLceMapOk preset by the op).
void launch_lce_map_check(const std::int32_t* cand_to_user, std::int64_t B, std::int64_t U,
                          unsigned long long* map_error, cudaStream_t stream);

/// dst [rows, ld_dst] := src [rows, cols] (row stride ld_src) with columns [cols, ld_dst) zero.
/// Element size 2 or 4 bytes.
void launch_lce_pad_rows(const void* src, std::int64_t ld_src, void* dst, std::int64_t ld_dst,
                         std::int64_t rows, std::int64_t cols, std::size_t elem_bytes,
                         cudaStream_t stream);

/// Decomposed stages' last step: out[b, :, :] = cand[b] ⊕ user[u(b)] over M·N elements per
/// candidate (`user` null: no user part).
///   RoundOnce:   cand, user FP32; out = round(cand + user) once.
///   Published:   cand, user in the storage type; out = round(float(cand) + float(user)) (the
///                16-bit addition: exact float sum, one RNE rounding; correct since 24 >= 2·11 + 2).
///   UserRounded: cand FP32, user in the storage type; out = round(fl32(cand + float(user))): one
///                FP32 rounding of the sum, then one rounding to storage.
struct LceGatherAddArgs {
  const void* cand = nullptr;   ///< [B, M·N]
  const void* user = nullptr;   ///< [U, M·N] or null
  const std::int32_t* cand_to_user = nullptr;
  void* out = nullptr;          ///< [B, M·N] storage
  std::int64_t B = 0, MN = 0;
  const unsigned long long* map_error = nullptr;
};
void launch_lce_gather_add(DType storage, LceAdd add, const LceGatherAddArgs& a,
                           cudaStream_t stream);

/// Fused candidate GEMM: out[b] = W_c · E_c[b] (FP32 accumulation, tensor cores) with the epilogue
/// adding user[u(b)] (FP32 under RoundOnce, storage type under Published and UserRounded; null:
/// none): RoundOnce and UserRounded store round(acc + float(user)) (FP32 add, one rounding to
/// storage), Published round(float(round(acc)) + float(user)).
/// w_c: [M, ld_w] storage with ld_w % 8 == 0 and 16-byte aligned; columns [K, ld_w) are never
/// used (zero-filled in shared memory, as are rows k >= K of E_c).
/// e_c: [B, K, N] storage; vectorized when N % 8 == 0 and e_c is 16-byte aligned.
struct LceFusedArgs {
  const void* w_c = nullptr;
  std::int64_t ld_w = 0;
  const void* e_c = nullptr;
  const void* user = nullptr;
  const std::int32_t* cand_to_user = nullptr;
  void* out = nullptr;
  std::int64_t B = 0, M = 0, N = 0, K = 0;
  const unsigned long long* map_error = nullptr;
};
/// True if the 16-byte E_c tile loads apply (else the scalar-load variant runs).
bool lce_fused_vectorized(const LceFusedArgs& a);
void launch_lce_fused(DType storage, LceAdd add, const LceFusedArgs& a, cudaStream_t stream);

/// LtEpilogue stage: the pointer arrays of cuBLASLt's pointer-array batched matmul, per candidate
/// b: a[b] = e + b·e_stride, b_[b] = w, c[b] = user + u(b)·user_stride (user null: scratch;
/// the user rows are in the storage type under UserRounded: C has D's type),
/// d[b] = out + b·out_stride (strides in bytes). If the map check failed (map_error set) the map
/// is not read: every d[b] points at `scratch` and every c[b] at user row 0 (or scratch), so the
/// GEMM writes nothing into out.
struct LceLtPointersArgs {
  const void* e = nullptr;
  std::size_t e_stride = 0;
  const void* w = nullptr;
  const void* user = nullptr;
  std::size_t user_stride = 0;
  void* out = nullptr;
  std::size_t out_stride = 0;
  const std::int32_t* cand_to_user = nullptr;
  std::int64_t B = 0;
  const unsigned long long* map_error = nullptr;
  void* scratch = nullptr;
  const void** a = nullptr;
  const void** b = nullptr;
  const void** c = nullptr;
  void** d = nullptr;
};
void launch_lce_lt_pointers(const LceLtPointersArgs& args, cudaStream_t stream);

}  // namespace tbe::cuda::detail
