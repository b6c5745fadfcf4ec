// The IKBO map check's predicate, shared by the check kernel of LCE and attention
// (ikbo_lce_elementwise.cu) and the attention's one-CTA grouping (ikbo_attention_grouping.cu), so
// both builds reject exactly the same values (docs/ikbo.md "cand_to_user").
#pragma once

#include <cstdint>

#include "tbe/cuda/mutation.h"

namespace tbe::cuda::detail {

/// cand_to_user value u is outside [0, U).
__device__ __forceinline__ bool map_value_bad(std::int32_t u, std::int64_t U TBE_MUTANT_PARAM(m)) {
  return u < 0 || TBE_MUTANT_SWAP(m, kLceMapCheckAcceptsU, u > U, u >= U);
}

}  // namespace tbe::cuda::detail
