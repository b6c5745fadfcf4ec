// IKBO LCE stage 3: the candidate GEMM with the gather-add in its epilogue (tensor cores, mma.sync).
//
//   out[b] (M×N) = round( W_c (M×K) · E_c[b] (K×N)  ⊕  user[u(b)] )      per policy:
//     RoundOnce: round(acc + user_fp32);  Published: round(float(round(acc)) + float(user_16));
//     UserRounded: round(acc + float(user_16)) (FP32 add, one rounding to 16 bits).
//
// Tiling: one CTA per (candidate b, 64-row M tile, 256-column N tile); 8 warps in a 2 (M) × 4 (N)
// grid, each warp owns 32 × 64 outputs = 2 × 8 mma.m16n8k16 tiles (64 FP32 accumulators per
// thread). K advances in steps of 32 through a 4-stage cp.async pipeline (20 KB of shared memory
// per stage: A 64×32, B 32×256). Shared tiles are XOR-swizzled by 16-byte chunk so that both the
// cp.async writes and the ldmatrix reads (A: x4; B: x4.trans, since E_c is K-major rows of N) are
// free of bank conflicts. BM = 64 wastes 3% of the M = 433 rows of the published shape (BM = 128
// would waste 15%); N = 256 is one tile.
// Why mma.sync and not wgmma: a hand-written warp-specialized TMA/wgmma kernel is stage 4's
// territory (optimized/README.md records the measurements that decide it).
// Bounds: M and N tails are predicated (zero-filled loads, masked stores); the K tail (K is not
// padded in E_c) is zero-filled on both operands, so W_c's padding columns are never used.
#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/common.cuh"
#include "kernels/ikbo_lce_launch.h"
#include "kernels/mma_sync.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

using Policy = tuning::LceFusedGemm;
constexpr int kBM = Policy::kTileM, kBN = Policy::kTileN, kBK = Policy::kTileK;
constexpr int kStages = Policy::kStages, kThreads = Policy::kThreads;
constexpr int kWM = Policy::kWarpTileM, kWN = Policy::kWarpTileN;  // warp tile
// The index arithmetic below is written for this shape (thread -> 16-byte chunk maps of load_tile,
// the swizzles of a_off / b_off, the 2 (M) x 4 (N) warp grid).
static_assert(kBM == 64 && kBN == 256 && kBK == 32 && kThreads == 256 && kWM == 32 && kWN == 64,
              "ikbo_lce_fused.cu's index arithmetic assumes the 64x256x32 tile of 8 warps");
constexpr int kMI = kWM / 16, kNI = kWN / 8;       // mma tiles per warp: 2 × 8
constexpr int kAStage = kBM * kBK, kBStage = kBK * kBN;  // elements per stage
constexpr int kSmemBytes = kStages * (kAStage + kBStage) * 2;  // 80 KB

/// Swizzled element offsets inside one stage. A: [64 rows m][4 chunks of 8 k] (64 B rows, two per
/// 128 B line); B: [32 rows k][32 chunks of 8 n] (512 B rows).
__device__ __forceinline__ int a_off(int m, int c) { return m * kBK + ((c ^ ((m >> 1) & 3)) << 3); }
__device__ __forceinline__ int b_off(int k, int c) { return k * kBN + ((c ^ (k & 7)) << 3); }

/// Loads the k tile starting at k0 of candidate b into stage buffers sA, sB.
/// kVecB: 16-byte cp.async of E_c chunks (N % 8 == 0, aligned); else scalar loads + shared stores.
template <class T, bool kVecB>
__device__ __forceinline__ void load_tile(T* sA, T* sB, const T* __restrict__ w, std::int64_t ld_w,
                                          const T* __restrict__ e_b, int m0, int n0, int k0, int M,
                                          int N, int K) {
  const int t = threadIdx.x;
  {  // A: 64 rows × 4 chunks, one chunk per thread
    const int row = t >> 2, c = t & 3;
    const int gm = m0 + row, gk = k0 + c * 8;
    int bytes = 0;
    const T* src = w;
    if (gm < M && gk < K) {
      bytes = min(16, (K - gk) * 2);
      src = w + static_cast<std::int64_t>(gm) * ld_w + gk;
    }
    cp_async16(sA + a_off(row, c), src, bytes);
  }
  // B: 32 rows × 32 chunks, 4 per thread: rows r0 + 8i of one chunk column c (the swizzle
  // depends on row & 7 only, so one shared offset + i·8 rows serves all four).
  const int r0 = t >> 5, c = t & 31;
  const int gn = n0 + c * 8;
  T* dst = sB + b_off(r0, c);
  const T* src = e_b + static_cast<std::int64_t>(k0 + r0) * N + gn;
#pragma unroll
  for (int i = 0; i < (kBK * kBN / 8) / kThreads; ++i) {
    const int gk = k0 + r0 + 8 * i;
    const T* s_i = src + static_cast<std::int64_t>(8 * i) * N;
    if constexpr (kVecB) {
      const bool ok = gk < K && gn < N;
      cp_async16(dst + 8 * i * kBN, ok ? s_i : e_b, ok ? 16 : 0);
    } else {
      T v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = (gk < K && gn + j < N) ? s_i[j] : T{};
      *reinterpret_cast<uint4*>(dst + 8 * i * kBN) = *reinterpret_cast<const uint4*>(v);
    }
  }
}

template <class T, LceAdd kAdd, bool kVecB>
__global__ void __launch_bounds__(kThreads, Policy::kMinBlocksPerSm)
    lce_fused_kernel(const T* __restrict__ w, std::int64_t ld_w, const T* __restrict__ e,
                     const void* __restrict__ user_v, const std::int32_t* __restrict__ map,
                     T* __restrict__ out, std::int64_t B, int M, int N, int K, int m_tiles,
                     const unsigned long long* map_error TBE_MUTANT_PARAM(m)) {
  if (fatal_aborted(map_error)) return;
  extern __shared__ __align__(128) unsigned char lce_smem[];
  T* sA = reinterpret_cast<T*>(lce_smem);
  T* sB = sA + kStages * kAStage;
  using U = std::conditional_t<kAdd == LceAdd::RoundOnce, float, T>;  // user result type
  const U* user = static_cast<const U*>(user_v);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp >> 2, wn = warp & 3;
  const int m0 = (blockIdx.x % m_tiles) * kBM, n0 = (blockIdx.x / m_tiles) * kBN;
  const int k_tiles = TBE_MUTANT_SWAP(m, kLceFusedKTailDropped, K / kBK, (K + kBK - 1) / kBK);
  const std::int64_t MN = static_cast<std::int64_t>(M) * N;

  for (std::int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const T* e_b = e + b * static_cast<std::int64_t>(K) * N;
    float acc[kMI][kNI][4];
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < kNI; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < k_tiles)
        load_tile<T, kVecB>(sA + s * kAStage, sB + s * kBStage, w, ld_w, e_b, m0, n0, s * kBK, M, N, K);
      cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const int next = kt + kStages - 1;
      if (next < k_tiles) {
        const int s = next % kStages;
        load_tile<T, kVecB>(sA + s * kAStage, sB + s * kBStage, w, ld_w, e_b, m0, n0, next * kBK,
                            M, N, K);
      }
      cp_async_commit();
      const T* a_st = sA + (kt % kStages) * kAStage;
      const T* b_st = sB + (kt % kStages) * kBStage;
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 16) {
        unsigned a[kMI][4], bf[kNI][2];
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi) {
          const int row = wm * kWM + mi * 16 + (lane & 15);
          ldmatrix_x4(a[mi], a_st + a_off(row, (kk >> 3) + (lane >> 4)));
        }
#pragma unroll
        for (int nj = 0; nj < kNI / 2; ++nj) {
          const int k = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
          const int n = wn * kWN + nj * 16 + (lane >> 4) * 8;
          unsigned r[4];
          ldmatrix_x4_trans(r, b_st + b_off(k, n >> 3));
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
          for (int ni = 0; ni < kNI; ++ni) mma16816<T>(acc[mi][ni], a[mi], bf[ni][0], bf[ni][1]);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the next candidate's prologue overwrites the stages

    // --- epilogue: out[b] = round(acc ⊕ user[u(b)]) ---
    const U* ub = user != nullptr ? user + static_cast<std::int64_t>(__ldg(map + b)) * MN : nullptr;
    T* ob = out + b * MN;
    const bool pairs = (N & 1) == 0;
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm * kWM + mi * 16 + (lane >> 2) + h * 8;
        if (row >= M) continue;
#pragma unroll
        for (int ni = 0; ni < kNI; ++ni) {
          const int col = n0 + wn * kWN + ni * 8 + (lane & 3) * 2;
          if (col >= N) continue;
          const std::int64_t off = static_cast<std::int64_t>(row) * N + col;
          const bool two = col + 1 < N;
          float c[2] = {acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]};
          float u[2] = {0.0f, 0.0f};
          if (ub != nullptr) {
            u[0] = to_float(ub[off]);
            if (two) u[1] = to_float(ub[off + 1]);
          }
          T o[2];
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            if constexpr (kAdd == LceAdd::Published) {
              o[q] = round_out<T>(to_float(round_out<T>(c[q])) + u[q]);
            } else {  // RoundOnce (FP32 user) and UserRounded (16-bit user): one FP32 add
              o[q] = round_out<T>(c[q] + u[q]);
            }
          }
          if (two && pairs) {
            unsigned short lo, hi;
            memcpy(&lo, &o[0], 2);
            memcpy(&hi, &o[1], 2);
            *reinterpret_cast<unsigned*>(ob + off) = static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
          } else {
            ob[off] = o[0];
            if (two) ob[off + 1] = o[1];
          }
        }
      }
  }
}

template <class T, LceAdd kAdd, bool kVecB>
void launch_fused_t(const LceFusedArgs& a, cudaStream_t s) {
  auto kernel = lce_fused_kernel<T, kAdd, kVecB>;
  static const bool configured = [&] {
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes),
               "lce fused: shared memory size");
    return true;
  }();
  (void)configured;
  const int m_tiles = TBE_MUTANT_HOST(kLceFusedLastMTileDropped) ? (a.M >= kBM ? static_cast<int>(a.M / kBM) : 1) : static_cast<int>((a.M + kBM - 1) / kBM);
  const int n_tiles = static_cast<int>((a.N + kBN - 1) / kBN);
  const dim3 grid(static_cast<unsigned>(m_tiles * n_tiles),
                  static_cast<unsigned>(a.B < 65535 ? a.B : 65535));
  kernel<<<grid, kThreads, kSmemBytes, s>>>(
      static_cast<const T*>(a.w_c), a.ld_w, static_cast<const T*>(a.e_c), a.user, a.cand_to_user,
      static_cast<T*>(a.out), a.B, static_cast<int>(a.M), static_cast<int>(a.N),
      static_cast<int>(a.K), m_tiles, a.map_error TBE_MUTANT_ARG);
  check_launch("lce fused candidate GEMM");
}

template <class T, LceAdd kAdd>
void launch_fused_vec(bool vec, const LceFusedArgs& a, cudaStream_t s) {
  vec ? launch_fused_t<T, kAdd, true>(a, s) : launch_fused_t<T, kAdd, false>(a, s);
}

template <class T>
void launch_fused_policy(LceAdd add, bool vec, const LceFusedArgs& a, cudaStream_t s) {
  switch (add) {
    case LceAdd::RoundOnce: return launch_fused_vec<T, LceAdd::RoundOnce>(vec, a, s);
    case LceAdd::UserRounded: return launch_fused_vec<T, LceAdd::UserRounded>(vec, a, s);
    case LceAdd::Published: return launch_fused_vec<T, LceAdd::Published>(vec, a, s);
  }
}

}  // namespace

bool lce_fused_vectorized(const LceFusedArgs& a) {
  return a.N % 8 == 0 && (reinterpret_cast<std::uintptr_t>(a.e_c) & 15u) == 0;
}

void launch_lce_fused(DType storage, LceAdd add, const LceFusedArgs& a, cudaStream_t stream) {
  if (a.B <= 0) return;
  const bool vec = lce_fused_vectorized(a);
  dispatch::dispatch_dtype<dispatch::kMmaStorageTypes>(storage, "lce.policy.storage", [&](auto st) {
    launch_fused_policy<dispatch::storage_t<decltype(st)::value>>(add, vec, a, stream);
  });
}

}  // namespace tbe::cuda::detail
