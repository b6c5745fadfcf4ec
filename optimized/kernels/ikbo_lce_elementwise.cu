// IKBO LCE memory-bound kernels: map check, weight row padding, the decomposed stages' gather-add.
#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/common.cuh"
#include "kernels/ikbo_lce_launch.h"
#include "kernels/ikbo_map_check.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

using Policy = tuning::LceElementwise;
constexpr int kBlock = Policy::kBlockThreads;

unsigned grid_for(std::int64_t work, std::int64_t per_block, unsigned cap) {
  const std::int64_t g = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(g < 1 ? 1 : (g > cap ? cap : g));
}

__global__ void lce_map_check_kernel(const std::int32_t* __restrict__ map, std::int64_t B,
                                     std::int64_t U, unsigned long long* map_error TBE_MUTANT_PARAM(m)) {
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < B;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int32_t u = __ldg(map + b);
    if (map_value_bad(u, U TBE_MUTANT_FORWARD(m))) atomicMin(map_error, static_cast<unsigned long long>(b));
  }
}

template <class E>
__global__ void lce_pad_rows_kernel(const E* __restrict__ src, std::int64_t ld_src,
                                    E* __restrict__ dst, std::int64_t ld_dst, std::int64_t rows,
                                    std::int64_t cols TBE_MUTANT_PARAM(m)) {
  const std::int64_t n = rows * ld_dst;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / ld_dst, c = i - r * ld_dst;
    dst[i] = c < cols ? src[TBE_MUTANT_SWAP(m, kLcePadStrideConfused, r * ld_dst + c < rows * ld_src ? r * ld_dst + c : r * ld_src + c, r * ld_src + c)] : E{};  // uint4{} is all zero bits
  }
}

/// Grid (x: VEC-element pieces of one candidate's [M·N] block, y: candidates, looping by gridDim.y
/// when B > 65535): one thread per VEC consecutive elements (32 bytes of the candidate part's type
/// C: VEC = 8 for FP32, 16 for 16-bit, when M·N % VEC == 0 and every pointer is 16-byte aligned;
/// else VEC = 1). The user part's type Uu is C's (Published, RoundOnce) or the storage type with
/// an FP32 C (UserRounded); every policy stores round_out(float(c) + float(u)) (LceAdd).
template <class T, class C, class Uu, int VEC>
__global__ void lce_gather_add_kernel(const C* __restrict__ cand, const Uu* __restrict__ user,
                                      const std::int32_t* __restrict__ map, T* __restrict__ out,
                                      std::int64_t B, std::int64_t MN,
                                      const unsigned long long* map_error TBE_MUTANT_PARAM(m)) {
  if (fatal_aborted(map_error)) return;
  const std::int64_t e = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) * VEC;
  if (e >= MN) return;
  for (std::int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const C* cp = cand + b * MN + e;
    const Uu* up = user != nullptr ? user + TBE_MUTANT_SWAP(m, kLceMapContiguous, static_cast<std::int64_t>(__ldg(map)) + b, static_cast<std::int64_t>(__ldg(map + b))) * MN + e : nullptr;
    float c[VEC], u[VEC];
    if constexpr (VEC == 1) {
      c[0] = to_float(cp[0]);
      u[0] = up != nullptr ? to_float(up[0]) : 0.0f;
    } else {
      // cand is streamed once: evict-first loads; the user block is reused by every candidate of
      // the user (L2-resident).
      if constexpr (sizeof(C) == 4) {
        const float4 a0 = __ldcs(reinterpret_cast<const float4*>(cp));
        const float4 a1 = __ldcs(reinterpret_cast<const float4*>(cp) + 1);
        c[0] = a0.x; c[1] = a0.y; c[2] = a0.z; c[3] = a0.w;
        c[4] = a1.x; c[5] = a1.y; c[6] = a1.z; c[7] = a1.w;
        if constexpr (sizeof(Uu) == 4) {
          if (up != nullptr) {
            const float4 b0 = __ldg(reinterpret_cast<const float4*>(up));
            const float4 b1 = __ldg(reinterpret_cast<const float4*>(up) + 1);
            u[0] = b0.x; u[1] = b0.y; u[2] = b0.z; u[3] = b0.w;
            u[4] = b1.x; u[5] = b1.y; u[6] = b1.z; u[7] = b1.w;
          }
        } else {  // UserRounded: 8 user values of 16 bits, one 16-byte load
          if (up != nullptr) load_row_vec<Uu, 8>(up, *reinterpret_cast<float(*)[8]>(u));
        }
      } else {  // 16-bit: VEC = 16, two 16-byte loads issued back to back
        static_assert(VEC == 16, "16-bit parts use 32-byte pieces");
        static_assert(sizeof(Uu) == 2, "a 16-bit candidate part comes with a 16-bit user part");
        const RawRow<C, 8> r0{__ldcs(reinterpret_cast<const uint4*>(cp))};
        const RawRow<C, 8> r1{__ldcs(reinterpret_cast<const uint4*>(cp) + 1)};
        raw_to_float<C, 8>(r0, *reinterpret_cast<float(*)[8]>(c));
        raw_to_float<C, 8>(r1, *reinterpret_cast<float(*)[8]>(c + 8));
        if (up != nullptr) {
          load_row_vec<Uu, 8>(up, *reinterpret_cast<float(*)[8]>(u));
          load_row_vec<Uu, 8>(up + 8, *reinterpret_cast<float(*)[8]>(u + 8));
        }
      }
      if (up == nullptr)
        for (int k = 0; k < VEC; ++k) u[k] = 0.0f;
    }
    T o[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) o[k] = round_out<T>(c[k] + u[k]);
    store_out<T, VEC>(out + b * MN + e, o);
  }
}

__global__ void lce_lt_pointers_kernel(LceLtPointersArgs a) {
  const bool bad = fatal_aborted(a.map_error);
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < a.B;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    a.a[b] = static_cast<const char*>(a.e) + b * a.e_stride;
    a.b[b] = a.w;
    const std::int64_t u = bad ? 0 : __ldg(a.cand_to_user + b);
    a.c[b] = a.user != nullptr ? static_cast<const char*>(a.user) + u * a.user_stride : a.scratch;
    a.d[b] = bad ? a.scratch : static_cast<char*>(a.out) + b * a.out_stride;
  }
}

template <class T, class C, class Uu>
void gather_add_t(const LceGatherAddArgs& a, cudaStream_t s) {
  const auto aligned = [](const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; };
  constexpr int kVec = Policy::kGatherAddBytes / static_cast<int>(sizeof(C));
  const bool vec = a.MN % kVec == 0 && aligned(a.cand) && aligned(a.out) &&
                   (a.user == nullptr || aligned(a.user));
  const auto* cand = static_cast<const C*>(a.cand);
  const auto* user = static_cast<const Uu*>(a.user);
  auto* out = static_cast<T*>(a.out);
  const int vec_w = vec ? kVec : 1;
  const dim3 grid(static_cast<unsigned>((a.MN / vec_w + kBlock - 1) / kBlock),
                  static_cast<unsigned>(a.B < 65535 ? a.B : 65535));
  if (vec)
    lce_gather_add_kernel<T, C, Uu, kVec><<<grid, kBlock, 0, s>>>(cand, user, a.cand_to_user,
                                                                  out, a.B, a.MN, a.map_error TBE_MUTANT_ARG);
  else
    lce_gather_add_kernel<T, C, Uu, 1><<<grid, kBlock, 0, s>>>(cand, user, a.cand_to_user, out,
                                                               a.B, a.MN, a.map_error TBE_MUTANT_ARG);
  check_launch("lce gather-add");
}

}  // namespace

void launch_lce_map_check(const std::int32_t* cand_to_user, std::int64_t B, std::int64_t U,
                          unsigned long long* map_error, cudaStream_t stream) {
  if (B <= 0) return;
  lce_map_check_kernel<<<grid_for(B, kBlock, Policy::kMapCheckMaxBlocks), kBlock, 0, stream>>>(cand_to_user, B, U,
                                                                         map_error TBE_MUTANT_ARG);
  check_launch("lce map check");
}

void launch_lce_pad_rows(const void* src, std::int64_t ld_src, void* dst, std::int64_t ld_dst,
                         std::int64_t rows, std::int64_t cols, std::size_t elem_bytes,
                         cudaStream_t stream) {
  if (rows <= 0 || ld_dst <= 0) return;
  const auto b16 = [](std::int64_t elems, std::size_t es) { return (elems * static_cast<std::int64_t>(es)) % 16 == 0; };
  if (b16(cols, elem_bytes) && b16(ld_src, elem_bytes) && b16(ld_dst, elem_bytes) &&
      ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15u) == 0) {
    // 16-byte units (E items, padded weight rows of a multiple of 8 / 4 elements)
    const std::int64_t per = static_cast<std::int64_t>(16 / elem_bytes);
    lce_pad_rows_kernel<<<grid_for(rows * ld_dst / per, kBlock, Policy::kPadRows16MaxBlocks), kBlock, 0, stream>>>(
        static_cast<const uint4*>(src), ld_src / per, static_cast<uint4*>(dst), ld_dst / per, rows,
        cols / per TBE_MUTANT_ARG);
    check_launch("lce pad rows (16-byte)");
    return;
  }
  const unsigned g = grid_for(rows * ld_dst, kBlock, Policy::kPadRowsMaxBlocks);
  if (elem_bytes == 2)
    lce_pad_rows_kernel<<<g, kBlock, 0, stream>>>(static_cast<const std::uint16_t*>(src), ld_src,
                                                  static_cast<std::uint16_t*>(dst), ld_dst, rows, cols TBE_MUTANT_ARG);
  else
    lce_pad_rows_kernel<<<g, kBlock, 0, stream>>>(static_cast<const std::uint32_t*>(src), ld_src,
                                                  static_cast<std::uint32_t*>(dst), ld_dst, rows, cols TBE_MUTANT_ARG);
  check_launch("lce pad weights");
}

void launch_lce_lt_pointers(const LceLtPointersArgs& args, cudaStream_t stream) {
  if (args.B <= 0) return;
  lce_lt_pointers_kernel<<<grid_for(args.B, kBlock, Policy::kMapCheckMaxBlocks), kBlock, 0, stream>>>(args);
  check_launch("lce cuBLASLt pointer arrays");
}

template <class T>
void gather_add_policy(LceAdd add, const LceGatherAddArgs& a, cudaStream_t s) {
  switch (add) {
    case LceAdd::RoundOnce: return gather_add_t<T, float, float>(a, s);
    case LceAdd::UserRounded: return gather_add_t<T, float, T>(a, s);
    case LceAdd::Published: return gather_add_t<T, T, T>(a, s);
  }
}

void launch_lce_gather_add(DType storage, LceAdd add, const LceGatherAddArgs& a,
                           cudaStream_t stream) {
  if (a.B <= 0 || a.MN <= 0) return;
  dispatch::dispatch_float(storage, "lce.policy.storage", [&](auto st) {
    using T = dispatch::storage_t<decltype(st)::value>;
    if constexpr (std::is_same_v<T, float>) gather_add_t<float, float, float>(a, stream);  // every policy: one FP32 add
    else gather_add_policy<T>(add, a, stream);
  });
}

}  // namespace tbe::cuda::detail
