// Device code shared by the backward run kernels: the thread group that owns one run (or chunk),
// 4-column vector loads/stores, and the sorted gather that accumulates grad_output rows.
//
// A group of G threads owns one run at a time; lane l owns columns [4l, 4l + 4) of the row
// (G = next power of two >= ceil(D_max / 4)): G <= 32 -> sub-warp/warp groups, several per
// 256-thread block (shuffles); G = 64..512 -> one group per block (shared memory).
// Sorted gather: the group walks its range of the sorted lookups in tiles of G: each lane resolves
// one lookup (sorted value -> grad_output row offset and scale c_p), then kRowsInFlight
// grad_output rows are loaded back to back (offsets broadcast in the group) before they are
// accumulated in sorted order: independent loads in flight and a fixed summation order.
// Accumulator Acc = policy.accumulation (F64 for F32 weights under seed-default, else F32).
#pragma once

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/backward_launch.h"
#include "kernels/common.cuh"

namespace tbe::cuda::detail {

/// Threads per block with warp groups (dispatch/tuning.h RunKernels, as the two below).
inline constexpr int kRunBlock = tuning::RunKernels::kBlockThreads;
/// Threads of the largest block group.
inline constexpr int kMaxBlockGroup = tuning::RunKernels::kMaxBlockGroup;
/// grad_output rows loaded back to back per lane.
inline constexpr int kRunRowsInFlight = tuning::RunKernels::kRowsInFlight;
static_assert(tuning::RunKernels::kColumnsPerLane == 4,
              "the run kernels move 4-column vectors (load4 / store4, Acc[4] accumulators)");

template <bool kBlock> struct RunGroup;

/// G <= 32 threads inside one warp.
template <> struct RunGroup<false> {
  int G, glane;
  unsigned mask;
  std::int64_t gid, num_groups;
  __device__ static RunGroup make(int group_size) {
    RunGroup g;
    g.G = group_size;
    const int lane = threadIdx.x & 31;
    g.glane = lane & (group_size - 1);
    g.mask = group_size == 32 ? 0xffffffffu : (((1u << group_size) - 1u) << (lane & ~(group_size - 1)));
    const int per_block = kRunBlock / group_size;
    g.gid = static_cast<std::int64_t>(blockIdx.x) * per_block + threadIdx.x / group_size;
    g.num_groups = static_cast<std::int64_t>(gridDim.x) * per_block;
    return g;
  }
  template <class T> __device__ __forceinline__ T sum(T x) const {
    for (int o = G >> 1; o > 0; o >>= 1) x += __shfl_xor_sync(mask, x, o, G);
    return x;
  }
  template <class T> __device__ __forceinline__ T broadcast(T x, int src) const {
    return __shfl_sync(mask, x, src, G);
  }
  __device__ __forceinline__ void sync() const { __syncwarp(mask); }
};

/// One group per block (G = blockDim.x, 64..512).
template <> struct RunGroup<true> {
  int G, glane;
  std::int64_t gid, num_groups;
  __device__ static RunGroup make(int group_size) {
    RunGroup g;
    g.G = group_size;
    g.glane = threadIdx.x;
    g.gid = blockIdx.x;
    g.num_groups = gridDim.x;
    return g;
  }
  template <class T> __device__ __forceinline__ T sum(T x) const {
    __shared__ double partial[kMaxBlockGroup / 32];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = static_cast<double>(x);
    __syncthreads();
    T t = T(0);
    for (int w = 0; w < G / 32; ++w) t += static_cast<T>(partial[w]);  // fixed order
    return t;
  }
  template <class T> __device__ __forceinline__ T broadcast(T x, int src) const {
    __shared__ unsigned long long slot;
    __syncthreads();
    if (threadIdx.x == src) {
      unsigned long long bits = 0;
      memcpy(&bits, &x, sizeof(T));
      slot = bits;
    }
    __syncthreads();
    T r;
    const unsigned long long bits = slot;
    memcpy(&r, &bits, sizeof(T));
    return r;
  }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
};

// --- 4-column loads/stores (vector when the row start and D allow it, else guarded scalars) ---
template <class T>
__device__ __forceinline__ void load4(const T* p, bool vec, int n, float (&x)[4]) {
  if (vec && n == 4) {
    if constexpr (sizeof(T) == 4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(p));
      x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
    } else {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
      const unsigned short b[4] = {static_cast<unsigned short>(v.x & 0xffffu),
                                   static_cast<unsigned short>(v.x >> 16),
                                   static_cast<unsigned short>(v.y & 0xffffu),
                                   static_cast<unsigned short>(v.y >> 16)};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        T h;
        memcpy(&h, &b[i], 2);
        x[i] = to_float(h);
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) x[i] = i < n ? to_float(p[i]) : 0.0f;
}

/// Plain (non-cached) load for buffers written in the same kernel by other blocks.
template <class T> __device__ __forceinline__ T load_cg(const T* p) { return __ldcg(p); }

template <class T>
__device__ __forceinline__ void store4(T* p, bool vec, int n, const T (&x)[4]) {
  if (vec && n == 4) {
    if constexpr (sizeof(T) == 4) {
      float4 v;
      memcpy(&v, x, 16);
      *reinterpret_cast<float4*>(p) = v;
    } else {
      uint2 v;
      memcpy(&v, x, 8);
      *reinterpret_cast<uint2*>(p) = v;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (i < n) p[i] = x[i];
}

__device__ __forceinline__ std::int64_t run_key(const RunArgs& a, std::int64_t i) {
  return a.key32 ? static_cast<std::int64_t>(static_cast<const std::uint32_t*>(a.run_keys)[i])
                 : TBE_MUTANT_SWAP(a, kBwdSharedRowsTwice, static_cast<std::int64_t>(static_cast<const std::uint64_t*>(a.run_keys)[i]) & ((std::int64_t{1} << 40) - 1), static_cast<std::int64_t>(static_cast<const std::uint64_t*>(a.run_keys)[i]));
}

/// Table of a linearized id (binary search over ascending row offsets).
__device__ __forceinline__ BwdTableMeta table_of(const RunArgs& a, std::int64_t key) {
  std::int32_t lo = 0, hi = a.num_tables;  // first table with row_offset > key
  while (lo < hi) {
    const std::int32_t mid = (lo + hi) >> 1;
    if (a.tables[mid].row_offset <= key) lo = mid + 1; else hi = mid;
  }
  return a.tables[lo - 1];
}

/// The small-table histogram path updates this run's row (kernels/backward_small_table.cu): its
/// table is a small-table feature's, the histogram is representable and SL >= small_min_run.
__device__ __forceinline__ bool histogram_owns(const RunArgs& a, std::int64_t key, std::int32_t sl) {
  if (a.small_invalid == nullptr || sl < a.small_min_run) return false;
  const BwdTableMeta t = table_of(a, key);
  return t.small_slot >= 0 && a.small_invalid[t.small_slot] == 0u;
}

/// Element offset of the grad_output row of bag k (pooled modes; the forward's segments).
__device__ __forceinline__ std::int64_t bag_grad_offset(const RunArgs& a, std::int64_t k) {
  std::int64_t s;
  if (a.bags_per_segment > 0) {  // 32-bit division: bags < 2^31 (BackwardOp's limit)
    s = static_cast<std::int64_t>(static_cast<std::uint32_t>(k) /
                                  static_cast<std::uint32_t>(a.bags_per_segment));
    if (s >= a.num_segs) s = a.num_segs - 1;
  } else {
    s = last_le(a.seg_first_bag, a.num_segs, k);
  }
  const SegmentMeta seg = a.segs[s];
  return seg.out_base + (k - a.seg_first_bag[s]) * seg.out_stride;
}

__device__ __forceinline__ float clip_gradient(float x, float mg) {
  return x < -mg ? -mg : (x > mg ? mg : x);  // NaN passes through
}

/// acc += Σ_{q in [begin, end)} c_q · grad_output[row(q), cols] over the sorted lookups, in
/// sorted order (grad_output clamped to [-max_gradient, max_gradient] first when max_gradient > 0).
template <class Out, class Acc, bool kBlock>
__device__ __forceinline__ void accumulate_sorted(const RunArgs& a, const RunGroup<kBlock>& g,
                                                  std::uint32_t begin, std::uint32_t end, int D,
                                                  Acc (&acc)[4]) {
  const Out* grad = static_cast<const Out*>(a.grad_output);
  const int c = g.glane * 4;
  const int ncols = D - c < 4 ? (D - c > 0 ? D - c : 0) : 4;
  const bool scaled = a.value_kind == SortedValue::PositionScaled;
  const bool clip = a.max_gradient > 0.0f;
  for (std::uint32_t base = begin; base < end; base += static_cast<std::uint32_t>(g.G)) {
    const int n = static_cast<int>(min(static_cast<std::uint32_t>(g.G), end - base));
    // this lane's lookup of the tile: grad row offset and scale
    std::int64_t goff = 0;
    Acc scale = Acc(1);
    if (g.glane < n) {
      const std::uint32_t v = a.sorted_values[base + g.glane];
      switch (a.value_kind) {
        case SortedValue::Bag: goff = bag_grad_offset(a, v); break;
        case SortedValue::Position: goff = static_cast<std::int64_t>(v) * a.none_dim; break;
        default:
          goff = bag_grad_offset(a, a.pos_bag[v]);
          scale = static_cast<Acc>(a.pos_scale[v]);
      }
    }
    if constexpr (kBlock) {
      __shared__ std::int64_t tile_goff[kMaxBlockGroup];
      __shared__ Acc tile_scale[kMaxBlockGroup];
      __syncthreads();
      tile_goff[g.glane] = goff;
      tile_scale[g.glane] = scale;
      __syncthreads();
      for (int j = 0; j < n; j += kRunRowsInFlight) {
        float x[kRunRowsInFlight][4];
#pragma unroll
        for (int u = 0; u < kRunRowsInFlight; ++u)
          if (j + u < n && ncols > 0) load4<Out>(grad + tile_goff[j + u] + c, a.grad_vec, ncols, x[u]);
#pragma unroll
        for (int u = 0; u < kRunRowsInFlight; ++u) {
          if (j + u < n && ncols > 0) {
            const Acc s = tile_scale[j + u];
#pragma unroll
            for (int v = 0; v < 4; ++v) {
              const float y = clip ? clip_gradient(x[u][v], a.max_gradient) : x[u][v];
              acc[v] = scaled ? fma(s, static_cast<Acc>(y), acc[v]) : acc[v] + static_cast<Acc>(y);
            }
          }
        }
      }
    } else {
      for (int j = 0; j < n; j += kRunRowsInFlight) {
        float x[kRunRowsInFlight][4];
        Acc s[kRunRowsInFlight];
#pragma unroll
        for (int u = 0; u < kRunRowsInFlight; ++u) {
          const int src = j + u < n ? j + u : 0;
          const std::int64_t o = g.broadcast(goff, src);
          s[u] = scaled ? g.broadcast(scale, src) : Acc(1);
          if (j + u < n && ncols > 0) load4<Out>(grad + o + c, a.grad_vec, ncols, x[u]);
        }
#pragma unroll
        for (int u = 0; u < kRunRowsInFlight; ++u) {
          if (j + u < n && ncols > 0) {
#pragma unroll
            for (int v = 0; v < 4; ++v) {
              const float y = clip ? clip_gradient(x[u][v], a.max_gradient) : x[u][v];
              acc[v] = scaled ? fma(s[u], static_cast<Acc>(y), acc[v]) : acc[v] + static_cast<Acc>(y);
            }
          }
        }
      }
    }
  }
}

/// Persistent grid of a kernel: resident blocks on the device (computed once per instance).
template <class Kernel>
int resident_grid(Kernel kernel, int block) {
  int dev = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0);
  cudaGetLastError();
  return sms * (per_sm > 0 ? per_sm : 1);
}

/// The run-kernel instances of one launcher: every row of dispatch/dispatch.h kCompiledBackward
/// (static_assert), each with warp and block groups.
#define TBE_BWD_INSTANTIATE(LAUNCH)                                            \
  TBE_BWD_INSTANTIATE_OUT(LAUNCH, DType::F32, DType::F64)                      \
  TBE_BWD_INSTANTIATE_OUT(LAUNCH, DType::F32, DType::F32)                      \
  TBE_BWD_INSTANTIATE_OUT(LAUNCH, DType::F16, DType::F32)                      \
  TBE_BWD_INSTANTIATE_OUT(LAUNCH, DType::BF16, DType::F32)
#define TBE_BWD_INSTANTIATE_OUT(LAUNCH, W, ACC)                                \
  TBE_BWD_INSTANCE(LAUNCH, W, ACC, DType::F32)                                 \
  TBE_BWD_INSTANCE(LAUNCH, W, ACC, DType::F16)                                 \
  TBE_BWD_INSTANCE(LAUNCH, W, ACC, DType::BF16)
#define TBE_BWD_INSTANCE(LAUNCH, W, ACC, OUT)                                  \
  static_assert(dispatch::contains(dispatch::kCompiledBackward,                \
                                   dispatch::TypeCombo{W, ACC, OUT}));         \
  template void LAUNCH<W, ACC, OUT, false>(const RunArgs&, cudaStream_t);      \
  template void LAUNCH<W, ACC, OUT, true>(const RunArgs&, cudaStream_t);

}  // namespace tbe::cuda::detail
