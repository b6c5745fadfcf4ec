// CPU emulations of conforming (and deliberately faulty) IKBO kernels under an IkboPolicy
// (docs/oracle.md "IKBO", emulations). Every operation is evaluated in FP64 on values of the
// accumulation type and rounded once to it (RNE, or toward zero to model truncating tensor-core
// accumulators), so each is the correctly rounded operation of that type (53 >= 2p + 2). They
// power the IKBO oracle's soundness and sharpness tests and tbe-verify's IKBO self-checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/ikbo.h"

namespace tbe::oracle {

/// Order of one GEMM reduction over k (per output element).
enum class LceOrder : std::uint8_t {
  Ascending,          ///< k = 0, 1, ...
  Descending,         ///< k = K-1, ..., 0
  Pairwise,           ///< recursive halving of [0, K)
  Chunked,            ///< chunks of `chunk` in order, then the chunk sums in order (split-K)
  /// RoundOnce kernels: user terms then candidate terms in ONE accumulator; UserRounded: the
  /// stored user value then the candidate terms in one accumulator (C preloaded)
  SingleAccumulator,
};
inline constexpr LceOrder kAllLceOrders[] = {LceOrder::Ascending, LceOrder::Descending,
                                             LceOrder::Pairwise, LceOrder::Chunked,
                                             LceOrder::SingleAccumulator};
std::string to_string(LceOrder o);  ///< "asc", "desc", "pairwise", "chunked", "single-acc"

struct LceEmulation {
  LceOrder order = LceOrder::Ascending;
  std::int64_t chunk = 32;  ///< Chunked: terms per chunk (>= 1)
  /// Accumulation type instead of the policy's (F16 under an F32 policy models a fault).
  std::optional<DType> accumulation;
  bool truncate = false;    ///< every accumulation-type operation rounds toward zero
  /// Rounding points instead of the policy's (Published under a RoundOnce policy: a fault).
  std::optional<ikbo::LceRounding> rounding;
  std::int32_t user_offset = 0;  ///< fault: candidate b uses user (u(b) + offset) mod U
};
/// Emulated LCE output [B, M, N] (FP64 copies of storage values). Validates like the operator.
std::vector<double> emulate_lce(const ikbo::LceProblem& p, const LceEmulation& o);

struct AttentionEmulation {
  std::int64_t block = 64;       ///< keys per block (>= 1; >= n: one block)
  bool descending = false;       ///< key blocks processed from the last one
  bool round_p = true;           ///< P rounded to storage before the PV product (FA kernels)
  bool l_from_rounded_p = false; ///< l sums the rounded P (else the FP32 P)
  bool truncate = false;         ///< accumulations round toward zero
  std::optional<DType> accumulation;
  // Faults:
  bool subtract_max = true;      ///< false: exp(s) without the running maximum
  bool apply_scale = true;       ///< false: the scale is forgotten (logits not · 1/sqrt(Dh))
  std::int64_t drop_block = -1;  ///< >= 0: this key block is skipped
};
/// Emulated attention output [B·n_seed, H, Dh] (FP64 copies of storage values).
std::vector<double> emulate_attention(const ikbo::AttentionProblem& p,
                                      const AttentionEmulation& o);

std::string to_string(const LceEmulation& o);        ///< e.g. "order=chunked/32 acc=fp32 rne"
std::string to_string(const AttentionEmulation& o);  ///< e.g. "block=64 asc p=rounded l=fp32"

}  // namespace tbe::oracle
