// Pooled (SUM / MEAN) gather: a group of G threads (G = 1..32, a power of two, chosen from D)
// owns one bag at a time; lane l of the group owns columns [c0 + l·VEC, c0 + l·VEC + VEC) of each
// column chunk c0 = 0, G·VEC, ... (one chunk when D <= G·VEC; D > 1024 loops over chunks).
// Per chunk the group walks the bag in tiles of G lookups: each lane holds one index (and its
// per-sample weight), then kRowsInFlight row vectors are loaded back to back (each index broadcast
// with a shuffle inside the group) before they are accumulated in index order: several
// independent gathers in flight per lane and a deterministic summation order.
// Pipelined variant (tuning table only): the grid holds only resident blocks and each group loops
// over bags with a stride of all groups; while bag k is gathered, the first index tile of the next
// bag and the offsets of the one after are already in flight. It needs ~40 more registers, so it
// is compiled for 2 resident blocks per SM; the default variant (one group per bag) for 3.
// Shapes: W[Σ E·D] weights; indices[N]; offsets[num_bags + 1]; output per SegmentMeta.
#pragma once

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/common.cuh"

namespace tbe::cuda::detail {

inline constexpr int kPooledBlock = tuning::PooledGather::kBlockThreads;

template <class W, class Acc, class Out, class Idx, int VEC, int kRowsInFlight>
struct PooledGather {
  const PooledArgs& a;
  int G, glane;
  unsigned mask;

  __device__ __forceinline__ std::int64_t segment_of(std::int64_t k) const {
    if (a.bags_per_segment > 0) {
      const std::int64_t s = a.num_bags < (1ll << 32)
                                 ? static_cast<std::int64_t>(static_cast<unsigned>(k) /
                                                             static_cast<unsigned>(a.bags_per_segment))
                                 : k / a.bags_per_segment;
      return s < a.num_segs ? s : a.num_segs - 1;
    }
    return last_le(a.seg_first_bag, a.num_segs, k);
  }

  /// Indices each lane holds per tile: 2 for 16-bit weights (G = 16 for D = 128, so a tile of 32
  /// covers typical bags in one prefetch), 1 for FP32 (G = 32 already covers them; saves registers).
  static constexpr int kSlots = sizeof(W) == 2 ? 2 : 1;
  /// One lane's share of an index tile: positions base + h·G + glane, h < kSlots.
  struct Tile {
    std::int64_t idx[kSlots];
    float w[kSlots];
  };

  __device__ __forceinline__ Tile load_tile(std::int64_t base, std::int64_t end) const {
    const Idx* indices = static_cast<const Idx*>(a.indices);
    const float* psw = a.per_sample_weights;
    Tile t;
#pragma unroll
    for (int h = 0; h < kSlots; ++h) {
      t.idx[h] = 0;
      t.w[h] = 1.0f;
    }
#pragma unroll
    for (int h = 0; h < kSlots; ++h) {
      const std::int64_t p = base + h * G + glane;
      if (p < end) {
        t.idx[h] = static_cast<std::int64_t>(__ldg(indices + p));
        if (psw != nullptr) t.w[h] = __ldg(psw + p);
      }
    }
    return t;
  }

  /// Gathers bag k = [start, end); `first` is this lane's share of the bag's first tile.
  __device__ __forceinline__ void bag(std::int64_t k, std::int64_t start, std::int64_t end,
                                      const Tile& first) const {
    const std::int64_t s = segment_of(k);
    const SegmentMeta seg = a.segs[s];
    const FeatureMeta fm = a.features[seg.feature];
    // fused bounds check: bag k was repaired iff its repaired end differs from the raw one
    // (k + 1 < num_bags; the last offset is counted by the scan), or k == 0 and its start moved.
    // The raw offsets are loaded here and compared after the gather (no stall on them).
    std::int64_t raw_end = end;
    bool count_bag = a.orig_offsets != nullptr && glane == 0;
    if (count_bag) {
      const Idx* raw = static_cast<const Idx*>(a.orig_offsets);
      if (k + 1 < a.num_bags) raw_end = static_cast<std::int64_t>(raw[k + 1]);
      if (k == 0 && static_cast<std::int64_t>(raw[0]) != start) {  // one bag: no deferral
        atomicAdd(&a.counters->bad_bags, 1ull);
        count_bag = false;
      }
    }
    const float* psw = a.per_sample_weights;
    const W* table = static_cast<const W*>(a.weights) + fm.table_offset;
    const int D = fm.dim;
    Out* out = static_cast<Out*>(a.output) + seg.out_base + (k - a.seg_first_bag[s]) * seg.out_stride;
    const std::int64_t L = end - start;
    const int TS = kSlots * G;  // lookups per tile

    for (int c0 = 0; c0 < TBE_MUTANT_SWAP(a, kFwdColumnChunkTailDropped, D > G * VEC ? D / (G * VEC) * (G * VEC) : D, TBE_MUTANT_SWAP(a, kFwdLastColumnChunkDropped, D > G * VEC ? D - G * VEC : D, D)); c0 += G * VEC) {
      const int c = c0 + glane * VEC;
      const bool active = TBE_MUTANT_SWAP(a, kFwdTailOfDUnwritten, c + VEC < D, c < D);  // vector path: D % VEC == 0, so c < D means a full vector
      Acc acc[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = Acc(0);

      for (std::int64_t base = start; base < end; base += TS) {
        const int n = static_cast<int>(min(static_cast<std::int64_t>(TS), end - base));
        Tile t = base == start ? first : load_tile(base, end);
        if (a.check_indices) {
#pragma unroll
          for (int h = 0; h < kSlots; ++h) {
            if (h * G + glane < n && (t.idx[h] < 0 || t.idx[h] >= fm.rows)) {
              t.idx[h] = TBE_MUTANT_SWAP(a, kBoundsRepairToLastRow, fm.rows - 1, 0);  // bad index -> row 0, its weight kept
              if (c0 == 0) atomicAdd(&a.counters->bad_indices, 1ull);
            }
          }
        }
        for (int j = 0; j < n; j += kRowsInFlight) {
          RawRow<W, VEC> rows[kRowsInFlight];
          float ws[kRowsInFlight];
#pragma unroll
          for (int u = 0; u < kRowsInFlight; ++u) {
            const int jj = j + u < n ? j + u : 0;
            const bool hi = kSlots > 1 && jj >= G;  // group-uniform
            const std::int64_t r =
                __shfl_sync(mask, hi ? t.idx[kSlots - 1] : t.idx[0], jj & (G - 1), G);
            ws[u] = psw != nullptr
                        ? __shfl_sync(mask, hi ? t.w[kSlots - 1] : t.w[0], jj & (G - 1), G)
                        : 1.0f;
            if (j + u < n && active) rows[u] = load_raw<W, VEC>(table + TBE_MUTANT_SWAP(a, kFwdRowOffset32, static_cast<std::int32_t>(static_cast<std::uint32_t>(r) * static_cast<std::uint32_t>(D)), r * D) + c);
          }
#pragma unroll
          for (int u = 0; u < kRowsInFlight; ++u) {
            if (j + u < n && active) {
              float x[VEC];
              raw_to_float<W, VEC>(rows[u], x);
              if (TBE_MUTANT_SWAP(a, kFwdPswIgnoredScalar, psw != nullptr && VEC != 1, psw != nullptr)) {
#pragma unroll
                for (int v = 0; v < VEC; ++v) acc[v] = fma(Acc(ws[u]), widen<Acc>(x[v]), acc[v]);
              } else {
#pragma unroll
                for (int v = 0; v < VEC; ++v) TBE_MUTANT_SWAP(a, kFwdFp32AccUnderFp64, acc[v] = Acc(static_cast<float>(acc[v]) + x[v]), acc[v] += widen<Acc>(x[v]));
              }
            }
          }
        }
      }
      if (active) {
        Out o[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          const Acc x = TBE_MUTANT_SWAP(a, kFwdMeanMissing, acc[v], TBE_MUTANT_SWAP(a, kFwdMeanDoubled, (a.mean && L > 0) ? acc[v] / Acc(L) / Acc(L) : acc[v], (a.mean && L > 0) ? acc[v] / Acc(L) : acc[v]));
          o[v] = round_out<Out>(x);
        }
        store_out<Out, VEC>(out + c, o);
      }
    }
    if (count_bag && raw_end != end) atomicAdd(&a.counters->bad_bags, 1ull);
  }
};

template <class W, class Acc, class Out, class Idx, int VEC, bool kPipelined, int kRows>
__global__ void __launch_bounds__(kPooledBlock, kPipelined
                                                     ? tuning::PooledGather::kMinBlocksPerSmPipelined
                                                     : tuning::PooledGather::kMinBlocksPerSm)
pooled_gather_group_per_bag(const PooledArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const int G = a.group_size;
  const int lane = threadIdx.x & 31;
  const int glane = lane & (G - 1);
  const unsigned mask = G == 32 ? 0xffffffffu : (((1u << G) - 1u) << (lane & ~(G - 1)));
  using Gather = PooledGather<W, Acc, Out, Idx, VEC, kRows>;
  const Gather gather{a, G, glane, mask};
  const std::int64_t groups_per_block = kPooledBlock / G;
  std::int64_t k = a.bag_begin + static_cast<std::int64_t>(blockIdx.x) * groups_per_block +
                   threadIdx.x / G;
  if (k >= TBE_MUTANT_SWAP(a, kFwdLastBagSkipped, a.bag_end - 1, a.bag_end)) return;  // the whole group leaves together (one k per group)
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  std::int64_t cur_s = offsets[k], cur_e = offsets[k + 1];
  typename Gather::Tile cur = gather.load_tile(cur_s, cur_e);
  if constexpr (!kPipelined) {
    gather.bag(k, cur_s, cur_e, cur);
  } else {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * groups_per_block;
    std::int64_t kn = k + stride;
    std::int64_t nxt_s = 0, nxt_e = 0;
    if (kn < a.bag_end) {
      nxt_s = offsets[kn];
      nxt_e = offsets[kn + 1];
    }
    while (true) {
      // in flight while bag k is gathered: the next bag's first index tile, the offsets after it
      const typename Gather::Tile nxt =
          gather.load_tile(nxt_s, kn < a.bag_end ? nxt_e : nxt_s);  // empty range past the end
      const std::int64_t knn = kn + stride;
      std::int64_t nn_s = 0, nn_e = 0;
      if (knn < a.bag_end) {
        nn_s = offsets[knn];
        nn_e = offsets[knn + 1];
      }
      gather.bag(k, cur_s, cur_e, cur);
      if (kn >= a.bag_end) break;
      k = kn; cur_s = nxt_s; cur_e = nxt_e; cur = nxt;
      kn = knn; nxt_s = nn_s; nxt_e = nn_e;
    }
  }
}

template <DType kW, DType kAcc, DType kOut, DType kIdx, bool kVec, bool kPipelined, int kRows>
void launch_pooled_t(const PooledArgs& a, cudaStream_t stream) {
  using W = storage_t<kW>;
  constexpr int VEC = kVec ? tuning::PooledGather::kVectorBytes / static_cast<int>(sizeof(W)) : 1;
  auto* kernel = pooled_gather_group_per_bag<W, storage_t<kAcc>, storage_t<kOut>, storage_t<kIdx>,
                                             VEC, kPipelined, kRows>;
  const std::int64_t bags = a.bag_end - a.bag_begin;
  if (bags <= 0) return;
  const std::int64_t per_block = kPooledBlock / a.group_size;
  std::int64_t blocks = (bags + per_block - 1) / per_block;
  static int carveout_set = -1;  // per instance: the L1 preference last applied
  if (carveout_set != static_cast<int>(a.prefer_l1)) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                         a.prefer_l1 ? cudaSharedmemCarveoutMaxL1 : cudaSharedmemCarveoutDefault);
    carveout_set = static_cast<int>(a.prefer_l1);
  }
  if constexpr (kPipelined) {
    static const int resident_blocks = [&] {  // per instance: resident blocks on the device
      int dev = 0, sms = 0, per_sm = 0;
      cudaGetDevice(&dev);
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPooledBlock, 0);
      cudaGetLastError();
      return std::max(1, sms * per_sm);
    }();
    blocks = std::min<std::int64_t>(blocks, resident_blocks);
  }
  kernel<<<static_cast<unsigned>(blocks), kPooledBlock, 0, stream>>>(a);
}

// Instantiations, one macro per weights type (kernels/pooled_gather_<w>.cu); every instance
// must be a row of dispatch/dispatch.h's tables (static_assert), and the dispatch references every
// row (so a row without its instance is a link error).
#define TBE_INSTANTIATE_POOLED_FOR(W)                                                        \
  TBE_INSTANTIATE_POOLED_ACC(W, DType::F32)                                                  \
  TBE_INSTANTIATE_POOLED_ACC(W, DType::F64)
#define TBE_INSTANTIATE_POOLED_ACC(W, ACC)                                                   \
  TBE_INSTANTIATE_POOLED_OUT(W, ACC, DType::F32)                                             \
  TBE_INSTANTIATE_POOLED_OUT(W, ACC, DType::F16)                                             \
  TBE_INSTANTIATE_POOLED_OUT(W, ACC, DType::BF16)
#define TBE_POOLED_INSTANCE(W, ACC, OUT, IDX, VEC, PIPE, ROWS)                               \
  template void launch_pooled_t<W, ACC, OUT, IDX, VEC, PIPE, ROWS>(const PooledArgs&, cudaStream_t);
#define TBE_INSTANTIATE_POOLED_OUT(W, ACC, OUT)                                              \
  static_assert(dispatch::contains(dispatch::kCompiledForward, dispatch::TypeCombo{W, ACC, OUT})); \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I32, true, false, tuning::PooledGather::kRowsInFlight)  \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I32, false, false, tuning::PooledGather::kRowsInFlight) \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I64, true, false, tuning::PooledGather::kRowsInFlight)  \
  TBE_POOLED_INSTANCE(W, ACC, OUT, DType::I64, false, false, tuning::PooledGather::kRowsInFlight)
/// The ForwardTuning variants (kCompiledPooledTuning: FP32 output, vector path): the pipelined
/// persistent grid and 4 rows in flight.
#define TBE_INSTANTIATE_POOLED_TUNING(W, ACC)                                                \
  static_assert(dispatch::contains(dispatch::kCompiledPooledTuning,                          \
                                   dispatch::TypeCombo{W, ACC, DType::F32}));                \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I64, true, true,                            \
                      tuning::PooledGather::kRowsInFlight)                                   \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I32, true, true,                            \
                      tuning::PooledGather::kRowsInFlight)                                   \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I64, true, false,                           \
                      tuning::PooledGather::kRowsInFlightFewRegisters)                       \
  TBE_POOLED_INSTANCE(W, ACC, DType::F32, DType::I32, true, false,                           \
                      tuning::PooledGather::kRowsInFlightFewRegisters)

}  // namespace tbe::cuda::detail
