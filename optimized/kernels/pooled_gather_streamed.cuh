// Streamed pooled gather (ForwardTuning::staged_rows = kR > 0): the SUM / MEAN forward for
// launches whose bags take a whole warp (G = 32 on the vector path, D <= 32·VEC, no column
// chunks: FP32 rows of D in (64, 128], 16-bit rows of D in (128, 256]).
//
// Why: the group-per-bag gather (kernels/pooled_gather.cuh) holds its rows in flight in registers
// (4 per lane; 8 spill) and pays, per bag, a chain of dependent loads (offsets, then the index
// tile, then the rows) before its first row arrives. On seed-large with FP32 weights and FP64
// accumulation it is latency-bound (ncu: long-scoreboard stalls on the rows, 33% occupancy at 80
// registers; bench/results/README.md, session 10).
//
// How: a warp owns nb consecutive bags [k0, k0 + nb) (PooledArgs::bags_per_warp, at most 32: 32
// on large launches, fewer on small ones, so that the grid still fills the device). Their lookups
// are one contiguous index range [offsets[k0], offsets[k0 + nb]) (valid or repaired offsets are
// non-decreasing), streamed position by position through a ring of kR row slots per warp in
// shared memory: lane l copies its 16 bytes of the row (columns [l·VEC, l·VEC + VEC)) with
// cp.async, which holds no register while in flight, kR - 1 positions ahead of the accumulation,
// across bag boundaries. Each lane reads back only its own bytes after its own wait, so no
// barrier is needed. The accumulation is the same as the group-per-bag kernel's: per column, in
// index order, widen then add (or fma with the per-sample weight) in Acc; MEAN divides by L; one
// rounding to Out. So both kernels give bitwise the same output (tested).
// The stream runs in chunks of 32 steps, one index tile each (lane j holds the index and
// per-sample weight of position c0 + j; the next tile is loaded while this one is used). At a
// chunk's start lane j stages position c0 + j's StreamedRow in shared memory: its bag (a search
// over the warp's bag ends), the fused check, the row's address and bytes. A step then issues
// with one broadcast shared load and the copy (lanes whose columns start past the row's D
// zero-fill theirs), and adds position c0 + u - (kR - 1) on every lane. Whole chunks are unrolled
// by kR so the ring slots are constants; the first and last chunks test each step. Bag metadata
// (end, feature, D, output offset) is written to shared memory by lane i for bag k0 + i;
// the consumer follows its bag, reading it when a position crosses a bag end (empty bags are
// written as zeros).
// Fused bounds check: an index outside [0, E) of its bag's table (tested at the index's full
// width) reads row 0 and is counted (one ballot per chunk); repaired bags are counted with one
// ballot per warp.
// Shapes: as PooledArgs (kernels/launch.h). Shared memory: kStreamedWarps · (kR · 512 + 32 · 24 + 32 · 16) bytes
// (dynamic).
#pragma once

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/common.cuh"
#include "kernels/cp_async.cuh"

namespace tbe::cuda::detail {

inline constexpr int kStreamedBlock = tuning::PooledGather::kBlockThreads;
inline constexpr int kStreamedWarps = kStreamedBlock / tuning::kWarpThreads;
/// Most bags per warp (one bag record per lane); a launch takes fewer when its grid would not
/// fill the device kStreamedWaves times over.
inline constexpr int kStreamedBagsPerWarp = tuning::kWarpThreads;
inline constexpr int kStreamedWaves = 4;
/// Bytes of one ring slot of a warp: 32 lanes × 16 bytes (one row of 32·VEC elements).
inline constexpr int kStreamedSlotBytes = tuning::kWarpThreads * tuning::PooledGather::kVectorBytes;

/// Dynamic shared memory of a streamed launch with a ring of kR rows per warp
/// (the rings, then each warp's 32 StreamedBag records, 768 bytes per warp, then each warp's 32
/// StreamedRow records of the chunk being issued, 512 bytes per warp).
template <int kR> inline constexpr int kStreamedSmemBytes =
    kStreamedWarps * (kR * kStreamedSlotBytes + kStreamedBagsPerWarp * 24 + tuning::kWarpThreads * 16);

/// One bag of a warp's (up to 32), in shared memory (written once by its lane; read per lane by
/// the producer's search when it stages a chunk's rows, warp-uniformly by the consumer when it
/// reaches the bag; registers stay free for the sums). 24 bytes, so that bags and row records
/// together keep the 1280 bytes per warp that let 3 blocks of the 16-row ring fit an SM.
struct StreamedBag {
  std::int64_t end;        ///< offsets[k + 1]
  std::int64_t out_off;    ///< output element offset of the bag's row
  std::int32_t feature;    ///< the bag's feature (PooledArgs::features: table offset, E)
  std::int32_t dim;        ///< D of the table
};
inline constexpr int kStreamedMetaBytes = kStreamedBagsPerWarp * static_cast<int>(sizeof(StreamedBag));
static_assert(sizeof(StreamedBag) == 24, "kStreamedSmemBytes counts 24 bytes per bag");

/// One position of the chunk being issued, in shared memory (lane j writes position c0 + j's once
/// per chunk; every lane reads each in turn with one broadcast load): the global address of its
/// row (the fused check's repair applied) and the row's bytes, D·sizeof(W) (0 past the stream's
/// end). A lane copies its 16 bytes when its column starts inside the row, else zero-fills them.
struct alignas(16) StreamedRow {
  unsigned long long row;  ///< address of the row's first element
  unsigned row_bytes;      ///< D·sizeof(W) of the position's table
  unsigned pad;
};
static_assert(sizeof(StreamedRow) == 16, "kStreamedSmemBytes counts 16 bytes per position");

/// kCheck: the fused bounds check (PooledArgs::check_indices) compiled in or out, so the
/// unchecked instance carries none of its registers.
template <class W, class Acc, class Out, class Idx, int kR, bool kRows32, bool kWeighted, bool kCheck>
__device__ __forceinline__ void streamed_warp(const PooledArgs& a, std::int64_t k0, int nb,
                                              unsigned ring, StreamedBag* bags, StreamedRow* rows) {
  constexpr int VEC = tuning::PooledGather::kVectorBytes / static_cast<int>(sizeof(W));
  constexpr unsigned kFull = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  const Idx* indices = static_cast<const Idx*>(a.indices);

  // --- lane i: bag k0 + i's metadata into shared memory ---
  std::int64_t P0 = 0;
  if (lane < nb) {
    const std::int64_t k = k0 + lane;
    const std::int64_t b_s = static_cast<std::int64_t>(offsets[k]);
    const std::int64_t b_e = static_cast<std::int64_t>(offsets[k + 1]);
    P0 = b_s;
    const std::int64_t s = pooled_segment_of(a, k);
    const SegmentMeta seg = a.segs[s];
    const FeatureMeta fm = a.features[seg.feature];
    bags[lane] = StreamedBag{b_e, pooled_out_offset(a, s, seg, k), seg.feature, fm.dim};
    if (a.orig_offsets != nullptr) {  // fused check: count the repaired bags of the warp
      const bool bad = bag_repaired(static_cast<const Idx*>(a.orig_offsets), offsets, k, a.num_bags);
      const unsigned m = __ballot_sync(__activemask(), bad);
      if (m != 0 && lane == __ffs(m) - 1) atomicAdd(&a.counters->bad_bags, static_cast<unsigned long long>(__popc(m)));
    }
  }
  __syncwarp();
  P0 = __shfl_sync(kFull, P0, 0);
  const std::int64_t P1 = bags[nb - 1].end;
  const W* weights = static_cast<const W*>(a.weights);
  const int col = lane * VEC;
  const float* psw = a.per_sample_weights;

  // --- index tiles: lane j holds position P0 + 32t + j (t: the chunk being issued) ---
  auto load_idx = [&](std::int64_t p, std::int64_t& idx, float& w) {
    idx = 0;
    w = 1.0f;
    if (p < P1) {
      idx = static_cast<std::int64_t>(__ldg(indices + p));
      if constexpr (kWeighted) w = __ldg(psw + p);
    }
  };
  std::int64_t idx_cur = 0, idx_nxt;
  float w_cur = 1.0f, w_nxt, w_prv = 1.0f;
  load_idx(P0 + lane, idx_nxt, w_nxt);
  const unsigned col_bytes = static_cast<unsigned>(col) * static_cast<unsigned>(sizeof(W));

  // lane j: the StreamedRow of position c0 + j (its index in idx_cur): its bag (the first with
  // end > the position; empty bags skipped), the fused check at the index's full width (outside
  // [0, E): row 0, counted), its row's address. One search and one address per lane per chunk,
  // so the 32 steps only load a record each.
  auto stage_rows = [&](std::int64_t c0) {
    const std::int64_t p = P0 + c0 + lane;
    StreamedRow rec{0ull, 0u, 0u};
    [[maybe_unused]] bool bad = false;
    if (p < P1) {
      int lo = 0, hi = nb - 1;
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (bags[mid].end > p) hi = mid; else lo = mid + 1;
      }
      const StreamedBag& b = bags[lo];
      const FeatureMeta& fm = a.features[b.feature];
      const std::int64_t table_off = fm.table_offset;
      std::int64_t r = idx_cur;
      if constexpr (kCheck) {
        if (r < 0 || r >= fm.rows) {
          r = 0;  // the repair: row 0, the weight kept
          bad = true;
        }
      }
      const std::uint32_t row_bytes = static_cast<std::uint32_t>(b.dim) * static_cast<std::uint32_t>(sizeof(W));
      const W* src;
      if constexpr (kRows32)
        src = reinterpret_cast<const W*>(reinterpret_cast<const char*>(weights + table_off) +
                                         static_cast<std::uint64_t>(static_cast<std::uint32_t>(r)) * row_bytes);
      else
        src = weights + table_off + r * b.dim;
      rec = StreamedRow{reinterpret_cast<unsigned long long>(src), row_bytes, 0u};
    }
    if constexpr (kCheck) {
      const unsigned m = __ballot_sync(kFull, bad);
      if (m != 0 && lane == 0) atomicAdd(&a.counters->bad_indices, static_cast<unsigned long long>(__popc(m)));
    }
    __syncwarp();  // every lane is done with the previous chunk's records
    rows[lane] = rec;
    __syncwarp();
  };

  // --- consumer: bag ck of the position it adds ---
  int ck = 0;
  std::int64_t ce = bags[0].end;
  Acc acc[VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) acc[v] = Acc(0);

  // writes bag ck (acc, MEAN over its L) and clears acc
  auto flush = [&]() {
    const StreamedBag& b = bags[ck];
    if (col < b.dim) {
      const std::int64_t L = b.end - (ck > 0 ? bags[ck - 1].end : P0);
      Out y[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) y[v] = round_out<Out>((a.mean && L > 0) ? acc[v] / Acc(L) : acc[v]);
      store_out<Out, VEC>(static_cast<Out*>(a.output) + b.out_off + col, y);
    }
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = Acc(0);
  };

  // Chunks of 32 steps (one index tile). Step u of the chunk at c0 issues position c0 + u into
  // slot u % kR and adds position q = c0 + u - (kR - 1) from slot (u + 1) % kR (issued kR - 1
  // steps before; its index tile is this chunk's when u >= kR - 1, else the previous one's).
  // The consumer's bag end is compared as a step number clamped to [0, 64] (ce_u: recomputed per chunk
  // and at each bag change), so a step's tests are one 32-bit compare each.
  const std::int64_t n = P1 - P0;
  const std::int64_t steps = n + (kR - 1);
  auto clamp_steps = [](std::int64_t x) {
    return static_cast<int>(x < 0 ? 0 : (x > 64 ? 64 : x));
  };
  // one step: issue position c0 + u into slot u % kR (issue), add position c0 + u - (kR - 1)
  // from slot (u + 1) % kR (add); ce_u: the consumer's bag end as a step number of this chunk
  auto step = [&](std::int64_t c0, int u, int& ce_u, bool issue, bool add) {
    if (issue) {  // lane l's 16 bytes of the row, zeros where its columns start past D
      const StreamedRow rec = rows[u];  // one broadcast load
      const bool inside = col_bytes < rec.row_bytes;  // else zero-fill from the row's start, unread
      cp_async16_ca(ring + static_cast<unsigned>(u & (kR - 1)) * kStreamedSlotBytes,
                    reinterpret_cast<const char*>(rec.row) + (inside ? col_bytes : 0u), inside ? 16u : 0u);
    }
    cp_async_commit();  // one group per step (empty when nothing was issued): uniform counts
    if (add) {
      cp_async_wait<kR - 1>();
      if (u >= ce_u) {  // finish the consumer's bag (and any empty ones after it)
        const std::int64_t q = c0 + u - (kR - 1);
        do {
          flush();
          ce = bags[++ck].end;
        } while (P0 + q >= ce);
        ce_u = clamp_steps(ce - P0 - c0 + (kR - 1));
      }
      float w = 1.0f;
      if constexpr (kWeighted) w = __shfl_sync(kFull, u >= kR - 1 ? w_cur : w_prv, (u - (kR - 1)) & 31);
      {  // every lane adds: lanes whose columns start past the bag's D add the zeros their copy
         // wrote, into sums that flush neither stores nor keeps
        RawRow<W, VEC> raw;
        const unsigned slot = ring + static_cast<unsigned>((u + 1) & (kR - 1)) * kStreamedSlotBytes;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(raw.v.x), "=r"(raw.v.y), "=r"(raw.v.z), "=r"(raw.v.w)
                     : "r"(slot)
                     : "memory");
        float x[VEC];
        raw_to_float<W, VEC>(raw, x);
        if constexpr (kWeighted) {
#pragma unroll
          for (int v = 0; v < VEC; ++v) acc[v] = fma(Acc(w), widen<Acc>(x[v]), acc[v]);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) acc[v] += widen<Acc>(x[v]);
        }
      }
    }
  };
  // a chunk: its index tile (and the next one in flight), then its 32 steps; guarded (the first
  // chunk and those past the last whole one): a plain loop with each step's issue / add tested;
  // otherwise every step issues and adds, unrolled by kR so that the slots are constants
  auto chunk = [&](std::int64_t c0, bool guarded) {
    w_prv = w_cur;
    idx_cur = idx_nxt;
    w_cur = w_nxt;
    stage_rows(c0);
    load_idx(P0 + c0 + 32 + lane, idx_nxt, w_nxt);
    int ce_u = clamp_steps(ce - P0 - c0 + (kR - 1));
    if (guarded) {
      const int issue_end = clamp_steps(n - c0);
      const int add_begin = clamp_steps(kR - 1 - c0);
      const int add_end = clamp_steps(steps - c0);
#pragma unroll 1
      for (int u = 0; u < 32; ++u)
        step(c0, u, ce_u, u < issue_end, u >= add_begin && u < add_end);
    } else {
#pragma unroll 1
      for (int u0 = 0; u0 < 32; u0 += kR) {
#pragma unroll
        for (int u1 = 0; u1 < kR; ++u1) step(c0, u0 + u1, ce_u, true, true);
      }
    }
  };
  // the first chunk and the chunks past the last whole one are guarded; the rest are not
  std::int64_t c0 = 0;
  if (steps > 0) {
    chunk(std::int64_t{0}, true);
    for (c0 = 32; c0 + 32 <= n; c0 += 32) chunk(c0, false);
    for (; c0 < steps; c0 += 32) chunk(c0, true);
  }
  // the last bag with lookups and the empty bags after it
  while (ck < nb) {
    flush();
    ++ck;
  }
}

/// One kernel per combination of the launch's uniform flags (32-bit row arithmetic, per-sample
/// weights, the fused check), so each gets its own register allocation.
template <class W, class Acc, class Out, class Idx, int kR, bool kRows32, bool kWeighted, bool kCheck>
__global__ void __launch_bounds__(kStreamedBlock, tuning::PooledGather::kMinBlocksPerSmStreamed)
pooled_gather_streamed(const PooledArgs a) {
  static_assert(kR >= 2 && kR <= 32 && (kR & (kR - 1)) == 0, "ring: a power of two in 2..32 rows");
  if (fatal_aborted(a.abort_key)) return;
  extern __shared__ __align__(16) unsigned char streamed_ring[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t k0 =
      a.bag_begin + (static_cast<std::int64_t>(blockIdx.x) * kStreamedWarps + warp) * a.bags_per_warp;
  if (k0 >= a.bag_end) return;  // the whole warp
  const int nb = static_cast<int>(min(static_cast<std::int64_t>(a.bags_per_warp), a.bag_end - k0));
  const unsigned ring = static_cast<unsigned>(__cvta_generic_to_shared(streamed_ring)) +
                        static_cast<unsigned>(warp * kR * kStreamedSlotBytes + lane * tuning::PooledGather::kVectorBytes);
  StreamedBag* bags = reinterpret_cast<StreamedBag*>(streamed_ring + kStreamedWarps * kR * kStreamedSlotBytes +
                                                     warp * kStreamedMetaBytes);
  StreamedRow* rows = reinterpret_cast<StreamedRow*>(
      streamed_ring + kStreamedWarps * (kR * kStreamedSlotBytes + kStreamedMetaBytes) +
      warp * tuning::kWarpThreads * static_cast<int>(sizeof(StreamedRow)));
  streamed_warp<W, Acc, Out, Idx, kR, kRows32, kWeighted, kCheck>(a, k0, nb, ring, bags, rows);
}

/// One launch of the instance with the launch's flags (a.rows32, per-sample weights, a.check_indices).
template <class W, class Acc, class Out, class Idx, int kR, bool kRows32, bool kWeighted, bool kCheck>
void launch_streamed_kernel(const PooledArgs& a, cudaStream_t stream) {
  auto* kernel = pooled_gather_streamed<W, Acc, Out, Idx, kR, kRows32, kWeighted, kCheck>;
  const std::int64_t bags = a.bag_end - a.bag_begin;
  constexpr int smem = kStreamedSmemBytes<kR>;
  // The ring's shared memory, the carveout and the warps resident, once per device and L1
  // preference (the attributes are per device); a failed call leaves its error for the launch
  // check. Under prefer_l1 the carveout is the smallest that holds kMinBlocksPerSmStreamed
  // blocks: left to the driver, an instance with few registers fits one more block and gets a
  // larger carveout, so less L1 for the rows' second pass through it (measured: H100 session 21,
  // ncu, the FP32-accumulation instance at 4 blocks, L1 hit 23% against 33% at 3; session 22 on
  // seed-large, 5.373 ms with this carveout against 5.678 with the driver's).
  constexpr int kDevices = 64;
  static std::atomic<std::int64_t> resident[kDevices][2] = {};  // 0: not measured yet
  static std::atomic<int> applied[kDevices] = {};  // carveout set: 0 never, 1 default, 2 prefer L1
  int dev = 0;
  cudaGetDevice(&dev);
  const int pref = a.prefer_l1 ? 1 : 0;
  std::int64_t resident_warps = 0;
  if (dev < kDevices && applied[dev].load(std::memory_order_relaxed) == pref + 1)
    resident_warps = resident[dev][pref].load(std::memory_order_relaxed);
  if (resident_warps == 0) {
    int sms = 0, per_sm = 0, smem_sm = 0, reserved = 0;
    bool ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) == cudaSuccess &&
              cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
              cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) == cudaSuccess &&
              cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev) == cudaSuccess;
    if (ok) {
      const std::int64_t need =
          static_cast<std::int64_t>(tuning::PooledGather::kMinBlocksPerSmStreamed) * (smem + reserved);
      const int carveout = a.prefer_l1 ? static_cast<int>(std::min<std::int64_t>(
                                             100, (100 * need + smem_sm - 1) / std::max(smem_sm, 1)))
                                       : static_cast<int>(cudaSharedmemCarveoutDefault);
      ok = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout) == cudaSuccess &&
           cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kStreamedBlock, smem) == cudaSuccess;
    }
    if (ok) {
      resident_warps = std::max<std::int64_t>(1, static_cast<std::int64_t>(sms) * per_sm * kStreamedWarps);
      if (dev < kDevices) {
        resident[dev][pref].store(resident_warps, std::memory_order_relaxed);
        applied[dev].store(pref + 1, std::memory_order_relaxed);
      }
    } else {
      resident_warps = 1;
    }
  }
  // Bags per warp: up to 32 while the grid still fills the device kStreamedWaves times over (a
  // small launch gets fewer bags per warp, so more warps overlap their loads).
  PooledArgs b = a;
  b.bags_per_warp = static_cast<std::int32_t>(std::clamp<std::int64_t>(
      a.bags_per_warp > 0 ? a.bags_per_warp : bags / (resident_warps * kStreamedWaves), 1,
      kStreamedBagsPerWarp));
  const std::int64_t per_block = static_cast<std::int64_t>(kStreamedWarps) * b.bags_per_warp;
  const std::int64_t blocks = (bags + per_block - 1) / per_block;
  kernel<<<static_cast<unsigned>(blocks), kStreamedBlock, smem, stream>>>(b);
}

template <DType kW, DType kAcc, DType kOut, DType kIdx, int kR>
void launch_pooled_streamed_t(const PooledArgs& a, cudaStream_t stream) {
  // a warp streams consecutive bags of one range: the plan never merges streamed launches
  if (a.spans != nullptr) throw std::logic_error("streamed gather: a merged launch");
  if (a.bag_end <= a.bag_begin) return;
  using W = storage_t<kW>;
  using Acc = storage_t<kAcc>;
  using Out = storage_t<kOut>;
  using Idx = storage_t<kIdx>;
  dispatch::dispatch_flag(a.rows32, [&](auto rows32) {
    dispatch::dispatch_flag(a.per_sample_weights != nullptr, [&](auto weighted) {
      dispatch::dispatch_flag(a.check_indices, [&](auto check) {
        launch_streamed_kernel<W, Acc, Out, Idx, kR, decltype(rows32)::value,
                               decltype(weighted)::value, decltype(check)::value>(a, stream);
      });
    });
  });
}

}  // namespace tbe::cuda::detail
