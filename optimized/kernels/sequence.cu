// NONE (sequence) pooling: output row p = W[i_p] of the table of the bag holding p, rows no bag
// covers are zero. A group of G threads owns one output row; the bag of p is found by a binary
// search over the (repaired) offsets, its feature by a binary search over feature_first_bag.
// Every output row is written exactly once (no memset), so a FATAL abort leaves the output as is.
#include "dispatch/tuning.h"
#include "kernels/common.cuh"

namespace tbe::cuda::detail {

inline constexpr int kSequenceBlock = tuning::Sequence::kBlockThreads;

template <class W, class Out, class Idx, int VEC>
__global__ void __launch_bounds__(kSequenceBlock) sequence_group_per_row(const SequenceArgs a) {
  if (fatal_aborted(a.abort_key)) return;
  const int G = a.group_size;
  const int glane = threadIdx.x & (G - 1);
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * (kSequenceBlock / G) +
                         threadIdx.x / G;
  if (p >= a.num_rows) return;
  const Idx* offsets = static_cast<const Idx*>(a.offsets);
  const std::int64_t k = last_le(offsets, a.num_bags + 1, p);  // bag k covers p iff k < num_bags
  const int D = a.dim;
  Out* out = static_cast<Out*>(a.output) + TBE_MUTANT_SWAP(a, kSeqWrongRow, k >= 0 && k < a.num_rows ? k : p, p) * D;
  const bool covered = k >= 0 && k < a.num_bags;
  const W* row = nullptr;
  if (covered) {
    const std::int64_t f = last_le(a.feature_first_bag, a.num_features + 1, k);
    const FeatureMeta fm = a.features[f];
    std::int64_t i = static_cast<std::int64_t>(static_cast<const Idx*>(a.indices)[p]);
    if (a.check_indices && (i < 0 || i >= fm.rows)) {
      i = 0;
      if (glane == 0) atomicAdd(&a.counters->bad_indices, 1ull);
    }
    row = static_cast<const W*>(a.weights) + fm.table_offset + i * D;
  }
  for (int c = glane * VEC; c < D; c += G * VEC) {
    float v[VEC];
    if (covered) {
      load_row_vec<W, VEC>(row + c, v);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = 0.0f;
    }
    Out o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = round_out<Out>(v[j]);
    store_out<Out, VEC>(out + c, o);
  }
}

template <DType kW, DType kOut, DType kIdx, bool kVec>
void launch_sequence_t(const SequenceArgs& a, cudaStream_t stream) {
  using W = storage_t<kW>;
  constexpr int VEC = kVec ? tuning::PooledGather::kVectorBytes / static_cast<int>(sizeof(W)) : 1;
  if (a.num_rows <= 0) return;
  const std::int64_t per_block = kSequenceBlock / a.group_size;
  const std::int64_t blocks = (a.num_rows + per_block - 1) / per_block;
  sequence_group_per_row<W, storage_t<kOut>, storage_t<kIdx>, VEC>
      <<<static_cast<unsigned>(blocks), kSequenceBlock, 0, stream>>>(a);
}

#define TBE_INSTANTIATE_SEQUENCE(W, OUT)                                                      \
  template void launch_sequence_t<W, OUT, DType::I32, true>(const SequenceArgs&, cudaStream_t);  \
  template void launch_sequence_t<W, OUT, DType::I32, false>(const SequenceArgs&, cudaStream_t); \
  template void launch_sequence_t<W, OUT, DType::I64, true>(const SequenceArgs&, cudaStream_t);  \
  template void launch_sequence_t<W, OUT, DType::I64, false>(const SequenceArgs&, cudaStream_t);
#define TBE_INSTANTIATE_SEQUENCE_W(W)                                                         \
  TBE_INSTANTIATE_SEQUENCE(W, DType::F32)                                                     \
  TBE_INSTANTIATE_SEQUENCE(W, DType::F16)                                                     \
  TBE_INSTANTIATE_SEQUENCE(W, DType::BF16)

TBE_INSTANTIATE_SEQUENCE_W(DType::F32)
TBE_INSTANTIATE_SEQUENCE_W(DType::F16)
TBE_INSTANTIATE_SEQUENCE_W(DType::BF16)

}  // namespace tbe::cuda::detail
