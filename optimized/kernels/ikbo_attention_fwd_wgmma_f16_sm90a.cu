// IKBO attention forward, wgmma kernel instances for __half storage (kernels/ikbo_attention_fwd_wgmma.cuh);
// compiled for sm_90a only (optimized/CMakeLists.txt: tbe_optimized_sm90a).
#include "kernels/ikbo_attention_fwd_wgmma.cuh"

namespace tbe::cuda::detail::attention_wgmma {
void launch_fwd_wgmma_f16(const AttentionArgs& a, cudaStream_t stream) {
  launch_fwd_wgmma_typed<__half>(a, stream);
}
}  // namespace tbe::cuda::detail::attention_wgmma
