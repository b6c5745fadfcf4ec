// CPU emulations of conforming (and deliberately non-conforming) TBE backward + exact optimizer
// implementations under a precision policy (docs/oracle.md "Backward", "Emulations").
//
// An emulation computes what a kernel with given choices stores: each run's G_r reduced in the
// accumulation type in a chosen order (position order, sorted, random permutations, pairwise,
// chunks of `chunk_size` then a second-level sum), each term formed one of the conforming ways,
// G_r converted to the optimizer's arithmetic type (FP32, or FP64 as a wider conforming variant),
// the optimizer with one rounding per operation, the row stored RNE or with stochastic rounding
// (random draws of its own), the momentum in FP32 and the per-sample-weight gradients in FP32.
// They power the oracle's soundness tests (every conforming choice lands inside the enclosures),
// its sharpness tests (each BackwardFault must be rejected) and any CPU self-check of a tool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backward.h"
#include "tbe/oracle/backward_oracle.h"
#include "tbe/oracle/policy_emulation.h"

namespace tbe::oracle {

/// How a term c_p·g_p of G_r is formed in the accumulation type (all conforming).
enum class TermForm : std::uint8_t {
  ProductThenScale,  ///< fl(fl(w·g) · fl(1/L))
  WeightThenScale,   ///< fl(fl(w · fl(1/L)) · g)
  Divide,            ///< fl(fl(w·g) / L)
};
inline constexpr TermForm kAllTermForms[] = {TermForm::ProductThenScale, TermForm::WeightThenScale,
                                             TermForm::Divide};

/// A deliberate deviation from the semantics (sharpness tests, planted bugs). None = conforming.
enum class BackwardFault : std::uint8_t {
  None,
  EpsInsideSqrt,              ///< mult = lr / sqrt(m + eps)
  ChunkBoundaryLost,          ///< Chunked256 order: the last lookup of every chunk except the
                              ///< last one is lost
  ChunkBoundaryDuplicated,    ///< Chunked256 order: the first lookup of every chunk after the
                              ///< first is added twice
  DroppedChunk,               ///< Chunked256 order: the last chunk's partial sum is not added
  MissingPerSampleWeight,     ///< G_r ignores the per-sample weights (treated as 1)
  SeparateUpdatesPerFeature,  ///< one optimizer update per (feature, row), one after another
  WrongMeanScale,             ///< MEAN scales by 1/(L+1) instead of 1/L (G_r and psw grads)
  NoStochasticRounding,       ///< stores RNE although the policy asks for stochastic rounding
};

/// How one backward emulation runs.
struct BackwardEmulationOptions {
  /// Order of each run's SL terms. IndexOrder = position order; Chunked256 = chunks of
  /// `chunk_size` lookups in position order, each summed in order, then the chunk partial sums in
  /// order (the long-run GPU paths).
  SummationOrder order = SummationOrder::IndexOrder;
  std::int32_t chunk_size = 256;
  /// Order of the D-term reductions (mean of squares, norm for max_norm, psw-gradient dot).
  SummationOrder column_order = SummationOrder::IndexOrder;
  TermForm term_form = TermForm::ProductThenScale;
  /// Seed of RandomPermutation orders and of the stochastic-rounding draws (u per element from a
  /// splitmix64 stream keyed by (seed, element), not the reference's Philox stream).
  std::uint64_t seed = 0;
  /// Accumulation type instead of policy.accumulation (F64, F32, F16, BF16; narrower = a fault).
  std::optional<DType> accumulation;
  /// Arithmetic of the optimizer: F32 (the policy's optimizer_state type) or F64 (wider,
  /// conforming). G_r is rounded to it once.
  DType optimizer_arithmetic = DType::F32;
  BackwardFault fault = BackwardFault::None;
};

/// What an emulated backward call stores: whole buffers (untouched elements copied from the
/// problem's), as a kernel leaves them.
struct BackwardEmulationResult {
  std::vector<std::byte> weights;             ///< [Σ E_t·D_t] of the weights dtype
  std::vector<float> momentum;                ///< [Σ E_t] (Adagrad), else empty
  std::vector<float> per_sample_weight_grad;  ///< [N] (weighted), else empty
  /// A view for judge_backward (pointers into this object).
  BackwardResultView view() const;
};

/// Emulated backward of p. Same validation and bounds-check semantics as backward_reference
/// (InvalidArgument, BoundsCheckError); deterministic for given options; OpenMP over runs.
BackwardEmulationResult emulate_backward(const BackwardProblem& p,
                                         const BackwardEmulationOptions& options = {});

/// "none", "eps-inside-sqrt", "chunk-boundary-lost", "chunk-boundary-duplicated",
/// "dropped-chunk", "missing-per-sample-weight", "separate-updates-per-feature",
/// "wrong-mean-scale", "no-stochastic-rounding"; "product-then-scale", "weight-then-scale",
/// "divide"; e.g. "order=chunked256 chunk=257 columns=random term=divide acc=policy opt=fp32".
std::string to_string(BackwardFault f);
std::string to_string(TermForm f);
std::string to_string(const BackwardEmulationOptions& o);

}  // namespace tbe::oracle
