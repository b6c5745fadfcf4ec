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
// Staged gather (warp groups of G >= R lanes with 4-aligned grad_output rows; R per kernel:
// tuning::RunKernels::kShortStageRows / kLongStageRows): the same lookups in the same order, but
// each lane copies its 4 columns of the next rows with cp.async into its own ring of R
// shared-memory slots, R rows ahead of the row it adds: R rows stay in flight continuously
// without holding registers (the register gather holds kRowsInFlight rows and drains between
// batches). Each slot is written and read by the same thread, so cp.async.wait_group alone orders
// them.
// Accumulator Acc = policy.accumulation (F64 for F32 weights under seed-default, else F32).
#pragma once

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/backward_launch.h"
#include "kernels/common.cuh"
#include "kernels/cp_async.cuh"

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
/// Four 16-bit elements of T packed in two words (little-endian, element 0 in w0's low half) as floats.
template <class T>
__device__ __forceinline__ void unpack4(unsigned w0, unsigned w1, float (&x)[4]) {
  const unsigned short b[4] = {static_cast<unsigned short>(w0 & 0xffffu), static_cast<unsigned short>(w0 >> 16),
                               static_cast<unsigned short>(w1 & 0xffffu), static_cast<unsigned short>(w1 >> 16)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    T h;
    memcpy(&h, &b[i], 2);
    x[i] = to_float(h);
  }
}

template <class T>
__device__ __forceinline__ void load4(const T* p, bool vec, int n, float (&x)[4]) {
  if (vec && n == 4) {
    if constexpr (sizeof(T) == 4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(p));
      x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
    } else {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
      unpack4<T>(v.x, v.y, x);
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

/// The linearized id of run i (K = a.sentinel for the sentinel run).
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

/// The grad_output row offset (elements) and scale c_q of sorted lookup q.
template <class Acc>
__device__ __forceinline__ void resolve_lookup(const RunArgs& a, std::uint32_t q, std::int64_t& goff,
                                               Acc& scale) {
  const std::uint32_t v = a.sorted_values[q];
  switch (a.value_kind) {
    case SortedValue::Bag: goff = bag_grad_offset(a, v); break;
    case SortedValue::Position: goff = static_cast<std::int64_t>(v) * a.none_dim; break;
    default:
      goff = bag_grad_offset(a, a.pos_bag[v]);
      scale = static_cast<Acc>(a.pos_scale[v]);
  }
}

/// Bytes of one lane's slot in the staged gather: 4 grad_output elements.
template <class Out> inline constexpr int kStageSlotBytes = 4 * static_cast<int>(sizeof(Out));

/// Shared memory of one warp's staging (gather_staged): the ring of kStage slots per lane, the
/// current tile's grad_output row offsets (32 × 8 bytes) and two tiles of scales (2 × 32 × 8 bytes).
template <class Out, int kStage> inline constexpr int kStageWarpBytes =
    kStage * 32 * kStageSlotBytes<Out> + 32 * 8 + 2 * 32 * 8;

/// Dynamic shared memory of a run kernel launch staging kStage rows per lane (block groups and
/// kStage = 0 use none).
template <class Out, bool kBlock, int kStage> inline constexpr int kRunStageBytes =
    kBlock || kStage <= 0 ? 0 : (kRunBlock / 32) * kStageWarpBytes<Out, kStage>;

/// 4 grad_output elements of one slot (shared-space address) as floats.
template <class Out>
__device__ __forceinline__ void unstage4(unsigned slot, float (&x)[4]) {
  if constexpr (sizeof(Out) == 4) {
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3]) : "r"(slot) : "memory");
  } else {
    unsigned w0, w1;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(w0), "=r"(w1) : "r"(slot) : "memory");
    unpack4<Out>(w0, w1, x);
  }
}

/// acc += c · clip(x) for one row's 4 columns: kScaled multiplies by c (fma in Acc), kClip clamps
/// x to [-max_gradient, max_gradient] first (NaN passes through). With c = 1 and max_gradient = +inf
/// the general form <true, true> gives the same bits as the specialized ones.
template <bool kScaled, bool kClip, class Acc>
__device__ __forceinline__ void add_row(Acc (&acc)[4], const float (&x)[4], Acc c, float max_gradient) {
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const float y = kClip ? clip_gradient(x[v], max_gradient) : x[v];
    acc[v] = kScaled ? fma(c, static_cast<Acc>(y), acc[v]) : acc[v] + static_cast<Acc>(y);
  }
}

/// kStage of the run kernels' instance for groups of one lane (gather_registers_lane only).
inline constexpr int kStageLane = -1;

/// The register gather of a group of one lane (G = 1: per-D launches of D <= 4 tables,
/// BackwardTuning::ShortGroups): the lane resolves kRunRowsInFlight lookups at a time, then loads
/// their rows back to back, so it has kRunRowsInFlight sorted values and rows in flight (tiles of
/// G = 1 lookup would give it one of each). Rows are added in sorted order with add_row: the same
/// bits as tiles of G.
template <class Out, class Acc, bool kVec, bool kScaled, bool kClip>
__device__ __forceinline__ void gather_registers_lane(const RunArgs& a, std::uint32_t begin,
                                                      std::uint32_t end, int D, float max_gradient,
                                                      Acc (&acc)[4]) {
  constexpr int R = kRunRowsInFlight;
  const int ncols = D < 4 ? D : 4;
  const Out* col = static_cast<const Out*>(a.grad_output);
  for (std::uint32_t base = begin; base < end; base += static_cast<std::uint32_t>(R)) {
    const int n = static_cast<int>(min(static_cast<std::uint32_t>(R), end - base));
    float x[R][4];
    Acc s[R];
#pragma unroll
    for (int u = 0; u < R; ++u) {
      std::int64_t o = 0;
      s[u] = Acc(1);
      if (u < n) resolve_lookup(a, base + static_cast<std::uint32_t>(u), o, s[u]);
      if (u < n) load4<Out>(col + o, kVec, kVec ? 4 : ncols, x[u]);
    }
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (u < n) add_row<kScaled, kClip>(acc, x[u], s[u], max_gradient);
  }
}

/// The register gather: lookups resolved in tiles of G (lane j: lookup tile + j), then
/// kRunRowsInFlight rows loaded back to back before they are added in sorted order.
/// kVec: every lane's 4 columns are one aligned vector or wholly past D (a.grad_vec); else
/// guarded scalar loads. kScaled / kClip: add_row's flags, fixed per call.
template <class Out, class Acc, bool kBlock, bool kVec, bool kScaled, bool kClip>
__device__ __forceinline__ void gather_registers(const RunArgs& a, const RunGroup<kBlock>& g,
                                                 std::uint32_t begin, std::uint32_t end, int D,
                                                 float max_gradient, Acc (&acc)[4]) {
  const int c = g.glane * 4;
  const int ncols = D - c < 4 ? (D - c > 0 ? D - c : 0) : 4;
  const Out* col = static_cast<const Out*>(a.grad_output) + c;
  for (std::uint32_t base = begin; base < end; base += static_cast<std::uint32_t>(g.G)) {
    const int n = static_cast<int>(min(static_cast<std::uint32_t>(g.G), end - base));
    std::int64_t goff = 0;  // this lane's lookup of the tile: grad row offset and scale
    Acc scale = Acc(1);
    if (g.glane < n) resolve_lookup(a, base + g.glane, goff, scale);
    [[maybe_unused]] const std::int64_t* tile_goff = nullptr;
    [[maybe_unused]] const Acc* tile_scale = nullptr;
    if constexpr (kBlock) {  // one group per block: the tile goes through shared memory
      __shared__ std::int64_t s_goff[kMaxBlockGroup];
      __shared__ Acc s_scale[kMaxBlockGroup];
      __syncthreads();
      s_goff[g.glane] = goff;
      s_scale[g.glane] = scale;
      __syncthreads();
      tile_goff = s_goff;
      tile_scale = s_scale;
    }
    for (int j = 0; j < n; j += kRunRowsInFlight) {
      float x[kRunRowsInFlight][4];
      Acc s[kRunRowsInFlight];
#pragma unroll
      for (int u = 0; u < kRunRowsInFlight; ++u) {
        const int src = j + u < n ? j + u : 0;
        std::int64_t o;
        s[u] = Acc(1);
        if constexpr (kBlock) {
          o = tile_goff[src];
          if constexpr (kScaled) s[u] = tile_scale[src];
        } else {
          o = g.broadcast(goff, src);
          if constexpr (kScaled) s[u] = g.broadcast(scale, src);
        }
        if (j + u < n && ncols > 0) load4<Out>(col + o, kVec, kVec ? 4 : ncols, x[u]);
      }
#pragma unroll
      for (int u = 0; u < kRunRowsInFlight; ++u)
        if (j + u < n && ncols > 0) add_row<kScaled, kClip>(acc, x[u], s[u], max_gradient);
    }
  }
}

/// The staged gather (warp groups with G >= kR lanes, a.grad_vec). Rows r = 0..n-1 (lookup
/// begin + r) are resolved in tiles of G into shared memory (offsets of the current tile, scales of
/// the current and the previous tile); at step r the group adds row r - kR (waiting for its copy)
/// and then issues row r into the slot just freed (r mod kR of each lane's ring); after row n - 1
/// one wait for everything and the last min(n, kR) rows are added back to back. The same rows in
/// the same order with the same arithmetic as the register gather: bitwise equal sums. Every lane
/// reads only its own ring slots; the tile arrays are written between two g.sync().
template <class Out, class Acc, int kR, bool kScaled, bool kClip>
__device__ __forceinline__ void gather_staged(const RunArgs& a, const RunGroup<false>& g,
                                              std::uint32_t begin, std::uint32_t end, int D,
                                              float max_gradient, Acc (&acc)[4]) {
  static_assert(kR >= 1 && kR <= 32 && (kR & (kR - 1)) == 0, "ring: a power of two <= 32 rows");
  extern __shared__ __align__(16) unsigned char run_stage[];
  constexpr int kSlot = kStageSlotBytes<Out>;
  constexpr unsigned kSlotStride = 32u * kSlot;  // slot-major: a warp's lanes hit consecutive bytes
  const int lane = threadIdx.x & 31;
  unsigned char* const warp_base = run_stage + (threadIdx.x >> 5) * kStageWarpBytes<Out, kR>;
  const unsigned ring = static_cast<unsigned>(__cvta_generic_to_shared(warp_base)) + lane * kSlot;
  const int group_base = lane - g.glane;  // first lane of this group in the warp
  std::int64_t* const tile_goff =
      reinterpret_cast<std::int64_t*>(warp_base + kR * kSlotStride) + group_base;
  double* const tile_scale =
      reinterpret_cast<double*>(warp_base + kR * kSlotStride + 32 * 8) + group_base;  // [2][32]
  const Out* col = static_cast<const Out*>(a.grad_output) + g.glane * 4;
  const bool active = g.glane * 4 < D;
  const std::uint32_t n = end - begin;
  const int G = g.G;
  const int log2G = __ffs(G) - 1;
  auto add = [&](std::uint32_t q) {  // row q (its copy has landed)
    Acc c = Acc(1);
    if constexpr (kScaled)
      c = static_cast<Acc>(tile_scale[(static_cast<int>(q >> log2G) & 1) * 32 + static_cast<int>(q & (G - 1))]);
    if (active) {
      float x[4];
      unstage4<Out>(ring + (q & (kR - 1)) * kSlotStride, x);
      add_row<kScaled, kClip>(acc, x, c, max_gradient);
    }
  };
  for (std::uint32_t t0 = 0; t0 < n; t0 += static_cast<std::uint32_t>(G)) {
    const int parity = static_cast<int>(t0 >> log2G) & 1;
    {  // this tile's lookups
      std::int64_t goff = 0;
      Acc scale = Acc(1);
      if (t0 + g.glane < n) resolve_lookup(a, begin + t0 + g.glane, goff, scale);
      g.sync();  // every lane has issued the previous tile's rows
      tile_goff[g.glane] = goff;
      if constexpr (kScaled) tile_scale[parity * 32 + g.glane] = static_cast<double>(scale);
      g.sync();
    }
    const std::uint32_t steps = min(static_cast<std::uint32_t>(G), n - t0);
#pragma unroll 4
    for (std::uint32_t j = 0; j < steps; ++j) {
      const std::uint32_t r = t0 + j;
      if (r >= static_cast<std::uint32_t>(kR)) {  // add row r - kR, freeing its slot
        cp_async_wait<kR - 1>();  // groups 0..r-kR have landed
        add(r - kR);
      }
      if (active) {  // issue row r
        const unsigned slot = ring + (r & (kR - 1)) * kSlotStride;
        if constexpr (kSlot == 16) cp_async16(slot, col + tile_goff[j]); else cp_async8(slot, col + tile_goff[j]);
      }
      cp_async_commit();  // one group per row: the count stays uniform across lanes
    }
  }
  cp_async_wait<0>();  // drain: the last min(n, kR) rows
  for (std::uint32_t q = n > static_cast<std::uint32_t>(kR) ? n - kR : 0; q < n; ++q) add(q);
}

/// The gather of aligned rows with add_row's flags fixed: staged (kStage rows) for warp groups of
/// at least kStage lanes and ranges longer than kRegisterMax lookups, else the register gather
/// (whose single batch of kRunRowsInFlight rows is as deep as the ring for such short ranges, with
/// no ring to fill and drain).
template <class Out, class Acc, bool kBlock, int kStage, int kRegisterMax, bool kScaled, bool kClip>
__device__ __forceinline__ void gather_vec(const RunArgs& a, const RunGroup<kBlock>& g,
                                           std::uint32_t begin, std::uint32_t end, int D,
                                           float max_gradient, Acc (&acc)[4]) {
  if constexpr (!kBlock && kStage > 0) {
    if (staged_gather_shape(kBlock, /*grad_vec=*/true, g.G, kStage) &&  // gather_vec: aligned rows
        end - begin > static_cast<std::uint32_t>(kRegisterMax)) {
      gather_staged<Out, Acc, kStage, kScaled, kClip>(a, g, begin, end, D, max_gradient, acc);
      return;
    }
  }
  gather_registers<Out, Acc, kBlock, true, kScaled, kClip>(a, g, begin, end, D, max_gradient, acc);
}

/// acc += Σ_{q in [begin, end)} c_q · grad_output[row(q), cols] over the sorted lookups, in
/// sorted order (grad_output clamped to [-max_gradient, max_gradient] first when max_gradient > 0).
/// kStage: rows staged per lane (gather_staged; 0: registers); ranges of at most kRegisterMax
/// lookups take the register gather. Aligned rows (a.grad_vec) take one of four bodies with the
/// scale and the clamp fixed at compile time: runtime selects inside the row loop cost ~3x the
/// instructions per row (SASS, session 12, bench/results/README.md); other rows take the general
/// body (c_q = 1 when unscaled, clamp at +inf: the same bits).
template <class Out, class Acc, bool kBlock, int kStage, int kRegisterMax>
__device__ __forceinline__ void accumulate_sorted(const RunArgs& a, const RunGroup<kBlock>& g,
                                                  std::uint32_t begin, std::uint32_t end, int D,
                                                  Acc (&acc)[4]) {
  const bool scaled = a.value_kind == SortedValue::PositionScaled;
  const bool clip = a.max_gradient > 0.0f;
  const float mg = clip ? a.max_gradient : __int_as_float(0x7f800000);  // +inf: no clamp
  constexpr int S = kStage, M = kRegisterMax;
  if constexpr (kStage == kStageLane) {  // groups of one lane (their own kernel instance)
    if (!a.grad_vec)
      gather_registers_lane<Out, Acc, false, true, true>(a, begin, end, D, mg, acc);
    else if (scaled)
      clip ? gather_registers_lane<Out, Acc, true, true, true>(a, begin, end, D, mg, acc)
           : gather_registers_lane<Out, Acc, true, true, false>(a, begin, end, D, mg, acc);
    else
      clip ? gather_registers_lane<Out, Acc, true, false, true>(a, begin, end, D, mg, acc)
           : gather_registers_lane<Out, Acc, true, false, false>(a, begin, end, D, mg, acc);
    return;
  }
  if (!a.grad_vec)  // uniform: one flag per call
    gather_registers<Out, Acc, kBlock, false, true, true>(a, g, begin, end, D, mg, acc);
  else if (scaled)
    clip ? gather_vec<Out, Acc, kBlock, S, M, true, true>(a, g, begin, end, D, mg, acc)
         : gather_vec<Out, Acc, kBlock, S, M, true, false>(a, g, begin, end, D, mg, acc);
  else
    clip ? gather_vec<Out, Acc, kBlock, S, M, false, true>(a, g, begin, end, D, mg, acc)
         : gather_vec<Out, Acc, kBlock, S, M, false, false>(a, g, begin, end, D, mg, acc);
}

/// Persistent grid of a kernel: resident blocks on the device (computed once per instance) with
/// `smem` bytes of dynamic shared memory per block (allowed past the 48 KiB default here).
template <class Kernel>
int resident_grid(Kernel kernel, int block, int smem = 0) {
  int dev = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, smem);
  cudaGetLastError();
  return sms * (per_sm > 0 ? per_sm : 1);
}

/// Launches a persistent run kernel (short runs, long-run chunks, long-run apply): the resident
/// blocks of the device (computed once per kernel) of kRunBlock threads for warp groups; for block
/// groups the blocks resident at kMaxBlockGroup threads, times the groups of a.group_size threads
/// that fit in one such block (smaller groups fit more). kSmem: dynamic shared memory per block.
template <auto kKernel, bool kBlock, int kSmem = 0>
void launch_persistent(const RunArgs& a, cudaStream_t stream) {
  static const int grid = resident_grid(kKernel, kBlock ? kMaxBlockGroup : kRunBlock, kSmem);
  const int g = kBlock ? grid * (kMaxBlockGroup / a.group_size) : grid;
  kKernel<<<static_cast<unsigned>(g), kBlock ? a.group_size : kRunBlock, kSmem, stream>>>(a);
}

/// The run-kernel instances of one launcher: every row of dispatch/dispatch.h kCompiledBackward
/// (static_assert), each with warp and block groups (TBE_BWD_INSTANTIATE) or with warp groups only
/// (TBE_BWD_INSTANTIATE_WARP: a launcher whose host never asks for block groups).
#define TBE_BWD_INSTANTIATE(LAUNCH) TBE_BWD_INSTANTIATE_EACH(TBE_BWD_INSTANCE, LAUNCH)
#define TBE_BWD_INSTANTIATE_WARP(LAUNCH) TBE_BWD_INSTANTIATE_EACH(TBE_BWD_INSTANCE_WARP, LAUNCH)
#define TBE_BWD_INSTANTIATE_EACH(INSTANCE, LAUNCH)                             \
  TBE_BWD_INSTANTIATE_OUT(INSTANCE, LAUNCH, DType::F32, DType::F64)            \
  TBE_BWD_INSTANTIATE_OUT(INSTANCE, LAUNCH, DType::F32, DType::F32)            \
  TBE_BWD_INSTANTIATE_OUT(INSTANCE, LAUNCH, DType::F16, DType::F32)            \
  TBE_BWD_INSTANTIATE_OUT(INSTANCE, LAUNCH, DType::BF16, DType::F32)
#define TBE_BWD_INSTANTIATE_OUT(INSTANCE, LAUNCH, W, ACC)                      \
  INSTANCE(LAUNCH, W, ACC, DType::F32)                                         \
  INSTANCE(LAUNCH, W, ACC, DType::F16)                                         \
  INSTANCE(LAUNCH, W, ACC, DType::BF16)
#define TBE_BWD_INSTANCE_WARP(LAUNCH, W, ACC, OUT)                             \
  static_assert(dispatch::contains(dispatch::kCompiledBackward,                \
                                   dispatch::TypeCombo{W, ACC, OUT}));         \
  template void LAUNCH<W, ACC, OUT, false>(const RunArgs&, cudaStream_t);
#define TBE_BWD_INSTANCE(LAUNCH, W, ACC, OUT)                                  \
  TBE_BWD_INSTANCE_WARP(LAUNCH, W, ACC, OUT)                                   \
  template void LAUNCH<W, ACC, OUT, true>(const RunArgs&, cudaStream_t);

}  // namespace tbe::cuda::detail
