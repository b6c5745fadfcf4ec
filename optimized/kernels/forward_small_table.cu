// Small-table histogram forward (docs/small-table.md). One block per (128-bag group, small-table
// feature): the block loads the feature's table [E × D] (FP16) transposed into shared memory
// (zero-padded to E_pad = 16·ceil(E/16) rows and D_pad = 8·ceil(D/8) columns), then each warp
// owns 16-bag m-tiles:
//   1. counts[16 bags][E_pad] in shared memory (int32, atomics), over slices of at most 2048
//      positions of each bag, so every count is an exact FP16 integer (<= 2^11); bad indices are
//      repaired as the generic path does (row 0, counted once);
//   2. per slice, per k-tile (16 rows) and n-tile (8 columns): one mma.m16n8k16 of the counts
//      (A, FP16) by the table tile (B, FP16) with a zero accumulator, added into FP32 registers
//      with IEEE rounding; MEAN divides once at the end (fl(S / L));
//   3. bags with L < 64 (tuning::SmallTable::kTensorCoreMinLookups), and every bag when the table
//      holds an Inf/NaN (0·Inf would poison bags that never look the row up), are summed directly
//      from the shared-memory tile in index order in FP32 instead;
//   4. optionally the counts are saved for the backward (transposed, [64][B_pad] FP16 per
//      feature; totals over slices; a total > 2048 marks the feature's histogram invalid).
// Shapes: W[Σ E·D]; indices[N]; offsets[T·B + 1]; output [B, Σ D] (non-VBE).
#include "kernels/small_table.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

constexpr int kTiles = tuning::SmallTable::kBagsPerBlock / 16;
constexpr int kMinTc = tuning::SmallTable::kTensorCoreMinLookups;
constexpr int kLoadUnroll = 8;   // independent table loads in flight per thread
constexpr int kStreamMaxSpan = tuning::SmallTable::kStreamMaxPositions;
constexpr int kIndexUnroll = 4;  // independent index loads in flight per lane (registers: the
                                 // 16 n-tile accumulators stay live across the count loop)

template <class Out, class Idx>
__global__ void __launch_bounds__(kStBlock) small_table_forward_histogram(const SmallTableForwardArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  __shared__ __align__(16) __half table_t[kStMaxDim * kStTableStride];          // [D_pad][stride]
  __shared__ __align__(16) int counts_s[kStWarps][16 * kStCountStride];       // [16][stride]
  const SmallFeatureMeta ft = a.features[blockIdx.y];
  const int E = ft.rows, D = ft.dim;
  const int KT = (E + 15) / 16, NT = (D + 7) / 8;
  const int E_pad = 16 * KT, D_pad = 8 * NT;

  // --- table tile, transposed: table_t[d][e] = W[e][d] (zeros outside E × D) ---
  const __half* W = static_cast<const __half*>(a.weights) + ft.table_offset;
  bool nonfinite = false;
  // kLoadUnroll loads issued before any is stored: the tile costs a few memory latencies
  for (int i0 = 0; a.compute_output && i0 < E_pad * D_pad; i0 += kStBlock * kLoadUnroll) {
    __half v[kLoadUnroll];
#pragma unroll
    for (int u = 0; u < kLoadUnroll; ++u) {
      const int i = i0 + threadIdx.x + u * kStBlock;
      const int e = i / D_pad, d = i - e * D_pad;  // consecutive threads read consecutive columns
      v[u] = (i < E_pad * D_pad && e < E && d < D) ? W[static_cast<std::int64_t>(e) * D + d]
                                                   : __float2half_rn(0.0f);
    }
#pragma unroll
    for (int u = 0; u < kLoadUnroll; ++u) {
      const int i = i0 + threadIdx.x + u * kStBlock;
      if (i < E_pad * D_pad) {
        const int e = i / D_pad, d = i - e * D_pad;
        nonfinite = nonfinite || !isfinite(__half2float(v[u]));
        table_t[d * kStTableStride + e] = v[u];
      }
    }
  }
  const bool direct_all = __syncthreads_or(nonfinite) != 0;

  const int warp = threadIdx.x / tuning::kWarpThreads, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  int* cnt = counts_s[warp];
  const Idx* indices = static_cast<const Idx*>(a.indices);
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  const bool save = a.save.counts != nullptr;
  const std::int64_t B = a.batch_size;

  for (int tile = warp; tile < kTiles; tile += kStWarps) {
    const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.x) * tuning::SmallTable::kBagsPerBlock +
                            tile * 16;
    if (b0 >= B) break;  // warp-uniform
    // lanes 0..15 own bag b0 + lane: its [start, end), and whether it goes through the mma
    std::int64_t start = 0, end = 0;
    const bool valid = lane < 16 && b0 + lane < B;
    if (valid) {
      const std::int64_t k = ft.first_bag + b0 + lane;
      start = static_cast<std::int64_t>(offsets[k]);
      end = static_cast<std::int64_t>(offsets[k + 1]);
      if (a.orig_offsets != nullptr &&
          bag_repaired(static_cast<const Idx*>(a.orig_offsets), offsets, k, a.num_bags))
        atomicAdd(&a.counters->bad_bags, 1ull);
    }
    const std::int64_t L = end - start;
    const bool tc = valid && a.compute_output && !direct_all && L >= kMinTc;
    const bool counted = tc || (valid && save);
    const unsigned tc_mask = __ballot_sync(0xffffffffu, tc);
    const unsigned valid_mask = __ballot_sync(0xffffffffu, valid);
    const unsigned counted_mask = __ballot_sync(0xffffffffu, counted);
    // The valid bags are lanes [0, nvalid); they are contiguous in indices when each one ends
    // where the next starts (repaired offsets always are; raw ones under NONE are trusted only
    // after this check). rel = a bag's start relative to the tile's first position.
    const int nvalid = __popc(valid_mask);
    const std::int64_t next_start = __shfl_down_sync(0xffffffffu, start, 1);
    const bool contiguous = __all_sync(0xffffffffu, lane + 1 >= nvalid || end == next_start);
    const std::int64_t tile_first = __shfl_sync(0xffffffffu, start, 0);
    if (a.compute_output && lane == 0) {
      atomicAdd(&a.counters->small_table_mma_bags, static_cast<unsigned long long>(__popc(tc_mask)));
      atomicAdd(&a.counters->small_table_direct_bags,
                static_cast<unsigned long long>(__popc(valid_mask & ~tc_mask)));
    }
    const unsigned my_slices =
        counted ? static_cast<unsigned>((L + kStSlice - 1) / kStSlice) : 0u;
    // A tile of empty bags has no slice, but saved counts must still be written (zeros): the
    // backward multiplies every count of the tile (docs/small-table.md "Saved counts").
    const unsigned slices = max(save ? 1u : 0u, __reduce_max_sync(0xffffffffu, my_slices));

    float acc[kStMaxNTiles][4];
#pragma unroll
    for (int nt = 0; nt < kStMaxNTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

    for (unsigned sl = 0; sl < slices; ++sl) {
      // 1. counts of positions [start + sl·2048, min(end, start + (sl + 1)·2048)) of each bag
      for (int i = lane; i < 16 * kStCountStride; i += 32) cnt[i] = 0;
      __syncwarp();
      const bool stream =
          slices == 1 && contiguous && nvalid > 0 &&
          __shfl_sync(0xffffffffu, end, nvalid - 1) - tile_first < kStreamMaxSpan;
      if (stream) {
        // One slice of contiguous bags: stream the tile's positions [tile_first, end of the last
        // valid bag) with kIndexUnroll loads in flight per lane; a position's bag is the last m
        // with start_m <= p (binary search over the lanes' starts; empty bags hold no position),
        // and positions of bags that are not counted are skipped.
        const int span = static_cast<int>(__shfl_sync(0xffffffffu, end, nvalid - 1) - tile_first);
        const int rel = static_cast<int>(start - tile_first);  // lanes < nvalid
        for (int q0 = 0; q0 < span; q0 += 32 * kIndexUnroll) {  // warp-uniform trip count
          std::int64_t r[kIndexUnroll];
#pragma unroll
          for (int u = 0; u < kIndexUnroll; ++u) {
            const int q = q0 + lane + 32 * u;
            r[u] = q < span ? static_cast<std::int64_t>(indices[tile_first + q]) : 0;
          }
#pragma unroll
          for (int u = 0; u < kIndexUnroll; ++u) {
            const int q = q0 + lane + 32 * u;
            int m = 0;
#pragma unroll
            for (int step = 8; step > 0; step >>= 1) {
              const int c = m + step;
              const int sc = __shfl_sync(0xffffffffu, rel, c & 15);
              if (c < nvalid && sc <= q) m = c;
            }
            if (q < span && ((counted_mask >> m) & 1u) != 0u) {
              std::int64_t rr = r[u];
              if (a.check_indices && (rr < 0 || rr >= E)) {
                rr = 0;  // bad index -> row 0, counted (each position once)
                atomicAdd(&a.counters->bad_indices, 1ull);
              }
              atomicAdd(&cnt[m * kStCountStride + rr], 1);
            }
          }
        }
      } else {
        for (int m = 0; m < 16; ++m) {
          const std::int64_t s = __shfl_sync(0xffffffffu, start, m);
          const std::int64_t e = __shfl_sync(0xffffffffu, end, m);
          const bool cm = __shfl_sync(0xffffffffu, counted, m);
          if (!cm) continue;  // warp-uniform
          const std::int64_t ps = s + static_cast<std::int64_t>(sl) * kStSlice;
          const std::int64_t pe = min(e, ps + kStSlice);
          for (std::int64_t p0 = ps; p0 < pe; p0 += 32 * kIndexUnroll) {
            std::int64_t r[kIndexUnroll];  // kIndexUnroll loads issued before any atomic
#pragma unroll
            for (int u = 0; u < kIndexUnroll; ++u) {
              const std::int64_t p = p0 + lane + 32 * u;
              r[u] = p < pe ? static_cast<std::int64_t>(indices[p]) : 0;
            }
#pragma unroll
            for (int u = 0; u < kIndexUnroll; ++u) {
              if (p0 + lane + 32 * u >= pe) continue;
              std::int64_t rr = r[u];
              if (a.check_indices && (rr < 0 || rr >= E)) {
                rr = 0;  // bad index -> row 0, counted (each position once: slices are disjoint)
                atomicAdd(&a.counters->bad_indices, 1ull);
              }
              atomicAdd(&cnt[m * kStCountStride + rr], 1);
            }
          }
        }
      }
      __syncwarp();
      // 4. saved counts: totals over slices, [row][bag] FP16; > 2048 marks the histogram invalid
      if (save) {
        std::uint16_t* dst = a.save.counts + static_cast<std::int64_t>(blockIdx.y) * kStMaxRows *
                                                 a.save.padded_bags;
        for (int i = lane; i < E_pad * 16; i += 32) {
          const int e = i >> 4, m = i & 15;
          std::uint16_t* q = dst + static_cast<std::int64_t>(e) * a.save.padded_bags + b0 + m;
          int total = cnt[m * kStCountStride + e];
          if (sl > 0) total += __half2int_rn(__ushort_as_half(*q));
          if (total > kStSlice) a.save.invalid[blockIdx.y] = 1u;
          *q = __half_as_ushort(__int2half_rn(min(total, 4 * kStSlice)));
        }
      }
      // 2. counts × table on tensor cores
      if (tc_mask != 0u) {
#pragma unroll
        for (int kt = 0; kt < kStMaxKTiles; ++kt) {
          if (kt < KT) {
            const int* r0 = cnt + g * kStCountStride + kt * 16 + 2 * t;
            const int* r1 = r0 + 8 * kStCountStride;
            const unsigned af[4] = {pack_counts(*reinterpret_cast<const int2*>(r0)),
                                    pack_counts(*reinterpret_cast<const int2*>(r1)),
                                    pack_counts(*reinterpret_cast<const int2*>(r0 + 8)),
                                    pack_counts(*reinterpret_cast<const int2*>(r1 + 8))};
#pragma unroll
            for (int nt = 0; nt < kStMaxNTiles; ++nt) {
              if (nt < NT) {
                const __half* bp = table_t + (nt * 8 + g) * kStTableStride + kt * 16 + 2 * t;
                const unsigned b0f = *reinterpret_cast<const unsigned*>(bp);
                const unsigned b1f = *reinterpret_cast<const unsigned*>(bp + 8);
                float d[4];
                mma_f16_zero_c(d, af, b0f, b1f);
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[nt][i] = __fadd_rn(acc[nt][i], d[i]);
              }
            }
          }
        }
      }
      __syncwarp();  // the next slice overwrites the counts
    }
    if (!a.compute_output) continue;

    Out* out = static_cast<Out*>(a.output) + ft.out_col;
    // tensor-core bags: rows g and g + 8 of the C fragments
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = g + 8 * h;
      const std::int64_t Lm = __shfl_sync(0xffffffffu, L, m);
      if (((tc_mask >> m) & 1u) == 0u) continue;
      Out* row = out + (b0 + m) * a.out_stride;
#pragma unroll
      for (int nt = 0; nt < kStMaxNTiles; ++nt) {
        const int c = nt * 8 + 2 * t;
        if (nt < NT && c < D) {
          float v0 = acc[nt][2 * h], v1 = acc[nt][2 * h + 1];
          if (TBE_MUTANT_SWAP(a, kSmallTableMeanMissing, false, a.mean)) {
            v0 = __fdiv_rn(v0, static_cast<float>(Lm));
            v1 = __fdiv_rn(v1, static_cast<float>(Lm));
          }
          row[c] = round_out<Out>(v0);
          if (c + 1 < D) row[c + 1] = round_out<Out>(v1);
        }
      }
    }
    // 3. direct bags: index order, FP32, from the shared-memory tile; lane owns columns lane + 32q
    for (int m = 0; m < 16; ++m) {
      if (((valid_mask & ~tc_mask) >> m & 1u) == 0u) continue;  // warp-uniform
      const std::int64_t s = __shfl_sync(0xffffffffu, start, m);
      const std::int64_t e = __shfl_sync(0xffffffffu, end, m);
      float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (std::int64_t base = s; base < e; base += 32) {
        const int n = static_cast<int>(min(static_cast<std::int64_t>(32), e - base));
        std::int64_t mine = 0;
        if (lane < n) {
          mine = static_cast<std::int64_t>(indices[base + lane]);
          if (a.check_indices && (mine < 0 || mine >= E)) {
            mine = 0;
            if (!save) atomicAdd(&a.counters->bad_indices, 1ull);  // saved: counted in step 1
          }
        }
        for (int j = 0; j < n; ++j) {
          const int r = static_cast<int>(__shfl_sync(0xffffffffu, mine, j));
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int c = lane + 32 * q;
            if (c < D) sum[q] = __fadd_rn(sum[q], __half2float(table_t[c * kStTableStride + r]));
          }
        }
      }
      const std::int64_t Lm = e - s;
      Out* row = out + (b0 + m) * a.out_stride;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int c = lane + 32 * q;
        if (c < D) {
          const float v = (a.mean && Lm > 0) ? __fdiv_rn(sum[q], static_cast<float>(Lm)) : sum[q];
          row[c] = round_out<Out>(v);
        }
      }
    }
  }
}

}  // namespace

template <DType kOut, DType kIdx>
void launch_small_table_forward_t(const SmallTableForwardArgs& a, cudaStream_t stream) {
  if (a.num_small == 0 || a.batch_size == 0) return;
  const std::int64_t blocks =
      (a.batch_size + tuning::SmallTable::kBagsPerBlock - 1) / tuning::SmallTable::kBagsPerBlock;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.num_small));
  small_table_forward_histogram<storage_t<kOut>, storage_t<kIdx>><<<grid, kStBlock, 0, stream>>>(a);
}

#define TBE_SMALL_TABLE_FORWARD(OUT)                                                           \
  static_assert(dispatch::contains(dispatch::kCompiledSmallTable,                              \
                                   dispatch::TypeCombo{DType::F16, DType::F32, OUT}));         \
  template void launch_small_table_forward_t<OUT, DType::I32>(const SmallTableForwardArgs&,   \
                                                              cudaStream_t);                   \
  template void launch_small_table_forward_t<OUT, DType::I64>(const SmallTableForwardArgs&,   \
                                                              cudaStream_t);
TBE_SMALL_TABLE_FORWARD(DType::F32)
TBE_SMALL_TABLE_FORWARD(DType::F16)
TBE_SMALL_TABLE_FORWARD(DType::BF16)

}  // namespace tbe::cuda::detail
