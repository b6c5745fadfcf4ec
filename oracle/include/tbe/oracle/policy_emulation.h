// CPU emulations of conforming (and deliberately non-conforming) TBE forward implementations
// under a precision policy (docs/semantics.md "Precision policies", docs/oracle.md "Emulations").
//
// Each emulation computes every pooled output element the way a kernel could: products and
// MEAN's 1/L rounded in the accumulation type, the bag summed in a chosen order (index order,
// sorted, random permutation, pairwise tree, chunks of 256), every partial sum rounded to the
// accumulation type, and the result rounded once (RNE) to the output type. They power the
// oracle's soundness tests (every conforming order must land inside the enclosures), the fuzz
// harness and tbe-verify's CPU self-check; with `accumulation` overridden (e.g. FP16 under an
// FP32 policy) they model the faults the oracle must reject.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/problem.h"

namespace tbe::oracle {

/// The order in which a bag's n terms are added (every order is one binary summation tree).
enum class SummationOrder : std::uint8_t {
  IndexOrder,         ///< ((t_0 + t_1) + t_2) + ... : what the reference does (in FP64)
  SortedAscending,    ///< increasing |t| (the classic accurate order)
  SortedDescending,   ///< decreasing |t| (large terms first: small ones get absorbed)
  SortedSigned,       ///< increasing signed value (all negatives first: maximal partial sums)
  RandomPermutation,  ///< a seeded random permutation per (bag, column)
  PairwiseTree,       ///< recursive halving of the index range (tree reductions, warp shuffles)
  Chunked256,         ///< chunks of 256 in index order, then the chunk sums in order
};
/// Every SummationOrder, for loops in tests and tools.
inline constexpr SummationOrder kAllSummationOrders[] = {
    SummationOrder::IndexOrder,        SummationOrder::SortedAscending,
    SummationOrder::SortedDescending,  SummationOrder::SortedSigned,
    SummationOrder::RandomPermutation, SummationOrder::PairwiseTree,
    SummationOrder::Chunked256};

/// Where MEAN's 1/L is applied (SUM ignores it). All three are conforming.
enum class MeanScaling : std::uint8_t {
  AtEnd,    ///< fl(fl(1/L) * S): one scaling of the accumulated sum (FBGEMM's kernels)
  PerTerm,  ///< fl(fl(1/L) * t_p) for every term, then the sum
  Divide,   ///< fl(S / L): one division at the end
};
inline constexpr MeanScaling kAllMeanScalings[] = {MeanScaling::AtEnd, MeanScaling::PerTerm,
                                                   MeanScaling::Divide};

/// How one emulation runs.
struct EmulationOptions {
  SummationOrder order = SummationOrder::IndexOrder;
  MeanScaling mean_scaling = MeanScaling::AtEnd;
  /// Seed of RandomPermutation (the permutation of bag k, column d is a pure function of
  /// (seed, k, d), independent of thread count). Other orders ignore it.
  std::uint64_t seed = 0;
  /// Accumulation type to emulate instead of p.options.policy.accumulation: F64, F32, F16 or
  /// BF16. A type narrower than the policy's models a fault (e.g. F16 under an F32 policy):
  /// inputs, products, 1/L and every partial sum are rounded (RNE) to it.
  std::optional<DType> accumulation;
  /// false: return the accumulated values without the final rounding to the output type
  /// (models the fault "output not rounded"; values are then acc-type numbers).
  bool round_to_output = true;
};

/// Emulated forward of p: make_output_layout(p).numel values (layout as OutputLayout), each an
/// FP64 copy of the value a kernel with these choices would store. Applies p's bounds check first
/// exactly like the operator (tbe::repair; FATAL with a violation throws BoundsCheckError;
/// invalid shapes throw InvalidArgument). Empty bags give +0.0; NONE copies W[i_p] rounded to the
/// output type (rows no bag covers stay 0). Deterministic; OpenMP over bags.
std::vector<double> emulate_forward(const ForwardProblem& p, const EmulationOptions& options);

/// Convenience form: emulate_forward(p, {order, MeanScaling::AtEnd, seed, accumulation}).
std::vector<double> emulate_forward(const ForwardProblem& p, SummationOrder order,
                                    std::uint64_t seed = 0,
                                    std::optional<DType> accumulation = std::nullopt);

/// Rounds x to the accumulation type `acc` (F64: identity; F32/F16/BF16: RNE, overflow to inf).
/// The rounding every emulated operation applies to its exact (double-computed) result; for
/// +, -, *, / on acc-type inputs this equals the correctly rounded acc operation (double
/// rounding through FP64 is innocuous since 53 >= 2p + 2).
double round_to_accumulation(DType acc, double x);

/// "index", "sorted-asc", "sorted-desc", "sorted-signed", "random", "pairwise", "chunked256";
/// "at-end", "per-term", "divide".
std::string to_string(SummationOrder o);
std::string to_string(MeanScaling m);
/// e.g. "order=random seed=7 mean=per-term acc=fp16 rounded".
std::string to_string(const EmulationOptions& o);

}  // namespace tbe::oracle
