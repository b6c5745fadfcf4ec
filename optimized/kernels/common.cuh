// Device helpers shared by the kernel families: conversions to the accumulator and (rounded
// once, RNE) to the output type, 16-byte vector loads, searches. Storage types per DType come from
// the dispatch layer (dispatch/dispatch.h, the one list).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dispatch/dispatch.h"
#include "kernels/launch.h"
#include "tbe/types.h"

namespace tbe::cuda::detail {

using dispatch::storage_t;

// --- storage -> float (exact for every storage type; FP32 stays FP32) ---
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// --- accumulator -> output, one RNE rounding ---
template <class Out> __device__ __forceinline__ Out round_out(float x);
template <class Out> __device__ __forceinline__ Out round_out(double x);
template <> __device__ __forceinline__ float round_out<float>(float x) { return x; }
template <> __device__ __forceinline__ float round_out<float>(double x) { return __double2float_rn(x); }
template <> __device__ __forceinline__ __half round_out<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __half round_out<__half>(double x) { return __double2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 round_out<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 round_out<__nv_bfloat16>(double x) {
  return __double2bfloat16(x);
}

/// Storage value (as float) -> accumulator.
/// (A bit-manipulation FP32 -> FP64 conversion was measured slower than the F2F unit on H200:
/// the special-case call cost registers and the integer ops cost more issue slots.)
template <class Acc> __device__ __forceinline__ Acc widen(float x) { return static_cast<Acc>(x); }

/// Raw registers of VEC consecutive storage elements: one 16-byte vector (VEC·sizeof(W) == 16),
/// one 8-byte vector (VEC·sizeof(W) == 8: four 16-bit elements, the forward's narrow path) or one
/// scalar (VEC == 1). Loaded raw, converted when accumulated, so 8 rows in flight cost 32
/// registers whatever the storage type.
template <class W, int VEC> struct RawRow {
  static_assert(VEC * sizeof(W) == 16 || VEC * sizeof(W) == 8, "8- or 16-byte vectors");
  std::conditional_t<VEC * sizeof(W) == 16, uint4, uint2> v;
};
template <class W> struct RawRow<W, 1> { W v; };

template <class W, int VEC>
__device__ __forceinline__ RawRow<W, VEC> load_raw(const W* p) {
  if constexpr (VEC == 1) {
    return {__ldg(p)};
  } else {
    using V = decltype(RawRow<W, VEC>::v);
    return {__ldg(reinterpret_cast<const V*>(p))};
  }
}

template <class W, int VEC>
__device__ __forceinline__ void raw_to_float(const RawRow<W, VEC>& r, float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = to_float(r.v);
  } else if constexpr (sizeof(W) == 4) {
    v[0] = __uint_as_float(r.v.x); v[1] = __uint_as_float(r.v.y);
    v[2] = __uint_as_float(r.v.z); v[3] = __uint_as_float(r.v.w);
  } else if constexpr (VEC == 4) {  // 8 bytes: two words of two 16-bit elements
    const unsigned words[2] = {r.v.x, r.v.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      W lo, hi;
      const unsigned short lo_bits = static_cast<unsigned short>(words[i] & 0xffffu);
      const unsigned short hi_bits = static_cast<unsigned short>(words[i] >> 16);
      memcpy(&lo, &lo_bits, 2);
      memcpy(&hi, &hi_bits, 2);
      v[2 * i] = to_float(lo);
      v[2 * i + 1] = to_float(hi);
    }
  } else {
    const unsigned words[4] = {r.v.x, r.v.y, r.v.z, r.v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      W lo, hi;
      const unsigned short lo_bits = static_cast<unsigned short>(words[i] & 0xffffu);
      const unsigned short hi_bits = static_cast<unsigned short>(words[i] >> 16);
      memcpy(&lo, &lo_bits, 2);
      memcpy(&hi, &hi_bits, 2);
      v[2 * i] = to_float(lo);
      v[2 * i + 1] = to_float(hi);
    }
  }
}

template <class W, int VEC>
__device__ __forceinline__ void load_row_vec(const W* p, float (&v)[VEC]) {
  raw_to_float<W, VEC>(load_raw<W, VEC>(p), v);
}

/// Streams VEC output values to p: 16- or 8-byte stores when p is aligned, scalars otherwise.
template <class Out, int VEC>
__device__ __forceinline__ void store_out(Out* p, const Out (&o)[VEC]) {
  constexpr int kBytes = VEC * static_cast<int>(sizeof(Out));
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  if constexpr (kBytes % 16 == 0) {
    if ((addr & 15u) == 0) {
#pragma unroll
      for (int i = 0; i < kBytes / 16; ++i) {
        uint4 w;
        memcpy(&w, reinterpret_cast<const char*>(o) + 16 * i, 16);
        __stcs(reinterpret_cast<uint4*>(p) + i, w);
      }
      return;
    }
  } else if constexpr (kBytes == 8) {
    if ((addr & 7u) == 0) {
      uint2 w;
      memcpy(&w, o, 8);
      __stcs(reinterpret_cast<uint2*>(p), w);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < VEC; ++i) p[i] = o[i];
}

/// n / f.divisor for 0 <= n < 2^31 (FastDiv, kernels/launch.h).
__device__ __forceinline__ std::uint32_t fast_div(const FastDiv& f, std::uint32_t n) {
  return f.divisor == 1 ? n : __umulhi(n, f.multiplier) >> f.shift;
}

/// Index of the last element <= key in the ascending at(0), ..., at(n - 1) (or -1); `at` reads
/// element i (global memory in last_le, shared memory in linearize).
template <class Int, class At>
__device__ __forceinline__ Int last_le_at(At at, Int n, std::int64_t key) {
  Int lo = 0, hi = n;  // first element > key in [lo, hi)
  while (lo < hi) {
    const Int mid = (lo + hi) >> 1;
    if (static_cast<std::int64_t>(at(mid)) <= key) lo = mid + 1; else hi = mid;
  }
  return lo - 1;
}

/// Index of the last element <= key in ascending a[0..n) (or -1).
template <class T>
__device__ __forceinline__ std::int64_t last_le(const T* a, std::int64_t n, std::int64_t key) {
  return last_le_at([a](std::int64_t i) { return __ldg(a + i); }, n, key);
}

/// The segment holding bag k of a forward launch (PooledArgs::bags_per_segment > 0: a division;
/// else a search); the pooled gathers' (kernels/pooled_gather*.cuh) one definition.
__device__ __forceinline__ std::int64_t pooled_segment_of(const PooledArgs& a, std::int64_t k) {
  if (a.bags_per_segment > 0) {
    const std::int64_t s =
        a.num_bags < (1ll << 31) && a.bags_per_segment < (1ll << 32)
            ? static_cast<std::int64_t>(fast_div(a.segment_div, static_cast<std::uint32_t>(k)))
            : k / a.bags_per_segment;
    return s < a.num_segs ? s : a.num_segs - 1;
  }
  return last_le(a.seg_first_bag, a.num_segs, k);
}

/// Element offset in the output of bag k's pooled row, bag k in segment s (pooled_segment_of) with
/// metadata seg = a.segs[s]; the pooled gathers' one definition.
__device__ __forceinline__ std::int64_t pooled_out_offset(const PooledArgs& a, std::int64_t s,
                                                          const SegmentMeta& seg, std::int64_t k) {
  return seg.out_base + (k - a.seg_first_bag[s]) * seg.out_stride;
}

/// Bag k was repaired by the offsets max-scan (docs/semantics.md "Bounds check"): its repaired
/// end differs from the raw one (k + 1 < num_bags; the last offset is counted by the scan), or
/// k == 0 and its start moved. raw / repaired: [num_bags + 1] offsets.
template <class Idx>
__device__ __forceinline__ bool bag_repaired(const Idx* raw, const Idx* repaired, std::int64_t k,
                                             std::int64_t num_bags) {
  return (k + 1 < num_bags && raw[k + 1] != repaired[k + 1]) || (k == 0 && raw[0] != repaired[0]);
}

__device__ __forceinline__ bool fatal_aborted(const unsigned long long* key) {
  return key != nullptr && *reinterpret_cast<const volatile unsigned long long*>(key) != kFatalNone;
}

}  // namespace tbe::cuda::detail
