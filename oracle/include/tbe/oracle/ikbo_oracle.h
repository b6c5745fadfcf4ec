// The enclosure oracle for the IKBO operators (docs/ikbo.md "LCE", "Attention", "Precision policy";
// derivation in docs/oracle.md "IKBO"). Per output element an interval [lo, hi] of storage-type
// values that contains every result a conforming kernel may store under the problem's IkboPolicy:
//  - LCE: both GEMM reductions in the accumulation type in any order or blocking (accumulators
//    that truncate, like tensor cores, included), at the policy's rounding points (Published:
//    each part rounded to storage, then the storage-type add; RoundOnce: one rounding of the sum,
//    the two parts in one accumulator or in two and added in the accumulation type);
//  - attention: an FA-style kernel (S = scale·QKᵀ in the accumulation type, online softmax with a
//    running maximum over key blocks of any size processed in ascending or descending key order,
//    P = exp(s − m) optionally rounded to storage before the PV product, l = Σ P of the rounded or
//    unrounded P, out = acc / l rounded to storage). An empty key range admits exactly 0.
// Element coordinates: ElementCoord::Space::IkboLce (candidate b in `sample`, m in `row`, n in
// `column`) and IkboAttention (query row in `row`, candidate in `sample`, h in `head`, d in
// `column`).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tbe/ikbo.h"
#include "tbe/oracle/forward_oracle.h"

namespace tbe::oracle {

/// Enclosures of one IKBO output with the FP64 reference values (the intervals' centres).
struct IkboEnclosures {
  std::vector<Enclosure> enclosures;  ///< [numel]
  std::vector<double> reference;      ///< [numel] FP64 value (LCE: the exact-order sum C + U)
};

/// LCE enclosures [B, M, N]. Throws InvalidArgument as the operator does (validate,
/// validate_map). Non-finite inputs give unconstrained elements; so does an element whose
/// accumulation could overflow the accumulation type.
IkboEnclosures compute_lce_enclosures(const ikbo::LceProblem& p);
std::vector<Enclosure> lce_enclosures(const ikbo::LceProblem& p);
/// Judges values (FP64 copies of a stored output, [B·M·N]); each must also be a value of
/// p.policy.storage. Throws InvalidArgument on a size mismatch. check = "ikbo-lce".
CheckReport judge_lce(const ikbo::LceProblem& p, const IkboEnclosures& enc,
                      std::span<const double> values);
/// `out`: host [B, M, N] of p.policy.storage.
CheckReport check_lce(const ikbo::LceProblem& p, const void* out);
/// For emulations and device copies already converted to FP64.
CheckReport check_lce_values(const ikbo::LceProblem& p, std::span<const double> values);
ElementCoord locate_lce_element(const ikbo::LceProblem& p, std::int64_t flat);

/// Attention enclosures [B·n_seed, H, Dh] (same conventions). check = "ikbo-attention".
IkboEnclosures compute_attention_enclosures(const ikbo::AttentionProblem& p);
std::vector<Enclosure> attention_enclosures(const ikbo::AttentionProblem& p);
CheckReport judge_attention(const ikbo::AttentionProblem& p, const IkboEnclosures& enc,
                            std::span<const double> values);
/// `out`: host [B·n_seed, H, Dh] of p.policy.storage.
CheckReport check_attention(const ikbo::AttentionProblem& p, const void* out);
CheckReport check_attention_values(const ikbo::AttentionProblem& p,
                                   std::span<const double> values);
ElementCoord locate_attention_element(const ikbo::AttentionProblem& p, std::int64_t flat);

}  // namespace tbe::oracle
