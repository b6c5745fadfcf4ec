// Test harness for the CUDA IKBO attention (tbe::cuda::AttentionOp): runs one host attention call
// through the device-level op with canaries (output poisoned with NaN bytes 0xFF before launch,
// sentinel bytes past its end, a non-default stream), reduced to an AttentionOutcome.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tbe/cuda/ikbo_attention.h"
#include "tbe/ikbo.h"

namespace tbe::test {

/// What an attention call did: returned an output, or threw InvalidArgument.
struct AttentionOutcome {
  enum class Kind { Ok, InvalidArgument } kind = Kind::Ok;
  std::string argument;           ///< InvalidArgument::argument()
  std::string what;
  std::vector<std::byte> output;  ///< Ok: B·n_seed·H·Dh elements of policy.storage
  std::vector<std::string> paths; ///< AttentionOp::paths() after finish()
  cuda::AttentionOp::EpilogueBlocks epilogue;  ///< AttentionOp::epilogue_blocks()
  bool sentinels_intact = true;   ///< bytes past the end of the output untouched
  bool poison_intact = true;      ///< on error: the output still holds the poison (bitwise)
};
std::string to_string(const AttentionOutcome& o);

/// AttentionOp on device copies of the host problem's buffers (q, k, v, cand_to_user; the map is
/// NOT validated on the host, so a bad map reaches the device check), canaries on. Problems that
/// can_implement rejects reach the op, which must throw before touching anything.
/// `misalign_q`: q is uploaded 2 bytes past a 256-byte boundary (the alignment check).
AttentionOutcome run_attention_gpu(const ikbo::AttentionProblem& p,
                                   const cuda::AttentionTuning& tuning = {},
                                   bool misalign_q = false);
inline constexpr std::size_t kAttentionSentinelBytes = 256;

}  // namespace tbe::test
