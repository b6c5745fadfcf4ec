// Per-sample-weight gradient (weighted pooled problems): dL/dw_p = (1/L if MEAN else 1) ·
// <grad_output[bag(p), cols(f)], W[i_p]>, from the weights BEFORE the update (the host operator
// launches it before any run kernel). A group of G <= 32 threads per lookup position p (columns in
// steps of 4·G), products and the group reduction in Acc, one FP32 store per position; positions
// outside every bag (pos_bag = -1) get 0. grad_output is clamped first when max_gradient > 0, as
// for the row gradients. WARNING/IGNORE: a bad index reads row 0 (the repair rule).
#include "dispatch/dispatch.h"
#include "kernels/backward_runs.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

template <class W, class Acc, class Out>
__global__ void __launch_bounds__(kRunBlock) psw_grad_group_per_position(const PswGradArgs a,
                                                                         bool idx64) {
  if (fatal_aborted(a.abort_key)) return;
  const int G = a.group_size;
  const int lane = threadIdx.x & 31;
  const int glane = lane & (G - 1);
  const unsigned mask = G == 32 ? 0xffffffffu : (((1u << G) - 1u) << (lane & ~(G - 1)));
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * (kRunBlock / G) + threadIdx.x / G;
  if (p >= a.N) return;  // the whole group leaves together
  const std::int32_t k = a.pos_bag[p];
  if (k < 0) {
    if (glane == 0) a.out[p] = 0.0f;
    return;
  }
  std::int64_t s;
  if (a.bags_per_segment > 0) {
    s = static_cast<std::int64_t>(static_cast<std::uint32_t>(k) /
                                  static_cast<std::uint32_t>(a.bags_per_segment));
    if (s >= a.num_segs) s = a.num_segs - 1;
  } else {
    s = last_le(a.seg_first_bag, a.num_segs, k);
  }
  const SegmentMeta seg = a.segs[s];
  const FeatureMeta fm = a.features[seg.feature];
  const std::int64_t goff = seg.out_base + (k - a.seg_first_bag[s]) * seg.out_stride;
  std::int64_t i = idx64 ? static_cast<const std::int64_t*>(a.indices)[p]
                         : static_cast<const std::int32_t*>(a.indices)[p];
  if (a.check_indices && (i < 0 || i >= fm.rows)) i = 0;
  const W* row = static_cast<const W*>(a.weights) + fm.table_offset + i * fm.dim;
  const Out* grad = static_cast<const Out*>(a.grad_output) + goff;
  const bool clip = a.max_gradient > 0.0f;
  Acc dot = Acc(0);
  for (int c = glane * 4; c < fm.dim; c += G * 4) {
    const int n = fm.dim - c < 4 ? fm.dim - c : 4;
    float gx[4], wx[4];
    load4<Out>(grad + c, false, n, gx);
    load4<W>(row + c, false, n, wx);
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      if (v < n) {
        const float y = clip ? clip_gradient(gx[v], a.max_gradient) : gx[v];
        dot = fma(static_cast<Acc>(y), static_cast<Acc>(wx[v]), dot);
      }
    }
  }
  for (int o = G >> 1; o > 0; o >>= 1) dot += __shfl_xor_sync(mask, dot, o, G);
  if (glane == 0) {
    if (TBE_MUTANT_SWAP(a, kBwdPswGradMeanMissing, false, a.mean)) {
      const std::int64_t b0 = idx64 ? static_cast<const std::int64_t*>(a.offsets)[k]
                                    : static_cast<const std::int32_t*>(a.offsets)[k];
      const std::int64_t b1 = idx64 ? static_cast<const std::int64_t*>(a.offsets)[k + 1]
                                    : static_cast<const std::int32_t*>(a.offsets)[k + 1];
      dot = dot / static_cast<Acc>(b1 - b0);
    }
    a.out[p] = static_cast<float>(dot);
  }
}

template <class W, class Acc, class Out>
void psw_t(const PswGradArgs& a, bool idx64, cudaStream_t stream) {
  const std::int64_t per_block = kRunBlock / a.group_size;
  const std::int64_t blocks = (a.N + per_block - 1) / per_block;
  psw_grad_group_per_position<W, Acc, Out><<<static_cast<unsigned>(blocks), kRunBlock, 0, stream>>>(a, idx64);
}

}  // namespace

void launch_psw_grad(DType weights, DType accumulation, DType grad, DType index,
                     const PswGradArgs& a, cudaStream_t stream) {
  if (a.N == 0) return;
  // The index width is a runtime flag of the kernel (one load per position, no template).
  const bool idx64 = dispatch::dispatch_index(index, "lookups.index_dtype", [](auto idx) {
    return decltype(idx)::value == DType::I64;
  });
  dispatch::dispatch_combo<dispatch::kCompiledBackward>(
      {weights, accumulation, grad}, "options.policy", [&](auto w, auto acc, auto out) {
        psw_t<dispatch::storage_t<decltype(w)::value>, dispatch::storage_t<decltype(acc)::value>,
              dispatch::storage_t<decltype(out)::value>>(a, idx64, stream);
      });
  check_launch("psw_grad_group_per_position");
}

}  // namespace tbe::cuda::detail
