// Small-table histogram backward (docs/small-table.md "Backward", docs/oracle.md "Small-table
// histogram path"): per small-table feature j,
//   grad_table[E × D] = counts^T [E × B] · g' [B × D],   g'[b] = clip(grad_output[b, cols(f)]) (/ L_b),
// split over blocks of whole 16-bag k-tiles (split-K, about kBackwardTargetBlocks blocks per
// call), then one optimizer update per row with SL >= min_run
// (shorter rows stay with the generic run kernels: histogram_owns in kernels/backward_runs.cuh).
// Per k-step of 16 bags thread d of the block holds g' of column d (the tile's 16 bags) in
// registers (no index arithmetic per element: ncu counted ~10K instructions per warp, mostly
// integer divisions of the old element-per-thread staging) and, when the tile's dynamic range
// allows (finite, max|g'| >= 2^-60, every non-zero |g'| >= 2^-15·max|g'|), splits x = g'·s with a
// power of two s (max|x| in [2^14, 2^15)) into hi = fp16(x), lo = fp16(x − hi): then
// |hi + lo − x| <= 2^-22·|x| and two mma.m16n8k16 (counts × hi, counts × lo, zero accumulator
// input) give the tile's sums; (d_hi + d_lo)·(1/s) is added into FP32. Other tiles (an Inf/NaN,
// a wider range) are summed exactly in FP64 from the counts (zero counts skipped: 0·Inf never
// enters), rounded once to FP32 and added. The apply step reduces the block partials in block
// order (deterministic) and runs the generic optimizer code (apply_row: RNE or SR write-back).
#include "kernels/backward_optimizer.cuh"
#include "kernels/small_table.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

constexpr int kGradStride = 16 + 8;  // halves per column of the hi / lo tiles ([n][16 bags + 8])
constexpr int kApplyWarps = 8;                         // warps per row of the apply kernel
// index loads in flight per lane when a row counts its own lookups (4 spills 24 bytes in the
// int64-index instances)
constexpr int kScanUnroll = 2;
constexpr int kWarpNTiles = tuning::kWarpThreads / 8;  // warp-column split-K: n-tiles per warp
constexpr int kCountWords = kStMaxRows * 16 / 2 / kStBlock;  // count pairs per thread and k-tile
constexpr int kCountStride = 16 + 8;  // halves per row of the staged counts tile ([e][16 bags + 8])
static_assert(kStBlock == kStMaxDim, "one thread per column of a k-tile: thread d stages column d");
static_assert(kGradStride * 2 % 16 == 0, "a column's 16 halves are two 16-byte stores");
static_assert(kStMaxRows * 8 % kStBlock == 0, "whole count tiles per block load");

// f(mt, q, i, e, d) for each element acc[mt][q][i] this thread owns in the m16n8 accumulator
// fragments of the MT × NT tiles: row e (table row) and column d of the feature's block.
template <class F>
__device__ __forceinline__ void for_each_owned(int warp, int g, int t, int MT, int NT, F&& f) {
#pragma unroll
  for (int mt = 0; mt < kStMaxKTiles; ++mt)
#pragma unroll
    for (int q = 0; q < kStMaxNTiles / kStWarps; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int nt = warp + kStWarps * q;
        if (mt < MT && nt < NT) f(mt, q, i, mt * 16 + g + 8 * (i >> 1), nt * 8 + 2 * t + (i & 1));
      }
}

// The power of two s for values whose largest magnitude is mx > 0 (mx = m·2^e, m in [0.5, 1)):
// x = g'·s has max|x| in [2^14, 2^15); inv_s = 1/s (both exact).
__device__ __forceinline__ float hi_lo_scale(float mx, float& inv_s) {
  int e = 0;
  frexpf(mx, &e);
  inv_s = ldexpf(1.0f, e - 15);
  return ldexpf(1.0f, 15 - e);
}

// One column's 16 bags split as hi = fp16(x), lo = fp16(x − hi), x = v·sc (sc a power of two:
// exact; x − hi is exact), packed in pairs of bags: the two 16-byte halves of a B-operand column.
__device__ __forceinline__ void split_hi_lo(const SmallTableBackwardArgs& a, const float (&v)[16],
                                            float sc, unsigned (&hw)[8], unsigned (&lw)[8]) {
#pragma unroll
  for (int b = 0; b < 16; b += 2) {
    const float x0 = __fmul_rn(v[b], sc), x1 = __fmul_rn(v[b + 1], sc);
    const __half h0 = __float2half_rn(x0), h1 = __float2half_rn(x1);
    const __half l0 = TBE_MUTANT_SWAP(a, kSmallTableLoDropped, __float2half_rn(0.0f), __float2half_rn(__fsub_rn(x0, __half2float(h0))));
    const __half l1 = TBE_MUTANT_SWAP(a, kSmallTableLoDropped, __float2half_rn(0.0f), __float2half_rn(__fsub_rn(x1, __half2float(h1))));
    hw[b / 2] = pack_half2(h0, h1);
    lw[b / 2] = pack_half2(l0, l1);
  }
}

// The raw grad_output values of column d = threadIdx.x of the k-tile at bag k0 (its 16 bags; 0
// outside [B] × [D]). All loads are issued before any is used, so the tile costs one memory
// latency, not 16; a warp's loads of one bag are 32 consecutive columns.
template <class Grad>
__device__ __forceinline__ void load_grad_column(const Grad* grad, std::int64_t out_stride,
                                                 std::int64_t B, int D, std::int64_t k0,
                                                 float (&v)[16]) {
  const int d = threadIdx.x;
#pragma unroll
  for (int b = 0; b < 16; ++b) {
    const std::int64_t bag = k0 + b;
    v[b] = (d < D && bag < B) ? to_float(grad[bag * out_stride + d]) : 0.0f;
  }
}

// The k-tile's counts this thread stages: pair w = threadIdx.x + r·kStBlock of the tile's
// [64 rows][8 pairs of bags] (row w / 8; 0 for rows >= E_pad), one 4-byte load each.
__device__ __forceinline__ void load_count_tile(const std::uint16_t* counts, std::int64_t Bp,
                                                int E_pad, std::int64_t k0,
                                                unsigned (&c)[kCountWords]) {
#pragma unroll
  for (int r = 0; r < kCountWords; ++r) {
    const int w = threadIdx.x + r * kStBlock, e = w / 8;
    c[r] = e < E_pad ? *reinterpret_cast<const unsigned*>(counts + static_cast<std::int64_t>(e) * Bp + k0 + 2 * (w % 8))
                     : 0u;
  }
}

// MEAN's divisor L of bag k (a global bag index: offsets[k + 1] − offsets[k] lookups), as the
// float of the term fl(g / L).
template <class Idx>
__device__ __forceinline__ float bag_length(const Idx* offsets, std::int64_t k) {
  return static_cast<float>(static_cast<std::int64_t>(offsets[k + 1]) - static_cast<std::int64_t>(offsets[k]));
}

// MEAN: the lookups of bag k0 + threadIdx.x (threads < 16; 0 past B), as the divisor fl(g / L).
template <class Idx>
__device__ __forceinline__ float load_bag_length(const Idx* offsets, std::int64_t first_bag,
                                                 std::int64_t B, std::int64_t k0) {
  const std::int64_t bag = k0 + threadIdx.x;
  if (threadIdx.x >= 16 || bag >= B) return 0.0f;
  return bag_length(offsets, first_bag + bag);
}

template <class Grad, class Idx>
__global__ void __launch_bounds__(kStBlock) small_table_grad_split_k(const SmallTableBackwardArgs a) {
  if (fatal_aborted(a.run.abort_key)) return;
  const int j = blockIdx.y;
  if (a.counts.invalid[j] != 0u) return;  // not representable: the generic path (sorted) or the
                                          // apply kernel's exact sums (no sort) own the table
  const SmallFeatureMeta ft = a.features[j];
  const int E = ft.rows, D = ft.dim;
  const int MT = (E + 15) / 16, NT = (D + 7) / 8, E_pad = 16 * MT, D_pad = 8 * NT;
  __shared__ float g_s[16][kStMaxDim];                                     // g' of 16 bags
  __shared__ __align__(16) __half hi_t[kStMaxDim * kGradStride];           // [n][bag]
  __shared__ __align__(16) __half lo_t[kStMaxDim * kGradStride];
  __shared__ float s_len[16];                                              // MEAN: L of each bag
  __shared__ __align__(16) std::uint16_t s_counts[kStMaxRows * kCountStride];  // [e][bag]
  __shared__ unsigned s_max, s_min;
  __shared__ int s_nonfinite;

  const int warp = threadIdx.x / tuning::kWarpThreads, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const std::int64_t B = a.batch_size, Bp = a.counts.padded_bags;
  const std::uint16_t* counts = a.counts.counts + static_cast<std::int64_t>(j) * kStMaxRows * Bp;
  const Grad* grad = static_cast<const Grad*>(a.grad_output) + ft.out_col;
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  const bool clip = a.run.max_gradient > 0.0f;
  const std::int64_t k_begin = static_cast<std::int64_t>(blockIdx.x) * a.block_tiles * 16;
  const std::int64_t k_end = min(Bp, k_begin + static_cast<std::int64_t>(a.block_tiles) * 16);

  // this thread's C-fragment elements: m-tile mt, n-tile warp + 4q, element i
  float acc[kStMaxKTiles][kStMaxNTiles / kStWarps][4];
#pragma unroll
  for (int mt = 0; mt < kStMaxKTiles; ++mt)
#pragma unroll
    for (int q = 0; q < kStMaxNTiles / kStWarps; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][q][i] = 0.0f;

  // The next k-tile's grad values (this thread's column), counts and (MEAN) bag lengths, in
  // flight while this one computes: a k-step waits on no global load of its own.
  float raw[16];
  unsigned cnt[kCountWords];
  float len = 0.0f;
  unsigned sl[kCountWords] = {};  // lookups of this thread's count rows in this block's bags
  const int d = threadIdx.x;      // this thread's column of g' (D_pad <= kStBlock)
  if (k_begin < k_end) {
    load_grad_column(grad, a.out_stride, B, D, k_begin, raw);
    load_count_tile(counts, Bp, E_pad, k_begin, cnt);
    if (a.mean) len = load_bag_length(offsets, ft.first_bag, B, k_begin);
  }
  for (std::int64_t k0 = k_begin; k0 < k_end; k0 += 16) {
    if (threadIdx.x == 0) {
      s_max = 0u;
      s_min = 0x7f800000u;  // +inf
      s_nonfinite = 0;
    }
    if (a.mean && threadIdx.x < 16) s_len[threadIdx.x] = len;
#pragma unroll
    for (int r = 0; r < kCountWords; ++r) {
      const int w = threadIdx.x + r * kStBlock;
      *reinterpret_cast<unsigned*>(s_counts + (w / 8) * kCountStride + 2 * (w % 8)) = cnt[r];
      sl[r] += static_cast<unsigned>(__half2int_rn(__ushort_as_half(static_cast<std::uint16_t>(cnt[r] & 0xffffu))) +
                                     __half2int_rn(__ushort_as_half(static_cast<std::uint16_t>(cnt[r] >> 16))));
    }
    __syncthreads();
    // g' of this thread's column, in registers (0 outside [B] × [D])
    float v[16];
    float lmax = 0.0f, lmin = INFINITY;
    bool nonfinite = false;
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      float x = raw[b];
      if (clip) x = clip_gradient(x, a.run.max_gradient);
      if (a.mean && s_len[b] > 0.0f) x = __fdiv_rn(x, s_len[b]);  // the term form fl(g / L)
      v[b] = x;
      if (!isfinite(x)) {
        nonfinite = true;
      } else if (x != 0.0f) {
        lmax = fmaxf(lmax, fabsf(x));
        lmin = fminf(lmin, fabsf(x));
      }
    }
    if (k0 + 16 < k_end) {
      load_grad_column(grad, a.out_stride, B, D, k0 + 16, raw);
      load_count_tile(counts, Bp, E_pad, k0 + 16, cnt);
      if (a.mean) len = load_bag_length(offsets, ft.first_bag, B, k0 + 16);
    }
    // non-negative floats order as their bit patterns
    lmax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(lmax)));
    lmin = __uint_as_float(__reduce_min_sync(0xffffffffu, __float_as_uint(lmin)));
    nonfinite = __any_sync(0xffffffffu, nonfinite);
    if (lane == 0) {
      atomicMax(&s_max, __float_as_uint(lmax));
      atomicMin(&s_min, __float_as_uint(lmin));
      if (nonfinite) s_nonfinite = 1;
    }
    __syncthreads();
    const float mx = __uint_as_float(s_max), mn = __uint_as_float(s_min);
    const bool any_nonfinite = s_nonfinite != 0;
    if (mx > 0.0f || any_nonfinite) {
      const bool tensor = !any_nonfinite && mx >= 0x1p-60f && mn >= mx * 0x1p-15f;
      if (tensor) {
        float inv_s = 0.0f;
        const float sc = hi_lo_scale(mx, inv_s);
        if (d < D_pad) {  // column d's 16 bags: two 16-byte stores per tile
          unsigned hw[8], lw[8];
          split_hi_lo(a, v, sc, hw, lw);
          uint4* hd = reinterpret_cast<uint4*>(hi_t + d * kGradStride);
          uint4* ld = reinterpret_cast<uint4*>(lo_t + d * kGradStride);
          hd[0] = make_uint4(hw[0], hw[1], hw[2], hw[3]);
          hd[1] = make_uint4(hw[4], hw[5], hw[6], hw[7]);
          ld[0] = make_uint4(lw[0], lw[1], lw[2], lw[3]);
          ld[1] = make_uint4(lw[4], lw[5], lw[6], lw[7]);
        }
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < kStMaxKTiles; ++mt) {
          if (mt < MT) {
            // A = counts^T tile: rows e = 16·mt + (g, g + 8), k = bags 2t, 2t + 1 (+8) of the
            // staged tile (row stride 12 words: the 32 lanes' reads hit 32 distinct banks)
            const std::uint16_t* r0 = s_counts + (mt * 16 + g) * kCountStride + 2 * t;
            const std::uint16_t* r1 = r0 + 8 * kCountStride;
            const unsigned af[4] = {*reinterpret_cast<const unsigned*>(r0),
                                    *reinterpret_cast<const unsigned*>(r1),
                                    *reinterpret_cast<const unsigned*>(r0 + 8),
                                    *reinterpret_cast<const unsigned*>(r1 + 8)};
#pragma unroll
            for (int q = 0; q < kStMaxNTiles / kStWarps; ++q) {
              const int nt = warp + kStWarps * q;
              if (nt < NT) {
                const int col = (nt * 8 + g) * kGradStride + 2 * t;
                float dh[4], dl[4];
                mma_f16_zero_c(dh, af, *reinterpret_cast<const unsigned*>(hi_t + col),
                               *reinterpret_cast<const unsigned*>(hi_t + col + 8));
                mma_f16_zero_c(dl, af, *reinterpret_cast<const unsigned*>(lo_t + col),
                               *reinterpret_cast<const unsigned*>(lo_t + col + 8));
#pragma unroll
                for (int i = 0; i < 4; ++i)
                  acc[mt][q][i] = __fadd_rn(acc[mt][q][i], __fmul_rn(__fadd_rn(dh[i], dl[i]), inv_s));
              }
            }
          }
        }
      } else {
        // exact FP64 tile sum of c·g' over the 16 bags (c·g' is exact in FP64), one FP32 rounding
        if (d < D_pad) {
#pragma unroll
          for (int b = 0; b < 16; ++b) g_s[b][d] = v[b];
        }
        __syncthreads();
        for_each_owned(warp, g, t, MT, NT, [&](int mt, int q, int i, int e, int dd) {
          double sum = 0.0;
          for (int b = 0; b < 16; ++b) {
            const float c = __half2float(__ushort_as_half(s_counts[e * kCountStride + b]));
            if (c != 0.0f) sum += static_cast<double>(c) * static_cast<double>(g_s[b][dd]);
          }
          acc[mt][q][i] = __fadd_rn(acc[mt][q][i], __double2float_rn(sum));
        });
      }
    }
    __syncthreads();  // hi_t, lo_t, g_s, s_counts, s_len and the reductions are rewritten next
  }

  // partials [j][block][64][128] and the rows' lookups in this block's bags (the 8 threads of a
  // count row, adjacent lanes, add their sums: integers, any order)
  const std::int64_t slot = static_cast<std::int64_t>(j) * a.blocks_per_feature + blockIdx.x;
  float* P = a.partials + slot * kStMaxRows * kStMaxDim;
  for_each_owned(warp, g, t, MT, NT,
                 [&](int mt, int q, int i, int e, int d) { P[e * kStMaxDim + d] = acc[mt][q][i]; });
#pragma unroll
  for (int r = 0; r < kCountWords; ++r) {
    unsigned v = sl[r];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    const int w = threadIdx.x + r * kStBlock, e = w / 8;
    if (w % 8 == 0 && e < E_pad) a.partial_sl[slot * kStMaxRows + e] = static_cast<std::int32_t>(v);
  }
}

// The warp-column variant of the split-K product (SmallTableBackwardArgs::warp_columns; same
// blocks, tiles, partials and bound as small_table_grad_split_k): warp w of the block owns columns
// [32w, 32w + 32) of the feature for all of the block's k-tiles and synchronises with no other
// warp. Per 16-bag tile, lane l holds g' of column 32w + l (its 16 bags) in registers and scales
// its own column: the power of two s, the hi / lo split and the tensor-core condition (finite,
// max|g'| >= 2^-60, every non-zero |g'| >= 2^-15·max|g'|) are per (tile, column) instead of per
// tile, which the bound of docs/oracle.md allows (an output element only sums its own column); a
// column that fails it is summed exactly in FP64 from the counts. The A fragments (counts) are
// loaded straight from global memory (the 4 warps read the same ones: L1), hi / lo go through a
// warp-private shared tile (the B fragments want 2 bags of one column per register). The next
// tile's grad_output and (MEAN) bag lengths are in flight while this one multiplies, its counts
// while this one's exact columns and lookups are summed (fewer live registers than a copy).
template <class Grad, class Idx>
__global__ void __launch_bounds__(kStBlock) small_table_grad_split_k_warp(const SmallTableBackwardArgs a) {
  if (fatal_aborted(a.run.abort_key)) return;
  const int j = blockIdx.y;
  if (a.counts.invalid[j] != 0u) return;  // not representable: the generic path (sorted) or the
                                          // apply kernel's exact sums (no sort) own the table
  const SmallFeatureMeta ft = a.features[j];
  const int E = ft.rows, D = ft.dim;
  const int MT = (E + 15) / 16;
  const int warp = threadIdx.x / tuning::kWarpThreads, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int col0 = tuning::kWarpThreads * warp;  // this warp's columns [col0, col0 + 32)
  const int NTw = min(kWarpNTiles, max(0, (D - col0 + 7) / 8));
  if (NTw == 0) return;  // warp-uniform; warp 0 always has columns (D >= 64)
  __shared__ __align__(16) __half hi_s[kStWarps][tuning::kWarpThreads * kGradStride];  // [col][bag]
  __shared__ __align__(16) __half lo_s[kStWarps][tuning::kWarpThreads * kGradStride];
  __shared__ float g_s[kStWarps][16][tuning::kWarpThreads + 1];  // exact columns: g' [bag][col]
  __half* hi_w = hi_s[warp];
  __half* lo_w = lo_s[warp];

  const std::int64_t B = a.batch_size, Bp = a.counts.padded_bags;
  const std::uint16_t* counts = a.counts.counts + static_cast<std::int64_t>(j) * kStMaxRows * Bp;
  const Grad* grad = static_cast<const Grad*>(a.grad_output) + ft.out_col;
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  const bool clip = a.run.max_gradient > 0.0f;
  const std::int64_t k_begin = static_cast<std::int64_t>(blockIdx.x) * a.block_tiles * 16;
  const std::int64_t k_end = min(Bp, k_begin + static_cast<std::int64_t>(a.block_tiles) * 16);
  const int d = col0 + lane;  // this lane's column

  float acc[kStMaxKTiles][kWarpNTiles][4];
#pragma unroll
  for (int mt = 0; mt < kStMaxKTiles; ++mt)
#pragma unroll
    for (int q = 0; q < kWarpNTiles; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][q][i] = 0.0f;
  unsigned sl[kStMaxKTiles][2] = {};  // lookups of rows 16mt + g (+ 8) in this lane's bag pairs

  // tile k0's loads: column d of 16 bags and (MEAN) the length of bag k0 + lane for lanes < 16;
  // the A fragments (rows 16mt + g, + 8; bags 2t, 2t + 1, + 8: one 4-byte load each)
  float raw[16];
  unsigned af[kStMaxKTiles][4];
  float len = 0.0f;
  auto load_grad = [&](std::int64_t k0) {
#pragma unroll
    for (int b = 0; b < 16; ++b)
      raw[b] = (d < D && k0 + b < B) ? to_float(grad[(k0 + b) * a.out_stride + d]) : 0.0f;
    if (a.mean) {
      const std::int64_t bag = k0 + lane;
      len = 0.0f;
      if (lane < 16 && bag < B) len = bag_length(offsets, ft.first_bag + bag);
    }
  };
  auto load_counts = [&](std::int64_t k0) {
#pragma unroll
    for (int mt = 0; mt < kStMaxKTiles; ++mt) {
      const std::uint16_t* r0 = counts + static_cast<std::int64_t>(16 * mt + g) * Bp + k0 + 2 * t;
      const std::uint16_t* r1 = r0 + 8 * Bp;
      af[mt][0] = mt < MT ? *reinterpret_cast<const unsigned*>(r0) : 0u;
      af[mt][1] = mt < MT ? *reinterpret_cast<const unsigned*>(r1) : 0u;
      af[mt][2] = mt < MT ? *reinterpret_cast<const unsigned*>(r0 + 8) : 0u;
      af[mt][3] = mt < MT ? *reinterpret_cast<const unsigned*>(r1 + 8) : 0u;
    }
  };
  if (k_begin < k_end) {
    load_grad(k_begin);
    load_counts(k_begin);
  }

  for (std::int64_t k0 = k_begin; k0 < k_end; k0 += 16) {
    // this tile's g' (the term form: clip, then fl(g / L) for MEAN) and counts
    float v[16];
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      float x = raw[b];
      if (clip) x = clip_gradient(x, a.run.max_gradient);
      if (a.mean) {
        const float L = __shfl_sync(0xffffffffu, len, b);
        if (L > 0.0f) x = __fdiv_rn(x, L);
      }
      v[b] = x;
    }

    // column d: range, scale, hi / lo into the warp's tile (zeros for a column summed otherwise)
    float mx = 0.0f, mn = INFINITY;
    bool nonfinite = false;
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      if (!isfinite(v[b])) {
        nonfinite = true;
      } else if (v[b] != 0.0f) {
        mx = fmaxf(mx, fabsf(v[b]));
        mn = fminf(mn, fabsf(v[b]));
      }
    }
    const bool ok = !nonfinite && (mx == 0.0f || (mx >= 0x1p-60f && mn >= mx * 0x1p-15f));
    const bool tensor = ok && mx > 0.0f;
    float inv_s = 0.0f;
    {
      unsigned hw[8] = {}, lw[8] = {};
      if (tensor) split_hi_lo(a, v, hi_lo_scale(mx, inv_s), hw, lw);
      uint4* hd = reinterpret_cast<uint4*>(hi_w + lane * kGradStride);
      uint4* ld = reinterpret_cast<uint4*>(lo_w + lane * kGradStride);
      hd[0] = make_uint4(hw[0], hw[1], hw[2], hw[3]);
      hd[1] = make_uint4(hw[4], hw[5], hw[6], hw[7]);
      ld[0] = make_uint4(lw[0], lw[1], lw[2], lw[3]);
      ld[1] = make_uint4(lw[4], lw[5], lw[6], lw[7]);
    }
    const unsigned tmask = __ballot_sync(0xffffffffu, tensor);
    const unsigned xmask = __ballot_sync(0xffffffffu, !ok);  // columns summed exactly
    if (xmask != 0u) {
#pragma unroll
      for (int b = 0; b < 16; ++b) g_s[warp][b][lane] = v[b];
    }
    const bool more = k0 + 16 < k_end;
    if (more) load_grad(k0 + 16);  // v is dead: raw takes the next tile
    // 1/s of the columns this lane's accumulators hold: local column 8q + 2t + h
    float inv[kWarpNTiles][2];
#pragma unroll
    for (int q = 0; q < kWarpNTiles; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) inv[q][h] = __shfl_sync(0xffffffffu, inv_s, 8 * q + 2 * t + h);
    __syncwarp();
    if (tmask != 0u) {
#pragma unroll
      for (int mt = 0; mt < kStMaxKTiles; ++mt) {
        if (mt < MT) {
#pragma unroll
          for (int q = 0; q < kWarpNTiles; ++q) {
            if (q < NTw) {
              const int col = (8 * q + g) * kGradStride + 2 * t;
              float dh[4], dl[4];
              mma_f16_zero_c(dh, af[mt], *reinterpret_cast<const unsigned*>(hi_w + col),
                             *reinterpret_cast<const unsigned*>(hi_w + col + 8));
              mma_f16_zero_c(dl, af[mt], *reinterpret_cast<const unsigned*>(lo_w + col),
                             *reinterpret_cast<const unsigned*>(lo_w + col + 8));
#pragma unroll
              for (int i = 0; i < 4; ++i)
                if ((tmask >> (8 * q + 2 * t + (i & 1))) & 1u)
                  acc[mt][q][i] = __fadd_rn(acc[mt][q][i], __fmul_rn(__fadd_rn(dh[i], dl[i]), inv[q][i & 1]));
            }
          }
        }
      }
    }
    if (warp == 0) {  // the rows' lookups in this tile (the 4 lanes of a row hold its 16 bags)
      auto pair_sum = [](unsigned w) {
        return static_cast<unsigned>(__half2int_rn(__ushort_as_half(static_cast<std::uint16_t>(w & 0xffffu))) +
                                     __half2int_rn(__ushort_as_half(static_cast<std::uint16_t>(w >> 16))));
      };
#pragma unroll
      for (int mt = 0; mt < kStMaxKTiles; ++mt) {
        sl[mt][0] += pair_sum(af[mt][0]) + pair_sum(af[mt][2]);
        sl[mt][1] += pair_sum(af[mt][1]) + pair_sum(af[mt][3]);
      }
    }
    if (more) load_counts(k0 + 16);  // the A fragments are dead
    if (xmask != 0u) {  // warp-uniform: exact FP64 sums of c·g' (exact) for those columns
#pragma unroll
      for (int mt = 0; mt < kStMaxKTiles; ++mt)
#pragma unroll
        for (int q = 0; q < kWarpNTiles; ++q)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int c = 8 * q + 2 * t + (i & 1);
            if (mt < MT && q < NTw && ((xmask >> c) & 1u)) {
              const std::uint16_t* crow = counts + static_cast<std::int64_t>(16 * mt + g + 8 * (i >> 1)) * Bp + k0;
              double sum = 0.0;
              for (int b = 0; b < 16; ++b) {
                const float cnt = __half2float(__ushort_as_half(crow[b]));
                if (cnt != 0.0f) sum += static_cast<double>(cnt) * static_cast<double>(g_s[warp][b][c]);
              }
              acc[mt][q][i] = __fadd_rn(acc[mt][q][i], __double2float_rn(sum));
            }
          }
    }
    __syncwarp();  // hi_w, lo_w and g_s are rewritten by the next tile
  }

  // partials [j][block][64][128] (rows < E_pad, this warp's columns < D_pad) and, from warp 0,
  // the rows' lookups in this block's bags
  const std::int64_t slot = static_cast<std::int64_t>(j) * a.blocks_per_feature + blockIdx.x;
  float* P = a.partials + slot * kStMaxRows * kStMaxDim;
#pragma unroll
  for (int mt = 0; mt < kStMaxKTiles; ++mt)
#pragma unroll
    for (int q = 0; q < kWarpNTiles; ++q)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (mt < MT && q < NTw)
          P[(16 * mt + g + 8 * (i >> 1)) * kStMaxDim + col0 + 8 * q + 2 * t + (i & 1)] = acc[mt][q][i];
  if (warp == 0) {
#pragma unroll
    for (int mt = 0; mt < kStMaxKTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned v = sl[mt][h];
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
        if (t == 0 && mt < MT) a.partial_sl[slot * kStMaxRows + 16 * mt + g + 8 * h] = static_cast<std::int32_t>(v);
      }
  }
}

// a += b per component, IEEE round to nearest (no contraction: the bound counts each addition)
__device__ __forceinline__ void add_rn(float4& a, const float4& b) {
  a.x = __fadd_rn(a.x, b.x);
  a.y = __fadd_rn(a.y, b.y);
  a.z = __fadd_rn(a.z, b.z);
  a.w = __fadd_rn(a.w, b.w);
}

// The exact rows (SmallTableBackwardArgs::exact_rows, docs/small-table.md "Without the sort"):
// G_e = Σ_b c_b·g'[b] over the bags b with c_b > 0 lookups of row e, each term added with one
// FP64 rounding (fma: c_b·g' is exact inside it) in a fixed order: warp w of the block
// takes bags [w·R, (w+1)·R) in bag order, then the block's warps are added in warp order by warp
// 0, which rounds once to FP32. Lane l owns columns [4l, 4l + 4) (apply_row's layout). The counts
// come from the histogram (kFromIndices = false: FP16 counts, exact when the histogram is
// representable) or from the feature's lookups themselves (true: a warp counts row e in each of
// its bags, bad indices repaired to row 0 as everywhere; used when a count exceeds 2048).
// Returns the row's SL (the same on every thread); warp 0 gets the total in `total`.
template <bool kFromIndices, class Grad, class Idx>
__device__ __forceinline__ std::int64_t exact_row_sum(const SmallTableBackwardArgs& a, int j, int e,
                                                      const SmallFeatureMeta& ft,
                                                      double (*s_tot)[tuning::kWarpThreads][4],
                                                      std::int64_t* s_sl, float (&total)[4]) {
  const int warp = threadIdx.x / tuning::kWarpThreads, lane = threadIdx.x & 31;
  const int D = ft.dim;
  const std::int64_t B = a.batch_size;
  const Grad* grad = static_cast<const Grad*>(a.grad_output) + ft.out_col;
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  const bool clip = a.run.max_gradient > 0.0f;
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  std::int64_t sl = 0;  // warp-uniform
  // acc += c · g'[bag] (the term form of the generic path: clip, then fl(g / L) for MEAN)
  auto add_bag = [&](std::int64_t bag, int c) {
    const float L = a.mean ? bag_length(offsets, ft.first_bag + bag) : 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = 4 * lane + i;
      if (col < D) {
        float x = to_float(grad[bag * a.out_stride + col]);
        if (clip) x = clip_gradient(x, a.run.max_gradient);
        if (a.mean && L > 0.0f) x = __fdiv_rn(x, L);
        acc[i] = __fma_rn(static_cast<double>(c), static_cast<double>(x), acc[i]);
      }
    }
  };
  if constexpr (kFromIndices) {
    const Idx* indices = static_cast<const Idx*>(a.indices);
    const std::int64_t per_warp = (B + kApplyWarps - 1) / kApplyWarps;
    const std::int64_t b_end = min(B, (warp + 1) * per_warp);
    for (std::int64_t b = warp * per_warp; b < b_end; ++b) {
      const std::int64_t k = ft.first_bag + b;
      const std::int64_t s = static_cast<std::int64_t>(offsets[k]);
      const std::int64_t t = static_cast<std::int64_t>(offsets[k + 1]);
      int c = 0;
      for (std::int64_t p0 = s; p0 < t; p0 += 32 * kScanUnroll) {  // warp-uniform trip count
        std::int64_t r[kScanUnroll];
#pragma unroll
        for (int u = 0; u < kScanUnroll; ++u) {
          const std::int64_t p = p0 + lane + 32 * u;
          r[u] = p < t ? static_cast<std::int64_t>(indices[p]) : -1;
        }
#pragma unroll
        for (int u = 0; u < kScanUnroll; ++u) {
          const std::int64_t p = p0 + lane + 32 * u;
          std::int64_t rr = r[u];
          if (p < t && a.check_indices && (rr < 0 || rr >= ft.rows)) rr = 0;  // repaired: row 0
          c += __popc(__ballot_sync(0xffffffffu, p < t && rr == e));
        }
      }
      if (c > 0) {
        add_bag(b, c);
        sl += c;
      }
    }
  } else {
    // counts row e: [Bp] FP16, bags >= B zero; a warp step reads 64 bags (a pair per lane)
    const std::int64_t Bp = a.counts.padded_bags;
    const std::uint16_t* row = a.counts.counts + (static_cast<std::int64_t>(j) * kStMaxRows + e) * Bp;
    const std::int64_t per_warp = ((Bp + 63) / 64 + kApplyWarps - 1) / kApplyWarps * 64;
    const std::int64_t b_end = min(Bp, (warp + 1) * per_warp);
    for (std::int64_t b0 = warp * per_warp; b0 < b_end; b0 += 64) {
      const std::int64_t mine = b0 + 2 * lane;
      const unsigned w = mine < b_end ? *reinterpret_cast<const unsigned*>(row + mine) : 0u;
      unsigned nz = __ballot_sync(0xffffffffu, w != 0u);
      while (nz != 0u) {  // the lanes with a non-zero pair, in bag order
        const int l = __ffs(nz) - 1;
        nz &= nz - 1u;
        const unsigned pair = __shfl_sync(0xffffffffu, w, l);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = __half2int_rn(__ushort_as_half(static_cast<std::uint16_t>(h == 0 ? pair & 0xffffu : pair >> 16)));
          if (c > 0 && b0 + 2 * l + h < B) {  // (bags >= B hold zero counts; never read past B)
            add_bag(b0 + 2 * l + h, c);
            sl += c;
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) s_tot[warp][lane][i] = acc[i];
  if (lane == 0) s_sl[warp] = sl;
  __syncthreads();
  std::int64_t row_sl = 0;
  for (int w = 0; w < kApplyWarps; ++w) row_sl += s_sl[w];
  if (warp == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      double t = 0.0;
      for (int w = 0; w < kApplyWarps; ++w) t += s_tot[w][lane][i];  // warp order, FP64
      total[i] = __double2float_rn(t);                                // the one FP32 rounding
    }
  }
  return row_sl;
}

// One block of kApplyWarps warps per (feature, row): warp w sums the block partials w, w + 8, ...
// in block order, warp 0 adds the warps' sums in warp order (a fixed tree: deterministic; every
// partial passes through at most P - 1 additions), then runs the generic optimizer update
// (apply_row) for rows with SL >= min_run. With exact_rows (no sort ran), the block also owns the
// rows with 0 < SL < min_run, summed exactly from the counts, and every row of a feature whose
// histogram is not representable, summed exactly from its lookups (exact_row_sum).
template <class Grad, class Idx>
__global__ void __launch_bounds__(kApplyWarps * tuning::kWarpThreads)
small_table_apply_block_per_row(const SmallTableBackwardArgs a) {
  if (fatal_aborted(a.run.abort_key)) return;
  const int j = static_cast<int>(blockIdx.x / kStMaxRows), e = static_cast<int>(blockIdx.x % kStMaxRows);
  const SmallFeatureMeta ft = a.features[j];
  const bool invalid = a.counts.invalid[j] != 0u;
  if (e >= ft.rows || (invalid && !a.exact_rows)) return;  // uniform in the block
  __shared__ float4 s_acc[kApplyWarps][tuning::kWarpThreads];
  __shared__ double s_tot[kApplyWarps][tuning::kWarpThreads][4];
  __shared__ std::int64_t s_sl[kApplyWarps];
  const int warp = threadIdx.x / tuning::kWarpThreads, lane = threadIdx.x & 31;
  float total[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::int64_t row_sl = 0;
  bool exact = invalid;
  if (invalid) {
    row_sl = exact_row_sum<true, Grad, Idx>(a, j, e, ft, s_tot, s_sl, total);
  } else {
    const int c = lane * 4;  // < 128 = kStMaxDim
    const std::int64_t base = static_cast<std::int64_t>(j) * a.blocks_per_feature;
    std::int64_t sl = 0;
    for (int kb = warp + lane * kApplyWarps; kb < a.blocks_per_feature; kb += kApplyWarps * tuning::kWarpThreads)
      sl += a.partial_sl[(base + kb) * kStMaxRows + e];
    sl = __reduce_add_sync(0xffffffffu, static_cast<unsigned>(sl));  // < 2^31: SL of one row
    // this lane's 4 columns of block kb's partial of row e
    auto partial = [&](int kb) {
      return *reinterpret_cast<const float4*>(a.partials + ((base + kb) * kStMaxRows + e) * kStMaxDim + c);
    };
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int kb = warp;
    constexpr int kUnroll = 4;  // independent loads in flight, added in block order
    for (; kb + (kUnroll - 1) * kApplyWarps < a.blocks_per_feature; kb += kUnroll * kApplyWarps) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = partial(kb + u * kApplyWarps);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) add_rn(acc, v[u]);
    }
    for (; kb < a.blocks_per_feature; kb += kApplyWarps) add_rn(acc, partial(kb));
    s_acc[warp][lane] = acc;
    if (lane == 0) s_sl[warp] = sl;
    __syncthreads();
    for (int w = 0; w < kApplyWarps; ++w) row_sl += s_sl[w];
    if (row_sl == 0) return;  // untouched; uniform in the block
    if (row_sl >= a.min_run) {
      if (warp != 0) return;
      for (int w = 1; w < kApplyWarps && w < a.blocks_per_feature; ++w) add_rn(acc, s_acc[w][lane]);  // warps with partials
      total[0] = acc.x;
      total[1] = acc.y;
      total[2] = acc.z;
      total[3] = acc.w;
    } else {
      if (!a.exact_rows) return;  // the generic run kernels' row
      __syncthreads();            // s_sl is rewritten by exact_row_sum
      exact = true;
      exact_row_sum<false, Grad, Idx>(a, j, e, ft, s_tot, s_sl, total);  // its SL is row_sl
    }
  }
  if (warp != 0 || row_sl == 0) return;
  const RunGroup<false> grp = RunGroup<false>::make(tuning::kWarpThreads);
  const BwdTableMeta t{ft.row_offset, ft.table_offset, ft.dim, j};
  const std::int64_t key = ft.row_offset + e;
  const RowState st = load_row_state<__half, false>(a.run, grp, key, t);
  apply_row<__half, float, false>(a.run, grp, key, t, st, total);
  if (lane == 0) {
    atomicAdd(exact ? &a.run.counters->small_table_exact_rows : &a.run.counters->small_table_rows, 1ull);
    atomicAdd(exact ? &a.run.counters->small_table_exact_lookups : &a.run.counters->small_table_lookups,
              static_cast<unsigned long long>(row_sl));
  }
}

}  // namespace

template <DType kGrad, DType kIdx>
void launch_small_table_backward_t(const SmallTableBackwardArgs& a, cudaStream_t stream) {
  if (a.num_small == 0 || a.batch_size == 0) return;
  const dim3 grid(static_cast<unsigned>(a.blocks_per_feature), static_cast<unsigned>(a.num_small));
  if (a.warp_columns)
    small_table_grad_split_k_warp<storage_t<kGrad>, storage_t<kIdx>><<<grid, kStBlock, 0, stream>>>(a);
  else
    small_table_grad_split_k<storage_t<kGrad>, storage_t<kIdx>><<<grid, kStBlock, 0, stream>>>(a);
  small_table_apply_block_per_row<storage_t<kGrad>, storage_t<kIdx>>
      <<<static_cast<unsigned>(a.num_small) * kStMaxRows, kApplyWarps * tuning::kWarpThreads, 0, stream>>>(a);
}

#define TBE_SMALL_TABLE_BACKWARD(GRAD)                                                         \
  static_assert(dispatch::contains(dispatch::kCompiledSmallTable,                              \
                                   dispatch::TypeCombo{DType::F16, DType::F32, GRAD}));        \
  template void launch_small_table_backward_t<GRAD, DType::I32>(const SmallTableBackwardArgs&, \
                                                                cudaStream_t);                 \
  template void launch_small_table_backward_t<GRAD, DType::I64>(const SmallTableBackwardArgs&, \
                                                                cudaStream_t);
TBE_SMALL_TABLE_BACKWARD(DType::F32)
TBE_SMALL_TABLE_BACKWARD(DType::F16)
TBE_SMALL_TABLE_BACKWARD(DType::BF16)

}  // namespace tbe::cuda::detail
