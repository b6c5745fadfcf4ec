// IKBO cross attention, forward: FA2-style tensor-core kernel with per-user K/V reuse
// (AttentionOp, include/tbe/cuda/ikbo_attention.h; design: optimized/README.md "IKBO attention").
//
// One CTA per (work item w, head h): w is a block of 128 query rows of one user u (rows of its
// candidates in the grouping's order: candidate cand_sorted[run_start + r / n_seed], query row
// r % n_seed), so every K/V tile brought into shared memory serves all of them. 8 warps, warp i
// owns rows [16i, 16i + 16) of the block.
//
//   S = Q Kᵀ (16 × kBN per warp, mma.sync m16n8k16, FP32 accumulation)
//   m_new = max(m, rowmax S);  α = 2^((m − m_new)·c);  P = 2^(S·c − m_new·c)   (c = scale·log2 e,
//   one FMA; ex2.approx), l = α·l + Σ P (FP32 P), acc = α·acc + RN_st(P) · V, out = RN_st(acc·(1/l))
//
// Keys are processed in ascending tiles of kBN from the user's first key; keys >= n of the last
// tile get S = −inf (P = 0) and their K/V rows are zero-filled in shared memory. A CTA whose user
// has no keys writes exact zeros. Rows of a partial block past the user's rows read zero Q and are
// never stored. Each output row depends only on its own Q row and the user's K/V (MMA rows are
// independent, the tiling starts at the user's first key), so results do not depend on which rows
// share the CTA, and the order of every operation is fixed: bitwise stable run to run.
//
// Q is read by ldmatrix per k-step and tile, or (AttentionTuning::q_in_registers, key block 128)
// once into registers before the first tile (its own cp.async group, so tile 0 stays in flight).
//
// K/V ring (AttentionTuning::kv_stages): 2 stages, tile t + 1 loaded while tile t is computed,
// two barriers per tile (tile t landed; every warp done with its stage before the refill); or 3
// stages (key block 128), tile t + 2 loaded right after tile t's barrier into the stage tile t − 1
// used, which that barrier already freed: one barrier per tile and one more tile in flight.
//
// Shared memory: Q [128][Dh], then kStages stages of K [kBN][Dh] and V [kBN][Dh]; rows are 16-byte
// chunks XOR-swizzled by (row & 7), so ldmatrix phases (8 rows at one logical chunk) and the
// cp.async writes (consecutive chunks of one row) hit 8 distinct 16-byte bank groups.
#pragma once

#include <cstdint>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/common.cuh"
#include "kernels/ikbo_attention_cta.cuh"
#include "kernels/ikbo_attention_launch.h"
#include "kernels/mma_sync.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace attention {

using attention_cta::ex2;
using attention_cta::pack2;
using Policy = tuning::AttentionMmaSync;
constexpr int kBM = Policy::kBlockRows, kThreads = Policy::kThreads;
static_assert(kBM == 128 && kThreads == 256 && kBM == kAttentionBlockRows,
              "the row mapping below assumes 8 warps of 16 rows");

template <int kDh, int kBN, int kStages>
struct Tile {
  static constexpr int kChunks = kDh / 8;            // 16-byte chunks per row
  static constexpr int kQ = kBM * kDh, kKV = kBN * kDh;  // elements
  static constexpr int kSmemBytes = (kQ + 2 * kStages * kKV) * 2;
  static_assert(kDh % 16 == 0 && kBN % 16 == 0 && kChunks >= 8, "swizzle needs >= 8 chunks per row");
  static_assert(kStages == 2 || kStages == 3, "the ring's barriers below are for 2 or 3 stages");
  static_assert(kSmemBytes <= Policy::kMaxSmemBytes, "the CTA's shared memory exceeds sm_90's");
};

/// Swizzled element offset of (row, 16-byte chunk) in a tile of rows of kDh elements.
template <int kDh>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * kDh + ((chunk ^ (row & 7)) << 3);
}

/// kQRegs (AttentionTuning::q_in_registers): the warp's Q fragments are loaded from shared memory
/// once and held in registers across key tiles (kDh / 16 × 4 registers) instead of an ldmatrix per
/// k-step and tile; same MMA operands in the same order, so bitwise the same output. kStages
/// (AttentionTuning::kv_stages): K/V tiles in the cp.async ring, 2 or 3; placement only, so
/// bitwise the same output too.
template <class T, int kDh, int kBN, bool kQRegs, int kStages>
__global__ void __launch_bounds__(kThreads, Policy::min_blocks_per_sm(kDh, kBN, kQRegs, kStages))
    attention_fwd_kernel(AttentionArgs a) {
  using TL = Tile<kDh, kBN, kStages>;
  if (fatal_aborted(a.map_error)) return;
  const attention_cta::Cta cta = attention_cta::load_cta(a, blockIdx.x, static_cast<int>(blockIdx.y));
  const int rows = cta.item.rows;  // rows of this block
  if (rows <= 0) return;           // the grid is an upper bound of the work items
  const int h = cta.h;
  const std::int64_t k_begin = cta.k_begin, n = cta.n;
  const std::int64_t HD = static_cast<std::int64_t>(a.H) * kDh;
  auto row_offset = [&](int i) { return cta.row_offset<kDh>(a, i); };
  const T* __restrict__ q = static_cast<const T*>(a.q);
  const T* __restrict__ k = static_cast<const T*>(a.k);
  const T* __restrict__ v = static_cast<const T*>(a.v);
  T* __restrict__ out = static_cast<T*>(a.out);
  const int t = static_cast<int>(threadIdx.x);
  if (n == 0) return attention_cta::store_zero_rows<T, kDh>(a, cta, out, t, kThreads);

  extern __shared__ __align__(128) unsigned char attn_smem[];
  T* sQ = reinterpret_cast<T*>(attn_smem);
  T* sK = sQ + TL::kQ;                // kStages stages
  T* sV = sK + kStages * TL::kKV;     // kStages stages

  // Q block (rows past `rows` zero-filled)
  for (int idx = t; idx < kBM * TL::kChunks; idx += kThreads) {
    const int i = idx / TL::kChunks, c = idx % TL::kChunks;
    const bool ok = i < rows;
    cp_async16(sQ + swz<kDh>(i, c), ok ? q + row_offset(i) + c * 8 : q, ok ? 16 : 0);
  }
  const T* k_h = k + k_begin * HD + static_cast<std::int64_t>(h) * kDh;
  const T* v_h = v + k_begin * HD + static_cast<std::int64_t>(h) * kDh;
  auto load_kv = [&](std::int64_t tile, int stage) {
    T* dk = sK + stage * TL::kKV;
    T* dv = sV + stage * TL::kKV;
    for (int idx = t; idx < kBN * TL::kChunks; idx += kThreads) {
      const int j = idx / TL::kChunks, c = idx % TL::kChunks;
      const std::int64_t key = tile * kBN + j;
      const bool ok = key < n;
      const std::int64_t off = key * HD + c * 8;
      cp_async16(dk + swz<kDh>(j, c), ok ? k_h + off : k, ok ? 16 : 0);
      cp_async16(dv + swz<kDh>(j, c), ok ? v_h + off : v, ok ? 16 : 0);
    }
  };
  cp_async_commit();  // group: Q
  load_kv(0, 0);
  cp_async_commit();  // group: tile 0
  const std::int64_t n_tiles = TBE_MUTANT_SWAP(a, kAttnLastKeyTileDropped, n / kBN, (n + kBN - 1) / kBN);
  if constexpr (kStages == 3) {
    if (n_tiles > 1) load_kv(1, 1);
    cp_async_commit();  // group: tile 1 (empty without it: the count stays uniform)
  }

  const int lane = t & 31, warp = t >> 5;
  const int gq = lane >> 2, cq = lane & 3;  // fragment row group, column pair
  // A fragments of the warp's 16 Q rows, k-step kk (d chunks 2kk, 2kk + 1)
  auto load_q = [&](unsigned (&qa)[4], int kk) {
    ldmatrix_x4(qa, sQ + swz<kDh>(warp * 16 + (lane & 15), kk * 2 + (lane >> 4)));
  };
  [[maybe_unused]] unsigned q_frag[kQRegs ? kDh / 16 : 1][4];
  if constexpr (kQRegs) {
    cp_async_wait<kStages - 1>();  // everything but tiles 0 (and 1): Q landed
    __syncthreads();     // ... for every thread's copies
#pragma unroll
    for (int kk = 0; kk < kDh / 16; ++kk) load_q(q_frag[kk], kk);
  }
  const float c2 = a.scale_log2;
  constexpr int kNS = kBN / 8;   // S n-tiles per warp (keys)
  constexpr int kNO = kDh / 8;   // O n-tiles per warp (d)
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc_o[kNO][4];
#pragma unroll
  for (int i = 0; i < kNO; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[i][e] = 0.0f;

  int stage = 0;  // tile % kStages
  for (std::int64_t tile = 0; tile < n_tiles; ++tile) {
    if constexpr (kStages == 2) {
      if (tile + 1 < n_tiles) load_kv(tile + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();  // everything but the group just committed: this tile (and Q) landed
      __syncthreads();
    } else {
      cp_async_wait<1>();  // everything but tile + 1's group: this tile (and Q) landed
      __syncthreads();     // ... for every thread; and every warp is done with tile − 1's stage
      if (tile + 2 < n_tiles) load_kv(tile + 2, stage == 0 ? 2 : stage - 1);  // (tile + 2) % 3
      cp_async_commit();   // (empty past the last tile: the count stays uniform)
    }
    const T* tK = sK + stage * TL::kKV;
    const T* tV = sV + stage * TL::kKV;

    // ---- S = Q Kᵀ: 16 rows × kBN keys per warp ----
    float s[kNS][4];
#pragma unroll
    for (int i = 0; i < kNS; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDh / 16; ++kk) {
      unsigned qa[4];
      if constexpr (kQRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[e] = q_frag[kk][e];
      } else {
        load_q(qa, kk);
      }
#pragma unroll
      for (int nj = 0; nj < kBN / 16; ++nj) {
        // matrices: keys +0..7 / d chunk 2kk, keys +0..7 / 2kk+1, keys +8..15 / 2kk, keys +8..15 / 2kk+1
        unsigned kb[4];
        ldmatrix_x4(kb, tK + swz<kDh>(nj * 16 + (lane & 7) + ((lane >> 4) << 3),
                                      kk * 2 + ((lane >> 3) & 1)));
        mma16816<T>(s[2 * nj], qa, kb[0], kb[1]);
        mma16816<T>(s[2 * nj + 1], qa, kb[2], kb[3]);
      }
    }
    if ((tile + 1) * kBN > n) {  // last tile: keys >= n do not exist
#pragma unroll
      for (int i = 0; i < kNS; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (tile * kBN + i * 8 + 2 * cq + (e & 1) >= n) s[i][e] = -INFINITY;
    }

    // ---- online softmax (rows gq: e = 0, 1; gq + 8: e = 2, 3; a row lives in one quad) ----
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = m[hr];
#pragma unroll
      for (int i = 0; i < kNS; ++i) mx = fmaxf(mx, fmaxf(s[i][2 * hr], s[i][2 * hr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // every tile has a key < n, so mx is finite for finite inputs; the first tile's m = −inf
      // gives α = 2^−inf = 0 (acc and l are 0 anyway); an unchanged maximum gives α = 1 exactly.
      const float alpha = TBE_MUTANT_SWAP(a, kAttnNoRescale, 1.0f, ex2((m[hr] - mx) * c2));
      m[hr] = mx;
      const float mc = mx * c2;
      float rs = 0.0f;
#pragma unroll
      for (int i = 0; i < kNS; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = ex2(fmaf(s[i][2 * hr + e], c2, -mc));
          s[i][2 * hr + e] = p;
          rs += p;
        }
      l[hr] = fmaf(l[hr], alpha, rs);
#pragma unroll
      for (int i = 0; i < kNO; ++i) {
        acc_o[i][2 * hr] *= alpha;
        acc_o[i][2 * hr + 1] *= alpha;
      }
    }

    // ---- acc += RN_st(P) · V: P's C fragments are the A fragments of the next MMA ----
#pragma unroll
    for (int kt = 0; kt < kBN / 16; ++kt) {
      unsigned pa[4];
      pa[0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);          // (g, keys 2c..)
      pa[1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);          // (g+8, keys 2c..)
      pa[2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);  // (g, keys 8+2c..)
      pa[3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);  // (g+8, keys 8+2c..)
#pragma unroll
      for (int dj = 0; dj < kDh / 16; ++dj) {
        // matrices: keys +0..7 / d chunk 2dj, keys +8..15 / 2dj, keys +0..7 / 2dj+1, keys +8..15 / 2dj+1
        unsigned vb[4];
        ldmatrix_x4_trans(vb, tV + swz<kDh>(kt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                            dj * 2 + (lane >> 4)));
        mma16816<T>(acc_o[2 * dj], pa, vb[0], vb[1]);
        mma16816<T>(acc_o[2 * dj + 1], pa, vb[2], vb[3]);
      }
    }
    if constexpr (kStages == 2)
      __syncthreads();  // the next iteration refills this stage with tile + 2
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();

  // ---- out = RN_st(acc · (1/l)) ----
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float lsum = l[hr];
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
    const float inv = 1.0f / lsum;
    const int i = warp * 16 + gq + 8 * hr;
    if (i >= rows) continue;
    T* o = out + row_offset(i) + 2 * cq;
#pragma unroll
    for (int dn = 0; dn < kNO; ++dn)
      *reinterpret_cast<unsigned*>(o + dn * 8) =
          pack2<T>(acc_o[dn][2 * hr] * inv, acc_o[dn][2 * hr + 1] * inv);
  }
}

/// Launches attention_fwd_kernel<T, kDh, kBN, kQRegs, kStages> over grid (a.grouping.work_slots, H).
template <class T, int kDh, int kBN, bool kQRegs = false, int kStages = 2>
void launch_fwd(const AttentionArgs& a, cudaStream_t stream) {
  auto kernel = attention_fwd_kernel<T, kDh, kBN, kQRegs, kStages>;
  constexpr int kSmem = Tile<kDh, kBN, kStages>::kSmemBytes;
  static const bool configured = [&] {
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
               "ikbo attention: shared memory size");
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(a.grouping.work_slots), static_cast<unsigned>(a.H));
  kernel<<<grid, kThreads, kSmem, stream>>>(a);
  check_launch("ikbo attention forward (mma.sync)");
}

/// The instances of one head dimension: key block 64 (2 stages, Q from shared memory), key block
/// 128 × Q in registers or not × 2 or 3 stages (AttentionOp::can_implement admits no other).
template <class T, int kDh>
void launch_fwd_dh(const AttentionArgs& a, cudaStream_t stream) {
  if (a.key_block == 64) return launch_fwd<T, kDh, 64>(a, stream);
  if (a.kv_stages == 3) {
    if (a.q_in_registers) return launch_fwd<T, kDh, 128, true, 3>(a, stream);
    return launch_fwd<T, kDh, 128, false, 3>(a, stream);
  }
  if (a.q_in_registers) return launch_fwd<T, kDh, 128, true>(a, stream);
  return launch_fwd<T, kDh, 128>(a, stream);
}

/// The instances of one storage type: Dh in {64, 128} × the variants of launch_fwd_dh
/// (dispatch/dispatch.h kAttentionHeadDims, kAttentionKeyBlocks; dispatch/tuning.h
/// AttentionMmaSync), explicitly instantiated in ikbo_attention_fwd_{f16,bf16}.cu (one .cu per
/// type keeps nvcc time down).
template <class T>
void launch_fwd_typed(const AttentionArgs& a, cudaStream_t stream) {
  static_assert(dispatch::kAttentionHeadDims[0] == 64 && dispatch::kAttentionHeadDims[1] == 128 &&
                    dispatch::kAttentionKeyBlocks[0] == 64 && dispatch::kAttentionKeyBlocks[1] == 128,
                "the instances below are the dispatch table's");
  if (a.Dh == 64) return launch_fwd_dh<T, 64>(a, stream);
  return launch_fwd_dh<T, 128>(a, stream);
}
extern template void launch_fwd_typed<__half>(const AttentionArgs&, cudaStream_t);
extern template void launch_fwd_typed<__nv_bfloat16>(const AttentionArgs&, cudaStream_t);

}  // namespace attention
}  // namespace tbe::cuda::detail
