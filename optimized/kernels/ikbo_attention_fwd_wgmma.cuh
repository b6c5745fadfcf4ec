// IKBO cross attention, forward: Hopper kernel (sm_90a) with TMA, mbarriers, wgmma and warp
// specialization, per-user K/V reuse as in the mma.sync kernel (ikbo_attention_fwd.cuh: the same
// work list, rows and semantics; design: optimized/README.md "IKBO attention").
//
// Persistent: one CTA per SM takes the jobs (work item w, head h) = 128 query rows of one user u
// in the order c, c + grid, c + 2·grid, ... (jobs j = (w = j % items, h = j / items), so the CTAs
// resident at one time work on neighbouring items of one head and share its users' K/V in L2).
// The K/V ring runs on from job to job (the producer loads the next job's first tiles while the
// consumers finish the current one), and the Q rows of job i go to Q buffer i % 2, loaded a whole
// job ahead of their use. 3 warpgroups:
//   warpgroup 0 (setmaxnreg 40):
//     warp 0, K/V producer: streams the user's K and V tiles of kBN = 128 keys into a kStages
//       ring with TMA (2-D tensor maps over [keys, H·Dh], 64-column boxes, 128-byte swizzle),
//       full_k / full_v barriers per stage (transaction bytes), waiting on the stage's empty
//       barrier before a refill. Keys past the user's range in the last tile are masked in S
//       (they belong to the next user or lie past the tensor, where TMA fills zeros); their V rows
//       are zeroed in shared memory by the producer before it signals full_v (so 0 · V is 0 even
//       if the next user's V is not finite).
//     warp 1, Q loader: per job, once the buffer's previous job is released (q_empty, all 8
//       consumer warps), reads the work item and key range, finds each consumer
//       warpgroup's rows of q (the grouping's candidates) and loads them into the buffer's
//       swizzled layout: with TMA (2-D map over q [B·n_seed, H·Dh], 64 × 64 boxes) when they are
//       consecutive rows of q, else with cp.async (rows past the item zero-filled); it publishes
//       the job (work item, key range, per warpgroup the first out row and whether the TMA-store
//       epilogue applies) in the buffer's JobSlot and completes q_full. So a consumer starts a
//       job with one barrier wait and shared-memory reads, never a chain of global loads.
//   warpgroups 1 and 2, consumers: 64 query rows each, per tile
//       S = Q Kᵀ        wgmma m64n128k16, both operands in shared memory, FP32 accumulation
//       online softmax  as the mma.sync kernel: m_new = max(m, rowmax S), α = 2^((m − m_new)·c),
//                       P = 2^(S·c − m_new·c) (c = scale·log2 e, one FMA, ex2.approx),
//                       l = α·l + Σ P (FP32 P)
//       O = α·O + RN_st(P) · V   wgmma m64nDhk16, P from registers (the S accumulator layout is
//                       the A fragment layout), V MN-major in shared memory
//     in one of two orders (AttentionTuning::pipelined, bitwise the same output):
//     serial (the default; CUTLASS example 88's order): S_t = Q K_tᵀ, one wait (which also
//       completes P_{t−1} V_{t−1}), the softmax, O · α_t, then P_t V_t issued without a wait; the
//       other warpgroup's MMAs keep the tensor cores busy meanwhile. Measured on the H100 against
//       the pipelined order with ping-pong: +0-7% at S >= 4096, up to 7% slower at S <= 1024
//       (bench/results/README.md, session 18).
//     pipelined (FlashAttention-3's intra-warpgroup order): tile t's QKᵀ is issued before tile
//       t − 1's PV, the softmax of tile t runs while that PV is in flight, and O is rescaled by
//       α_{t−1} between the two issues.
//     Either way O_t = α_t·O_{t−1} + RN_st(P_t)·V_t, the rescale before the MMA that accumulates.
//   out = RN_st(O · (1/l)): with a.tma_store, a warpgroup whose 64 rows are consecutive rows of
//     out stages them in its rows of the job's Q buffer and writes them with TMA stores (its
//     thread 0 waits for their reads before it releases the buffer at the next job's start);
//     other row blocks are written from registers.
//
// The order of every operation is fixed (keys in ascending tiles from the user's first key, MMA
// k-steps in ascending order), so the output is bitwise stable run to run; each output row depends
// only on its Q row and its user's K/V (rows of an MMA are independent), so a candidate with a
// private copy of its user's K/V gets bitwise the same output. wgmma sums its k-steps in a
// different order than mma.sync: results agree with the mma.sync kernel within the attention
// enclosure, not bitwise (docs/ikbo.md).
#pragma once

#include <cstdint>

#include <type_traits>

#include <cuda.h>

#include "dispatch/tuning.h"
#include "kernels/common.cuh"
#include "kernels/ikbo_attention_cta.cuh"
#include "kernels/ikbo_attention_launch.h"
#include "kernels/mma_sync.cuh"
#include "kernels/sm90.cuh"
#include "src/tensor_map.h"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace attention_wgmma {

using namespace sm90;

using Policy = tuning::AttentionWgmma;
constexpr int kBM = Policy::kBlockRows;  // query rows per CTA (the grouping's blocks)
constexpr int kBN = Policy::kKeyBlock;   // keys per tile
constexpr int kThreads = Policy::kThreads;
constexpr int kBoxCols = 64;             // 16-bit elements per 128-byte swizzled row
static_assert(kBM == kAttentionBlockRows && kBM == 128 && kThreads == 384,
              "the roles below: a producer warpgroup and 2 consumer warpgroups of 64 rows");
static_assert(kBN == 128, "S accumulators: wgmma m64n128k16");

/// Shared-memory layout (byte offsets from a 1024-aligned base): 2 Q buffers [kDh / 64 boxes][128
/// rows][128 B] (the current job's and the next one's), kStages K tiles and V tiles [kDh / 64
/// boxes][kBN rows][128 B], then the barriers.
template <int kDh, int kStages>
struct Layout {
  static constexpr int kBoxes = kDh / kBoxCols;
  static constexpr int kQBox = kBM * 128;     // bytes of one 64-column box of Q
  static constexpr int kKVBox = kBN * 128;    // ... of K or V
  static constexpr int kTile = kBoxes * kKVBox;
  static constexpr int kQ = 0;
  static constexpr int kQBuf = kBoxes * kQBox;  // bytes of one Q buffer
  static constexpr int kK = kQ + 2 * kQBuf;
  static constexpr int kV = kK + kStages * kTile;
  // barriers: full_k[S], full_v[S], empty_k[S], empty_v[S], tail, q_full[2], q_empty[2]; then
  // the two job slots (JobSlot: what the Q loader publishes per Q buffer)
  static constexpr int kBars = kV + kStages * kTile;
  static constexpr int kSlots = (kBars + (4 * kStages + 5) * 8 + 15) / 16 * 16;
  static constexpr int kBytes = kSlots + 2 * 64;
  /// Byte offset, from row `row`'s first byte (row · 128) in a Q buffer, of its 16-byte chunk
  /// `chunk` (columns 8·chunk ..): the 128-byte swizzle TMA writes (chunk c of a box row r at
  /// c ^ (r & 7)). The Q loader's cp.async and the epilogue's staging of O use it; TMA and wgmma
  /// read the same layout.
  static constexpr int q_chunk(int row, int chunk) {
    return (((chunk & 7) ^ (row & 7)) << 4) + (chunk >> 3) * kQBox;
  }
  static constexpr int kAlloc = kBytes + 1024;  // the dynamic base is only 16-byte aligned
  static_assert(kDh % kBoxCols == 0, "Dh must be a multiple of 64");
  static_assert(kAlloc <= 227 * 1024, "the CTA's shared memory exceeds sm_90's");
};

using attention_cta::ex2;
using attention_cta::pack2;

template <class T, int kDh>
__device__ __forceinline__ void wgmma_pv(float (&o)[kDh / 2], const std::uint32_t (&a)[4],
                                         std::uint64_t db) {
  if constexpr (kDh == 128) wgmma_rs_n128<T>(o, a, db, 1);
  else wgmma_rs_n64<T>(o, a, db, 1);
}

/// What the Q loader warp publishes for a job in its Q buffer's slot (shared memory, with q_full):
/// the job's work item and key range, and per consumer warpgroup the out row of its first row and
/// whether its 64 rows are 64 consecutive rows of out (the TMA-store epilogue, a.tma_store).
struct JobSlot {
  attention_cta::Cta cta;
  std::int32_t row0[2] = {0, 0};
  std::int32_t tma_store[2] = {0, 0};
};
static_assert(sizeof(JobSlot) <= 64 && alignof(JobSlot) <= 16,
              "Layout::kSlots reserves 64 bytes a slot, 16-byte aligned");

/// Field x of a job slot in shared memory as lane 0 of the warp reads it (a volatile load, so the
/// compiler does not speculate it onto the other lanes), given to every lane by shuffle.
template <class V>
__device__ __forceinline__ V slot_field_lane0(const V& x, int lane) {
  V v = 0;
  if (lane == 0) v = *static_cast<const volatile V*>(&x);
  return __shfl_sync(0xffffffffu, v, 0);
}

/// What a consumer warp takes from job slot `slot` for its warpgroup cw. Lane 0 alone reads the
/// slot, so the only reader a slot has per consumer warp is the lane that releases the buffer
/// (q_empty) after the read, and the Q loader's rewrite for a later job is ordered after every
/// read by that lane's own arrival. (With all 32 lanes reading and lane 0 arriving after
/// __syncwarp, compute-sanitizer racecheck reported the reads of lanes 1-31, never lane 0's: it
/// orders a thread's accesses by that thread's own arrivals.)
struct JobView {
  attention_cta::Cta cta;
  bool tma_out = false;         ///< the warpgroup's rows leave by TMA store
  std::int32_t out_row0 = 0;    ///< the warpgroup's first row of out (when tma_out)
};
__device__ __forceinline__ JobView read_job_lane0(const JobSlot& slot, int cw, int lane) {
  // every field of Cta is copied below: a field added to it (or to AttentionWorkItem) changes
  // these sizes and must be added here too
  static_assert(sizeof(AttentionWorkItem) == 4 * sizeof(std::int32_t) &&
                    sizeof(attention_cta::Cta) == 48,
                "read_job_lane0 copies AttentionWorkItem's 4 fields and Cta's h, k_begin, n");
  JobView v;
  v.cta.item.user = slot_field_lane0(slot.cta.item.user, lane);
  v.cta.item.cand0 = slot_field_lane0(slot.cta.item.cand0, lane);
  v.cta.item.row0 = slot_field_lane0(slot.cta.item.row0, lane);
  v.cta.item.rows = slot_field_lane0(slot.cta.item.rows, lane);
  v.cta.h = slot_field_lane0(slot.cta.h, lane);
  v.cta.k_begin = slot_field_lane0(slot.cta.k_begin, lane);
  v.cta.n = slot_field_lane0(slot.cta.n, lane);
  v.tma_out = slot_field_lane0(slot.tma_store[cw], lane) != 0;
  v.out_row0 = slot_field_lane0(slot.row0[cw], lane);
  return v;
}

/// Per consumer thread: the online-softmax state of its two rows (gq, gq + 8 of its warp's 16).
struct RowState {
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
};

/// Masks keys >= n of the tile (column of accumulator element d[4j + e]: 8j + 2·cq + (e & 1)),
/// updates m, l and turns s into P (FP32), returns α per row.
template <class Args>
__device__ __forceinline__ void softmax_tile(float (&s)[kBN / 2], RowState& st, float (&alpha)[2],
                                             std::int64_t key0, std::int64_t n, int cq, float c2,
                                             const Args& a) {
  (void)a;
  if (key0 + kBN > n) {
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key0 + j * 8 + 2 * cq + (e & 1) >= n) s[4 * j + e] = -INFINITY;
  }
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float mx = st.m[hr];
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * hr], s[4 * j + 2 * hr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // every tile has a key < n: mx is finite for finite inputs; the first tile's m = −inf gives
    // α = 0 (O and l are 0); an unchanged maximum gives α = 1 exactly
    alpha[hr] = TBE_MUTANT_SWAP(a, kAttnNoRescale, 1.0f, ex2((st.m[hr] - mx) * c2));
    st.m[hr] = mx;
    const float mc = mx * c2;
    float rs = 0.0f;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = ex2(fmaf(s[4 * j + 2 * hr + e], c2, -mc));
        s[4 * j + 2 * hr + e] = p;
        rs += p;
      }
    st.l[hr] = fmaf(st.l[hr], alpha[hr], rs);
  }
}

/// P (FP32, accumulator layout) rounded to T and packed as the A fragments of the PV k-steps:
/// k-step kt covers keys 16kt .. 16kt + 15 = accumulator blocks 2kt, 2kt + 1.
template <class T>
__device__ __forceinline__ void pack_p(const float (&s)[kBN / 2], std::uint32_t (&p)[kBN / 16][4]) {
#pragma unroll
  for (int kt = 0; kt < kBN / 16; ++kt) {
    p[kt][0] = pack2<T>(s[8 * kt + 0], s[8 * kt + 1]);  // row g, keys 2c, 2c + 1
    p[kt][1] = pack2<T>(s[8 * kt + 2], s[8 * kt + 3]);  // row g + 8
    p[kt][2] = pack2<T>(s[8 * kt + 4], s[8 * kt + 5]);  // row g, keys 8 + 2c ..
    p[kt][3] = pack2<T>(s[8 * kt + 6], s[8 * kt + 7]);  // row g + 8
  }
}

template <class T, int kDh, int kStages, bool kPingpong, bool kPipelined>
__global__ void __launch_bounds__(kThreads, 1)
    attention_fwd_wgmma_kernel(const AttentionArgs a, const __grid_constant__ CUtensorMap tm_k,
                               const __grid_constant__ CUtensorMap tm_v,
                               const __grid_constant__ CUtensorMap tm_q,
                               const __grid_constant__ CUtensorMap tm_o) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using LY = Layout<kDh, kStages>;
  if (fatal_aborted(a.map_error)) return;
  // persistent: job j = (work item j % items, head j / items), CTA c takes jobs c, c + grid, ...
  const std::int64_t items = a.grouping.work_end[a.runs - 1];
  const std::int64_t jobs = items * a.H;
  const std::int64_t first_job = blockIdx.x, job_step = gridDim.x;
  if (first_job >= jobs) return;
  auto job_cta = [&](std::int64_t j) {
    return attention_cta::load_cta(a, j % items, static_cast<int>(j / items));
  };
  auto tiles_of = [&](std::int64_t n) -> std::int64_t {
    return TBE_MUTANT_SWAP(a, kAttnLastKeyTileDropped, n / kBN, (n + kBN - 1) / kBN);
  };
  T* __restrict__ out = static_cast<T*>(a.out);
  const int t = static_cast<int>(threadIdx.x);
  constexpr int kChunks = kDh / 8;

  extern __shared__ __align__(16) unsigned char wg_smem_raw[];
  const std::uint32_t raw = smem_addr(wg_smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* smem = wg_smem_raw + (base - raw);
  auto full_k = [&](int s) { return base + LY::kBars + 8u * s; };
  auto full_v = [&](int s) { return base + LY::kBars + 8u * (kStages + s); };
  auto empty_k = [&](int s) { return base + LY::kBars + 8u * (2 * kStages + s); };
  auto empty_v = [&](int s) { return base + LY::kBars + 8u * (3 * kStages + s); };
  const std::uint32_t tail = base + LY::kBars + 8u * (4 * kStages);
  auto q_full = [&](int b) { return base + LY::kBars + 8u * (4 * kStages + 1 + b); };
  auto q_empty = [&](int b) { return base + LY::kBars + 8u * (4 * kStages + 3 + b); };
  JobSlot* const slots = reinterpret_cast<JobSlot*>(smem + LY::kSlots);
  if (t == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_k(s), 1);
      mbar_init(full_v(s), 1);
      mbar_init(empty_k(s), 8);  // one arrival per consumer warp
      mbar_init(empty_v(s), 8);
    }
    mbar_init(tail, 1);
    for (int b = 0; b < 2; ++b) {
      mbar_init(q_full(b), 1);   // the Q loader's arrival (+ its TMA bytes)
      mbar_init(q_empty(b), 8);  // one arrival per consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();

  const int wg = t / 128, lane = t & 31;
  if (wg == 0) {
    setmaxnreg_dec<40>();
    const int warp0 = t >> 5;
    if (warp0 == 0) {
      // ---------------- K/V producer ----------------
      // The ring runs on across jobs: tile g of the CTA (counted over all its jobs) uses stage
      // g % kStages in round g / kStages, so the next job's first tiles load while the consumers
      // finish the current one. The tail barrier completes once per partial tile (parity: count).
      std::uint64_t g = 0;
      std::uint32_t tails = 0;
      for (std::int64_t job = first_job; job < jobs; job += job_step) {
        const attention_cta::Cta cta = job_cta(job);
        const std::int64_t n = cta.n, n_tiles = tiles_of(n);
        const int col0 = cta.h * kDh;
        for (std::int64_t tile = 0; tile < n_tiles; ++tile, ++g) {
          const int s = static_cast<int>(g % kStages);
          const std::uint32_t round = static_cast<std::uint32_t>(g / kStages);
          // K and V of a stage are released separately: K as soon as both warpgroups' QKᵀ of its
          // tile completed (a tile earlier than V), so the next K load is never behind a PV
          if (g >= kStages)
            mbar_wait(empty_k(s), TBE_MUTANT_SWAP(a, kAttnWgmmaEmptyParity, round & 1u, (round - 1) & 1u));
          const std::int32_t key0 = static_cast<std::int32_t>(cta.k_begin + tile * kBN);
          const std::uint32_t sk = base + LY::kK + s * LY::kTile, sv = base + LY::kV + s * LY::kTile;
          if (lane == 0) {
            mbar_arrive_expect_tx(full_k(s), LY::kTile);
#pragma unroll
            for (int b = 0; b < LY::kBoxes; ++b)
              tma_load_2d(sk + b * LY::kKVBox, &tm_k, col0 + b * kBoxCols, key0, full_k(s));
          }
          if (g >= kStages)
            mbar_wait(empty_v(s), TBE_MUTANT_SWAP(a, kAttnWgmmaEmptyParity, round & 1u, (round - 1) & 1u));
          const std::int64_t left = n - tile * kBN;
          const int valid = left < kBN ? static_cast<int>(left) : kBN;
          if (valid == kBN) {
            if (lane == 0) {
              mbar_arrive_expect_tx(full_v(s), LY::kTile);
#pragma unroll
              for (int b = 0; b < LY::kBoxes; ++b)
                tma_load_2d(sv + b * LY::kKVBox, &tm_v, col0 + b * kBoxCols, key0, full_v(s));
            }
          } else {  // the job's last, partial tile: zero V rows >= valid
            if (lane == 0) {
              mbar_arrive_expect_tx(tail, LY::kTile);
#pragma unroll
              for (int b = 0; b < LY::kBoxes; ++b)
                tma_load_2d(sv + b * LY::kKVBox, &tm_v, col0 + b * kBoxCols, key0, tail);
            }
            mbar_wait(tail, tails & 1u);
            ++tails;
            unsigned char* v_tile = smem + LY::kV + s * LY::kTile;
            for (int idx = lane; idx < LY::kBoxes * (kBN - valid) * 8; idx += 32) {
              const int b = idx / ((kBN - valid) * 8), rest = idx % ((kBN - valid) * 8);
              const int row = valid + rest / 8, chunk = rest % 8;
              *reinterpret_cast<uint4*>(v_tile + b * LY::kKVBox + row * 128 + chunk * 16) =
                  make_uint4(0, 0, 0, 0);
            }
            fence_proxy_async_smem();
            __syncwarp();
            if (lane == 0) mbar_arrive(full_v(s));
          }
        }
      }
    } else if (warp0 == 1) {
      // ---------------- Q loader ----------------
      // Job i of the CTA (i = 0, 1, ...) uses Q buffer i % 2: once all 8 consumer warps
      // released the buffer's previous job (q_empty), the loader reads the job's work item and
      // key range, finds where each warpgroup's rows are (their out rows: the rows of q), loads
      // them (a TMA box of 64 rows per 64-column box when the rows are consecutive rows of q,
      // else cp.async with rows past the item zero-filled) and publishes the job in the buffer's
      // slot, completing q_full. A whole job ahead of the consumers, so they never wait on a
      // global load at a job's start.
      const T* __restrict__ q = static_cast<const T*>(a.q);
      const std::int64_t HD = static_cast<std::int64_t>(a.H) * kDh;
      std::uint32_t i = 0;
      for (std::int64_t job = first_job; job < jobs; job += job_step, ++i) {
        const int qb = static_cast<int>(i & 1u);
        if (i >= 2) mbar_wait_sleep(q_empty(qb), ((i >> 1) - 1) & 1u);  // a job of slack
        JobSlot& slot = slots[qb];  // free: its last reader released the buffer
        const attention_cta::Cta cta = job_cta(job);
        if (lane == 0) slot.cta = cta;
        std::uint32_t tma_halves = 0;  // bit cw: warpgroup cw's rows are consecutive rows of q
        if (cta.n > 0) {
#pragma unroll 1
          for (int cw = 0; cw < 2; ++cw) {
            const int rows_cw = min(max(cta.item.rows - 64 * cw, 0), 64);
            std::int64_t r0 = 0;
            bool consecutive = false;
            if (rows_cw > 0) {  // else the warpgroup's results are never stored
              r0 = cta.out_row(a, 64 * cw);
              bool mine = true;
#pragma unroll 1
              for (int r = lane; r < rows_cw; r += 32) mine = mine && cta.out_row(a, 64 * cw + r) == r0 + r;
              consecutive = __all_sync(0xffffffffu, mine);
            }
            if (consecutive) tma_halves |= 1u << cw;
            if (lane == 0) {
              slot.row0[cw] = static_cast<std::int32_t>(r0);
              slot.tma_store[cw] = a.tma_store && consecutive && rows_cw == 64;
            }
          }
          if (lane == 0 && tma_halves != 0) {
            mbar_expect_tx(q_full(qb), __popc(tma_halves) * LY::kBoxes * 64 * 128);
#pragma unroll 1
            for (int cw = 0; cw < 2; ++cw)
              if (tma_halves & (1u << cw))
#pragma unroll
                for (int b = 0; b < LY::kBoxes; ++b)
                  tma_load_2d(base + LY::kQ + qb * LY::kQBuf + b * LY::kQBox + 64 * cw * 128,
                              &tm_q, cta.h * kDh + b * kBoxCols, slot.row0[cw], q_full(qb));
          }
          bool copied = false;
#pragma unroll 1
          for (int cw = 0; cw < 2; ++cw) {
            const int rows_cw = min(max(cta.item.rows - 64 * cw, 0), 64);
            if (rows_cw == 0 || (tma_halves & (1u << cw))) continue;
            copied = true;
#pragma unroll 1
            for (int r = lane; r < 64; r += 32) {  // rows past the item zero-filled
              const int row = 64 * cw + r;
              const bool ok = r < rows_cw;
              const T* src = ok ? q + cta.out_row(a, row) * HD + cta.h * kDh : q;
              unsigned char* dst = smem + LY::kQ + qb * LY::kQBuf + row * 128;
#pragma unroll 1
              for (int ch = 0; ch < kChunks; ++ch)
                cp_async16(dst + LY::q_chunk(row, ch), ok ? src + ch * 8 : q, ok ? 16 : 0);
            }
          }
          if (copied) {
            cp_async_commit();
            cp_async_wait<0>();
            fence_proxy_async_smem();  // the consumers' wgmma (async proxy) reads these rows
          }
        } else if (lane == 0) {
          slot.tma_store[0] = slot.tma_store[1] = 0;
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(q_full(qb));  // release: the slot, and the rows copied above
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  setmaxnreg_inc<232>();
  const int cw = wg - 1;                   // consumer warpgroup: rows [64cw, 64cw + 64)
  const int tw = t - 128 * wg;             // thread in the warpgroup
  const int warp = tw >> 5;                // warp in the warpgroup: rows 16·warp ..
  const int gq = lane >> 2, cq = lane & 3;
  const float c2 = a.scale_log2;
  float o[kDh / 2];
  float s[kBN / 2];
  std::uint32_t p[kBN / 16][4];
  float alpha[2];

  // Descriptors (sm90.cuh smem_desc_lo): the low words of this warpgroup's rows of Q buffer 0, of
  // K stage 0 and of V stage 0, computed once (warp-uniform: shuffled from lane 0); a tile's and
  // a k-step's descriptors add compile-time byte offsets >> 4. Rebuilding each k-step's descriptor
  // from its address (mask, shift, or) cost ~3 instructions of the ~9 per wgmma (ncu, session 14).
  const std::uint32_t q_lo = __shfl_sync(0xffffffffu, smem_desc_lo(base + LY::kQ + cw * 64 * 128, 16), 0);
  const std::uint32_t k_lo = __shfl_sync(0xffffffffu, smem_desc_lo(base + LY::kK, 16), 0);
  const std::uint32_t v_lo = __shfl_sync(0xffffffffu, smem_desc_lo(base + LY::kV, LY::kKVBox), 0);
  auto issue_qk = [&](int stage, int qb) {
    const std::uint32_t qd = q_lo + ((qb * LY::kQBuf) >> 4), kd = k_lo + ((stage * LY::kTile) >> 4);
    fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDh / 16; ++kk) {
      const std::uint32_t off = (kk % 4) * 32;  // 16 elements = 32 bytes into the 128-byte row
      wgmma_ss_n128<T>(s, smem_desc_sw128(qd + (((kk / 4) * LY::kQBox + off) >> 4)),
                       smem_desc_sw128(kd + (((kk / 4) * LY::kKVBox + off) >> 4)), kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int stage) {
    const std::uint32_t vd = v_lo + ((stage * LY::kTile) >> 4);
    fence_regs(o);
    wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBN / 16; ++kt)
      wgmma_pv<T, kDh>(o, p[kt], smem_desc_sw128(vd + ((kt * 16 * 128) >> 4)));
    wgmma_commit();
  };
  // O · α, unconditionally: a warp-uniform skip when every α of the warp is 1 (bitwise the same)
  // measured 2–7% slower at S >= 4096 (H200, session 14: bench/results/README.md)
  auto rescale = [&]() {
#pragma unroll
    for (int j = 0; j < kDh / 8; ++j) {
      o[4 * j + 0] *= alpha[0];
      o[4 * j + 1] *= alpha[0];
      o[4 * j + 2] *= alpha[1];
      o[4 * j + 3] *= alpha[1];
    }
  };
  auto release_k = [&](int stage) {
    if (lane == 0) mbar_arrive(empty_k(stage));
  };
  auto release_v = [&](int stage) {
    if (lane == 0) mbar_arrive(empty_v(stage));
  };
  // kPingpong (AttentionTuning::pingpong): the two consumer warpgroups take turns issuing their
  // MMAs (named barriers 3 + cw: a warpgroup waits for its turn, issues, hands the turn over), so
  // one warpgroup's softmax runs while the other's MMAs use the tensor cores. In every job with key
  // tiles each warpgroup has n_tiles + 1 turns in the pipelined order, one (the job's first QKᵀ,
  // as CUTLASS orders) in the serial order; warpgroup 0 first. Warpgroup 1 hands its last turn
  // of a job over to warpgroup 0's first of the next job when that one has key tiles (so
  // warpgroup 0's next QKᵀ is not behind warpgroup 1's last PV, output stores and job setup), else
  // it grants that first turn when the next job with tiles starts: one arrival per turn, so the
  // arrivals balance over the CTA's jobs.
  auto turn_wait = [&] {
    if constexpr (kPingpong) named_barrier_sync(3 + cw, 256);
  };
  auto turn_pass = [&](bool keep) {  // keep: warpgroup 1's last turn with no next job to hand to
    if constexpr (kPingpong) {
      if (!(keep && cw == 1)) named_barrier_arrive(3 + (1 - cw), 256);
    }
  };
  // Job i of the CTA is in Q buffer i % 2 (the loader's slot); each consumer warp releases it
  // (q_empty) when it starts job i + 1, after its TMA store of job i read the buffer.
  auto slot_ready = [&](std::uint32_t i) { mbar_wait(q_full(static_cast<int>(i & 1u)), (i >> 1) & 1u); };

  std::uint64_t g0 = 0;        // ring tiles of the CTA's earlier jobs (as the producer counts)
  bool turn_granted = false;   // warpgroup 1 handed its last turn of the previous job over
  std::uint32_t i = 0;
  for (std::int64_t job = first_job; job < jobs; job += job_step, ++i) {
    const int qb = static_cast<int>(i & 1u);
    slot_ready(i);
    const JobView view = read_job_lane0(slots[qb], cw, lane);
    const attention_cta::Cta cta = view.cta;
    const bool tma_out = view.tma_out;
    const std::int32_t out_row0 = view.out_row0;
    if (i > 0) {  // the previous job's buffer: no QKᵀ or TMA store reads it any more
      // one arrival per consumer warp, by the lane that read the slot (read_job_lane0): an
      // empty-key job has no wgmma or named barrier that would order a warp's read before
      // another warp's arrival; __syncwarp orders the warp's earlier shared-memory accesses
      if (tw == 0) bulk_wait_group_read<0>();
      __syncwarp();
      if (lane == 0) mbar_arrive(q_empty(qb ^ 1));
    }
    const int rows = cta.item.rows;
    const std::int64_t n = cta.n;
    if (n == 0) {  // empty key range: exact zeros (docs/ikbo.md)
      attention_cta::store_zero_rows<T, kDh>(a, cta, out, t - 128, 256);
      continue;
    }
    const std::int64_t n_tiles = tiles_of(n);
    RowState st;
#pragma unroll
    for (int k = 0; k < kDh / 2; ++k) o[k] = 0.0f;
    auto stage_of = [&](std::int64_t tile) { return static_cast<int>((g0 + tile) % kStages); };
    auto parity_of = [&](std::int64_t tile) {
      return static_cast<std::uint32_t>((g0 + tile) / kStages) & 1u;
    };
    if constexpr (kPingpong) {  // the first turn: warpgroup 0
      if (cw == 1 && n_tiles > 0 && !turn_granted) named_barrier_arrive(3, 256);
    }
    turn_granted = false;
    // does the next job have key tiles (warpgroup 1 hands its last turn of this job to it)? Its
    // slot is the loader's, a job ahead: waiting here costs nothing the next job would not wait
    auto next_job_has_tiles = [&]() {
      if (job + job_step >= jobs) return false;
      slot_ready(i + 1);
      return tiles_of(slot_field_lane0(slots[qb ^ 1].cta.n, lane)) > 0;
    };
    // the job's last PV completes: O is final, its V stage free
    auto finish_last_pv = [&](int stage) {
      wgmma_wait<0>();
      fence_regs(o);
      release_v(stage);
    };
    if (n_tiles > 0) {
      if constexpr (!kPipelined) {
        // per tile: S_t = Q K_tᵀ (waits for P_{t−1} V_{t−1} too), softmax, O · α_t, O += P_t V_t
        // issued without a wait (the other warpgroup's MMAs fill the tensor cores meanwhile)
        for (std::int64_t tile = 0; tile < n_tiles; ++tile) {
          const int sc = stage_of(tile);
          mbar_wait(full_k(sc), parity_of(tile));
          if (tile == 0) turn_wait();
          issue_qk(sc, qb);
          if (tile == 0 && cw == 0) turn_pass(false);
          wgmma_wait<0>();
          fence_regs(s);
          fence_regs(o);
          fence_regs(p);
          release_k(sc);
          if (tile > 0) release_v(stage_of(tile - 1));
          softmax_tile(s, st, alpha, tile * kBN, n, cq, c2, a);
          rescale();
          pack_p<T>(s, p);
          mbar_wait(full_v(sc), parity_of(tile));
          fence_regs(p);
          issue_pv(sc);
        }
        const bool next_has_tiles = next_job_has_tiles();
        if (cw == 1) turn_pass(!next_has_tiles);
        turn_granted = next_has_tiles;
        finish_last_pv(stage_of(n_tiles - 1));
      } else {
        // tile 0: S, softmax, P
        mbar_wait(full_k(stage_of(0)), parity_of(0));
        turn_wait();
        issue_qk(stage_of(0), qb);
        turn_pass(false);
        wgmma_wait<0>();
        fence_regs(s);
        release_k(stage_of(0));
        softmax_tile(s, st, alpha, 0, n, cq, c2, a);
        pack_p<T>(s, p);  // (α = 0: O is still 0, the rescale before the first PV keeps it 0)
        for (std::int64_t tile = 1; tile < n_tiles; ++tile) {
          const int sc = stage_of(tile), sp = stage_of(tile - 1);
          mbar_wait(full_k(sc), parity_of(tile));
          mbar_wait(full_v(sp), parity_of(tile - 1));
          fence_regs(p);
          turn_wait();
          issue_qk(sc, qb);                  // S_t = Q K_tᵀ
          rescale();                         // O · α_{t−1} while S_t runs, before P_{t−1} V_{t−1}
          issue_pv(sp);                      // O += P_{t−1} V_{t−1}
          turn_pass(false);
          wgmma_wait<1>();                   // S_t landed (PV still in flight): K_t is free
          fence_regs(s);
          release_k(sc);
          softmax_tile(s, st, alpha, tile * kBN, n, cq, c2, a);
          wgmma_wait<0>();                   // PV done: O, P and stage sp are free
          fence_regs(o);
          fence_regs(p);
          release_v(sp);
          pack_p<T>(s, p);
        }
        const bool next_has_tiles = next_job_has_tiles();
        const int sl = stage_of(n_tiles - 1);
        mbar_wait(full_v(sl), parity_of(n_tiles - 1));
        fence_regs(p);
        turn_wait();
        rescale();  // O · α of the last tile
        issue_pv(sl);
        turn_pass(!next_has_tiles);
        turn_granted = next_has_tiles;
        finish_last_pv(sl);
      }
    }
    g0 += static_cast<std::uint64_t>(n_tiles);

    // ---- out = RN_st(O · (1/l)) ----
    float inv[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float lsum = st.l[hr];
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
      inv[hr] = 1.0f / lsum;
    }
    // this thread's columns 8j + 2·cq, + 1 of its row hr (gq, gq + 8), rounded to T and packed:
    // what either epilogue writes
    auto out_pair = [&](int hr, int j) {
      return pack2<T>(o[4 * j + 2 * hr] * inv[hr], o[4 * j + 2 * hr + 1] * inv[hr]);
    };
    if (tma_out) {
      // staged in this warpgroup's rows of the job's Q buffer (every QKᵀ that read it is done), in
      // the layout TMA reads (the 16-byte chunk c of row r at c ^ (r & 7): conflict-free, each
      // store instruction's 8 rows hit 8 different chunks), then one TMA store per 64-column box
      unsigned char* qbuf = smem + LY::kQ + qb * LY::kQBuf;
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int r = 64 * cw + warp * 16 + gq + 8 * hr;
#pragma unroll
        for (int j = 0; j < kDh / 8; ++j)
          *reinterpret_cast<std::uint32_t*>(qbuf + r * 128 + LY::q_chunk(r, j) + 4 * cq) =
              out_pair(hr, j);
      }
      fence_proxy_async_smem();
      named_barrier_sync(1 + cw, 128);
      if (tw == 0) {
        const std::uint32_t src = base + LY::kQ + qb * LY::kQBuf + 64 * cw * 128;
#pragma unroll
        for (int b = 0; b < LY::kBoxes; ++b)
          tma_store_2d(&tm_o, cta.h * kDh + b * kBoxCols,
                       TBE_MUTANT_SWAP(a, kAttnTmaStoreRowShift, out_row0 + 1, out_row0),
                       src + b * LY::kQBox);
        bulk_commit_group();
        if (a.epilogue_counts != nullptr) atomicAdd(a.epilogue_counts, 1ull);
      }
    } else {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int r = 64 * cw + warp * 16 + gq + 8 * hr;
        if (r >= rows) continue;
        T* orow = out + cta.row_offset<kDh>(a, r) + 2 * cq;
#pragma unroll
        for (int j = 0; j < kDh / 8; ++j)
          *reinterpret_cast<std::uint32_t*>(orow + j * 8) = out_pair(hr, j);
      }
      if (tw == 0 && a.epilogue_counts != nullptr && 64 * cw < rows)
        atomicAdd(a.epilogue_counts + 1, 1ull);
    }
  }
  // every TMA store of the warpgroup completes (reads and global writes) before the CTA and its
  // shared memory end (no bulk group: no wait)
  if (tw == 0) bulk_wait_group<0>();
#else
  (void)a;
  (void)tm_k;
  (void)tm_v;
  (void)tm_q;
  (void)tm_o;
  __trap();  // compiled for sm_90a only (AttentionOp selects this kernel on such devices)
#endif
}

/// Launches attention_fwd_wgmma_kernel<T, kDh, Policy::stages(kDh), a.pingpong, a.pipelined> for
/// a.Dh (64 or 128).
template <class T>
void launch_fwd_wgmma_typed(const AttentionArgs& a, cudaStream_t stream) {
  const bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  const std::int64_t HD = static_cast<std::int64_t>(a.H) * a.Dh;
  // K, V [total_keys, H·Dh]: boxes of 64 columns × kBN keys (zeros past the last key). With no
  // keys at all every CTA writes zeros and issues no copy, and k, v may be null: the maps are
  // encoded over the first row of `out` (B >= 1, so it holds H·Dh elements), never read.
  const bool no_keys = a.total_keys <= 0;
  const std::int64_t rows = no_keys ? 1 : a.total_keys;
  const CUtensorMap tk =
      make_tensor_map_2d_swizzle128(no_keys ? a.out : a.k, bf16, rows, HD, kBoxCols, kBN);
  const CUtensorMap tv =
      make_tensor_map_2d_swizzle128(no_keys ? a.out : a.v, bf16, rows, HD, kBoxCols, kBN);
  // q and out [B·n_seed, H·Dh] in boxes of 64 columns × 64 rows (one consumer warpgroup's rows):
  // the Q loader's TMA loads of consecutive rows, the epilogue's TMA stores (a.tma_store)
  const CUtensorMap tq =
      make_tensor_map_2d_swizzle128(a.q, bf16, a.B * a.n_seed, HD, kBoxCols, kBM / 2);
  const CUtensorMap to =
      make_tensor_map_2d_swizzle128(a.out, bf16, a.B * a.n_seed, HD, kBoxCols, kBM / 2);
  auto go = [&](auto kernel, int smem) {
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
               "ikbo attention (wgmma): shared memory size");
    // persistent: one CTA per SM (its shared memory and registers allow no second), never more
    // than the jobs' upper bound (work slots × heads)
    const std::int64_t jobs = static_cast<std::int64_t>(a.grouping.work_slots) * a.H;
    const auto grid = static_cast<unsigned>(jobs < a.persistent_ctas ? jobs : a.persistent_ctas);
    kernel<<<grid, kThreads, smem, stream>>>(a, tk, tv, tq, to);
    check_launch("ikbo attention forward (wgmma)");
  };
  // (Dh, a.pingpong, a.pipelined): one instantiation each
  auto pick = [&](auto dh) {
    constexpr int kD = decltype(dh)::value, kS = Policy::stages(kD);
    using L = Layout<kD, kS>;
    if (a.pingpong) {
      if (a.pipelined) return go(attention_fwd_wgmma_kernel<T, kD, kS, true, true>, L::kAlloc);
      return go(attention_fwd_wgmma_kernel<T, kD, kS, true, false>, L::kAlloc);
    }
    if (a.pipelined) return go(attention_fwd_wgmma_kernel<T, kD, kS, false, true>, L::kAlloc);
    go(attention_fwd_wgmma_kernel<T, kD, kS, false, false>, L::kAlloc);
  };
  if (a.Dh == 64) return pick(std::integral_constant<int, 64>{});
  pick(std::integral_constant<int, 128>{});
}

}  // namespace attention_wgmma
}  // namespace tbe::cuda::detail
