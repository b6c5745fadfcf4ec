// The exact optimizers applied by the group that owns a row (docs/backward.md "The computation"; FBGEMM
// split_embedding_backward_codegen_{sgd,rowwise_adagrad}_*_exact): one update per unique row,
// FP32 optimizer arithmetic (each operation rounded once: __f*_rn, no contraction), FP32 momentum,
// write-back RNE or stochastic rounding (curand Philox, docs/backward.md "Stochastic rounding on
// the GPU"). Only the owned row (and its momentum) is written.
//   G  = fp32(acc)                                   (acc: the row gradient in Acc)
//   SGD:      w <- w - lr·G
//   rowwise Adagrad: g' = G + wd·w (L2) else G;  m <- m + (Σ_d g'^2) / D;
//             mult = lr / (sqrt(m) + eps);  corr = 1 - mult·wd (L2), 1 - lr·wd (decoupled), 1;
//             w <- corr·w - mult·G
//   both: max_norm > 0 and ‖w‖ > max_norm -> w·(max_norm / ‖w‖) (before the storage rounding)
#pragma once

#include <curand_kernel.h>

#include "kernels/backward_runs.cuh"

namespace tbe::cuda::detail {

template <class W> __device__ __forceinline__ W round_rne(float x);
template <> __device__ __forceinline__ float round_rne<float>(float x) { return x; }
template <> __device__ __forceinline__ __half round_rne<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 round_rne<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <class W> __device__ __forceinline__ W round_down(float x);
template <class W> __device__ __forceinline__ W round_up(float x);
template <> __device__ __forceinline__ __half round_down<__half>(float x) { return __float2half_rd(x); }
template <> __device__ __forceinline__ __half round_up<__half>(float x) { return __float2half_ru(x); }
template <> __device__ __forceinline__ __nv_bfloat16 round_down<__nv_bfloat16>(float x) {
  return __float2bfloat16_rd(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 round_up<__nv_bfloat16>(float x) {
  return __float2bfloat16_ru(x);
}

/// Stochastic rounding of x to W with uniform u in [0, 1): RU(x) if u < (x - RD(x)) / (RU - RD),
/// else RD(x); exact and non-finite values round to nearest (unchanged / NaN / Inf).
template <class W>
__device__ __forceinline__ W round_stochastic(float x, float u) {
  if (!isfinite(x)) return round_rne<W>(x);
  const W lo = round_down<W>(x), hi = round_up<W>(x);
  const float flo = to_float(lo), fhi = to_float(hi);
  if (flo == fhi) return lo;
  const float f = __fdiv_rn(__fsub_rn(x, flo), __fsub_rn(fhi, flo));
  return u < f ? hi : lo;
}

/// Uniform in [0, 1) for weight element `e`: Philox4x32-10 keyed by sr_seed, subsequence e,
/// offset 4·sr_offset (i.e. the first 32-bit word of the block at counter (sr_offset, e)), top 24
/// bits scaled by 2^-24.
__device__ __forceinline__ float sr_uniform(unsigned long long seed, unsigned long long offset,
                                            std::int64_t e) {
  curandStatePhilox4_32_10_t st;
  curand_init(seed, static_cast<unsigned long long>(e), offset * 4ull, &st);
  return static_cast<float>(curand(&st) >> 8) * 0x1p-24f;
}

/// The row's current values (this lane's 4 columns) and momentum, loaded before the gradient is
/// gathered so that their latency overlaps the gather.
struct RowState {
  float w[4];
  float momentum;
};

template <class W, bool kBlock>
__device__ __forceinline__ RowState load_row_state(const RunArgs& a, const RunGroup<kBlock>& g,
                                                   std::int64_t key, const BwdTableMeta& t) {
  RowState s{{0.f, 0.f, 0.f, 0.f}, 0.f};
  const int D = t.dim;
  const int c = g.glane * 4;
  const int n = D - c < 4 ? (D - c > 0 ? D - c : 0) : 4;
  const std::int64_t elem = t.elem_offset + TBE_MUTANT_SWAP(a, kBwdElemOffset32, static_cast<std::int32_t>(static_cast<std::uint32_t>(key - t.row_offset) * static_cast<std::uint32_t>(D)), (key - t.row_offset) * D);
  if (n > 0) load4<W>(static_cast<const W*>(a.weights_in) + elem + c, a.weights_vec, n, s.w);
  if (a.adagrad) s.momentum = a.momentum_in[key];
  return s;
}

/// Applies the optimizer to the row with linearized id `key` (state from load_row_state), whose
/// gradient (columns [4·glane, 4·glane + 4)) is `acc`, and stores the row (and its momentum).
template <class W, class Acc, bool kBlock>
__device__ __forceinline__ void apply_row(const RunArgs& a, const RunGroup<kBlock>& g,
                                          std::int64_t key, const BwdTableMeta& t,
                                          const RowState& st, const Acc (&acc)[4]) {
  const int D = t.dim;
  const std::int64_t row = key - t.row_offset;
  const std::int64_t elem = t.elem_offset + TBE_MUTANT_SWAP(a, kBwdElemOffset32, static_cast<std::int32_t>(static_cast<std::uint32_t>(row) * static_cast<std::uint32_t>(D)), row * D);
  const int c = g.glane * 4;
  const int n = D - c < 4 ? (D - c > 0 ? TBE_MUTANT_SWAP(a, kBwdTailOfDUnwritten, D - c - 1, D - c) : 0) : 4;
  float w[4] = {st.w[0], st.w[1], st.w[2], st.w[3]}, G[4], nw[4];
#pragma unroll
  for (int v = 0; v < 4; ++v) G[v] = v < n ? static_cast<float>(acc[v]) : 0.0f;
  if (!a.adagrad) {
#pragma unroll
    for (int v = 0; v < 4; ++v) nw[v] = __fsub_rn(w[v], __fmul_rn(a.lr, G[v]));
  } else {
    const bool l2 = a.wd_mode == 1, decoupled = a.wd_mode == 2;
    float ss = 0.0f;
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const float gp = l2 ? __fadd_rn(G[v], __fmul_rn(a.weight_decay, w[v])) : G[v];
      ss = __fadd_rn(ss, __fmul_rn(gp, gp));
    }
    ss = g.sum(ss);
    const float m = __fadd_rn(st.momentum, TBE_MUTANT_SWAP(a, kBwdMomentumFromSum, ss, __fdiv_rn(ss, static_cast<float>(D))));
    const float mult = TBE_MUTANT_SWAP(a, kBwdEpsInsideSqrt, __fdiv_rn(a.lr, __fsqrt_rn(__fadd_rn(m, a.eps))), __fdiv_rn(a.lr, __fadd_rn(__fsqrt_rn(m), a.eps)));
    const float corr = l2 ? __fsub_rn(1.0f, __fmul_rn(mult, a.weight_decay))
                          : TBE_MUTANT_SWAP(a, kBwdDecoupledWdIgnored, false, decoupled) ? __fsub_rn(1.0f, __fmul_rn(a.lr, a.weight_decay)) : 1.0f;
#pragma unroll
    for (int v = 0; v < 4; ++v) nw[v] = __fsub_rn(__fmul_rn(corr, w[v]), __fmul_rn(mult, G[v]));
    if (g.glane == 0) a.momentum_out[key] = m;
  }
  if (a.max_norm > 0.0f) {  // both optimizers (docs/backward.md)
    float sq = 0.0f;
#pragma unroll
    for (int v = 0; v < 4; ++v) sq = v < n ? __fadd_rn(sq, __fmul_rn(nw[v], nw[v])) : sq;
    const float norm = __fsqrt_rn(g.sum(sq));
    if (norm > a.max_norm) {
      const float f = __fdiv_rn(a.max_norm, norm);
#pragma unroll
      for (int v = 0; v < 4; ++v) nw[v] = __fmul_rn(nw[v], f);
    }
  }
  if (n == 0) return;
  W out[4];
  W* dst = static_cast<W*>(a.weights_out) + elem + c;
  if constexpr (sizeof(W) == 2) {
    if (TBE_MUTANT_SWAP(a, kBwdSrRoundNearest, false, a.stochastic)) {
#pragma unroll
      for (int v = 0; v < 4; ++v)
        out[v] = v < n ? round_stochastic<W>(nw[v], sr_uniform(a.sr_seed, TBE_MUTANT_SWAP(a, kBwdSrOffsetIgnored, 0ull, a.sr_offset), elem + c + v))
                       : W(0.0f);
      store4<W>(dst, a.weights_vec, n, out);
      return;
    }
  }
#pragma unroll
  for (int v = 0; v < 4; ++v) out[v] = round_rne<W>(nw[v]);
  store4<W>(dst, a.weights_vec, n, out);
}

}  // namespace tbe::cuda::detail
