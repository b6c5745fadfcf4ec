// What both IKBO attention kernels (ikbo_attention_fwd.cuh: mma.sync; ikbo_attention_fwd_wgmma.cuh:
// wgmma) do the same way: the CTA's work item and key range, the address of each of its query /
// output rows, the exact zeros of an empty key range, and the two scalar helpers of the softmax
// (ex2) and of the rounding of P and O to the storage type (pack2).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/ikbo_attention_launch.h"

namespace tbe::cuda::detail::attention_cta {

/// One job of a CTA: a work item, a head and the item's user's keys.
struct Cta {
  AttentionWorkItem item;   ///< rows 0: nothing to do (a slot past the work list)
  int h = 0;                ///< head
  std::int64_t k_begin = 0; ///< the user's first key
  std::int64_t n = 0;       ///< the user's keys (0: exact zeros)

  /// Row of q / out ([B·n_seed, H, Dh] as [B·n_seed] rows) of local row i (< item.rows) of this
  /// CTA: candidate cand_sorted[cand0 + pos / n_seed], seed pos % n_seed (pos = row0 + i).
  /// < B·n_seed <= INT_MAX (AttentionOp's limits). The kernel arguments stay in parameter space
  /// instead of being copied into registers.
  __device__ __forceinline__ std::int64_t out_row(const AttentionArgs& a, int i) const {
    const int pos = item.row0 + i;
    const std::int64_t cand = a.grouping.cand_sorted[item.cand0 + pos / a.n_seed];
    return cand * a.n_seed + pos % a.n_seed;
  }
  /// Element offset in q / out of local row i (< item.rows) of this CTA, head h.
  template <int kDh>
  __device__ __forceinline__ std::int64_t row_offset(const AttentionArgs& a, int i) const {
    return out_row(a, i) * (static_cast<std::int64_t>(a.H) * kDh) +
           static_cast<std::int64_t>(h) * kDh;
  }
};

/// Work item w of head h (one 16-byte load) and its user's key range, dense or jagged.
__device__ __forceinline__ Cta load_cta(const AttentionArgs& a, std::int64_t w, int h) {
  Cta c;
  const int4 raw = __ldg(reinterpret_cast<const int4*>(a.grouping.items) + w);
  c.item = AttentionWorkItem{raw.x, raw.y, raw.z, raw.w};
  c.h = h;
  if (c.item.rows <= 0) return c;
  if (a.k_offsets != nullptr) {
    c.k_begin = a.k_offsets[c.item.user];
    c.n = a.k_offsets[c.item.user + 1] - c.k_begin;
  } else {
    c.k_begin = static_cast<std::int64_t>(c.item.user) * a.S;
    c.n = a.S;
  }
  return c;
}

/// An empty key range: exact zeros in every row of the CTA (docs/ikbo.md), never 0/0, written by
/// `threads` threads of which this one is `tid`.
template <class T, int kDh>
__device__ __forceinline__ void store_zero_rows(const AttentionArgs& a, const Cta& c,
                                                T* __restrict__ out, int tid, int threads) {
  constexpr int kChunks = kDh / 8;  // 16-byte chunks per row
  for (int idx = tid; idx < c.item.rows * kChunks; idx += threads) {
    const int i = idx / kChunks, ch = idx % kChunks;
    *reinterpret_cast<uint4*>(out + c.row_offset<kDh>(a, i) + ch * 8) = make_uint4(0, 0, 0, 0);
  }
}

/// 2^x, ex2.approx.ftz (the softmax's exponentials: x = S·c − m·c, c = scale·log2 e).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// Two FP32 values rounded (RNE) to T (half or bfloat16) and packed, the first in the low half
/// (the lower column): one cvt.rn.{bf16x2,f16x2}, the same values as two separate RNE conversions.
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  std::uint32_t u;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&u, &v, sizeof u);
  } else {
    static_assert(std::is_same_v<T, __half>, "attention storage: half or bfloat16");
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&u, &v, sizeof u);
  }
  return u;
}

}  // namespace tbe::cuda::detail::attention_cta
