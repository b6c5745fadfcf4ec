// Internal: the transpose of the lookups into reusable buffers (transpose.cpp; not a public
// header). backward_reference keeps the buffers in its workspace between calls; the public
// transpose_lookups uses fresh ones.
#pragma once

#include <cstdint>
#include <vector>

#include "tbe/backward.h"

namespace tbe::detail {

/// Scratch of transpose_into (a workspace keeps it between calls: vectors only grow, so pages are
/// touched once). Σ SL = lookups inside bags, K = bags.
struct TransposeScratch {
  std::vector<std::uint64_t> keys, keys_alt;  ///< [Σ SL] linearized ids (radix ping-pong)
  std::vector<std::int64_t> positions_alt;    ///< [Σ SL] positions (ping-pong of sorted_positions)
  std::vector<std::int64_t> bag_slot;         ///< [K + 1] first slot of bag k in the key stream
  std::vector<std::int64_t> histogram;        ///< [threads · 2^digit_bits] per-thread counts
};

/// transpose_lookups on the lookups `view` describes (p.lookups, or p.lookups with its indices and
/// offsets replaced by a repair's int64 copies): fills `tr` (vectors resized, capacity reused).
/// The order is the stable sort by linearized id of the position-ordered stream, computed by an
/// LSD radix sort on only the key bits needed (parallel, and the same bytes for any thread count:
/// a stable sort has one result).
void transpose_into(const ForwardProblem& p, const LookupBatchView& view, Transpose& tr,
                    TransposeScratch& scratch);

}  // namespace tbe::detail
