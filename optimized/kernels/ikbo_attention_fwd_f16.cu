// IKBO attention forward instances for __half storage (kernels/ikbo_attention_fwd.cuh).
#include "kernels/ikbo_attention_fwd.cuh"

namespace tbe::cuda::detail::attention {
template void launch_fwd_typed<__half>(const AttentionArgs&, cudaStream_t);
}  // namespace tbe::cuda::detail::attention
