// tbe-fuzz's backward + exact optimizer cases (tbe/backward.h, docs/backward.md): a forward fuzz
// case (fuzz_case.h: tables, bags, bounds faults, invalid forward arguments) plus the backward
// call's own draws (optimizer, weight decay, max_norm, gradient clipping, momentum, RNE or
// stochastic rounding with its Philox stream, the GPU strategy: long-run threshold, chunk size,
// chunked/fused, deterministic; bad backward arguments), generated with one run's SL aimed at the
// routing edges (threshold - 1 / threshold / threshold + 1, chunk boundaries, 255/256/257), and
// judged against the FP64 reference through the backward oracle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_case.h"
#include "fuzz/generate.h"
#include "fuzz/shrink.h"
#include "fuzz/verdict.h"
#include "tbe/backend.h"
#include "tbe/backward_case.h"

namespace tbe::fuzz {

/// Invalid backward arguments (validate(BackwardProblem, BackwardStrategy) and
/// validate(BackwardProblem, BackwardOutputs) must reject them; both backends must name the same
/// argument and write nothing).
enum class BadBackward : std::uint8_t {
  None, LearningRate, Eps, WeightDecay, SgdWeightDecayMode, MaxNorm, MaxGradient, Threshold,
  ChunkSize, PswGradUnweighted, MissingMomentum
};
/// "none", "learning-rate", "eps", ... (as tbe-fuzz prints them).
const char* to_string(BadBackward b);

/// The backward call's part of a backward fuzz case.
struct BackwardSpec {
  OptimizerConfig optimizer;
  bool stochastic = false;  ///< write-back by stochastic rounding (policy.write_back)
  std::uint64_t sr_seed = 0, sr_offset = 0;
  /// grad_output and momentum come from Rng(data_seed, ·) element by element, so they follow the
  /// shrinker's changes of the output layout.
  std::uint64_t data_seed = 0;
  int grad_kind = 0;  ///< 0: uniform [-1, 1); 1: integers in [-3, 3]; 2: uniform scaled by 2^-12
  bool momentum_nonzero = false;
  bool psw_grad = true;  ///< ask for per-sample-weight gradients (weighted cases)
  BackwardStrategy strategy;
  bool recheck = false;  ///< deterministic: a second call must be bitwise identical
  BadBackward bad = BadBackward::None;
  std::int64_t target_sl = 0;  ///< the SL the generator aimed one run at (0: none)
};

struct BackwardFuzzCase {
  FuzzCase fwd;
  BackwardSpec bwd;
};

/// Backward case `case_index` of campaign `seed`: from Rng(seed, "bwd" + case_index) alone.
BackwardFuzzCase generate_backward_case(std::uint64_t seed, std::uint64_t case_index,
                                        Shapes shapes = Shapes::Small);

/// The host call of `c` (build() of the forward part, weights copied, grad_output and momentum
/// drawn, the bad argument applied) and the outputs it asks for: `want_psw_grad` says whether
/// per_sample_weight_grad is requested. Throws InvalidArgument when the forward part cannot be
/// built.
struct BuiltBackward {
  BackwardCase c;
  BackwardStrategy strategy;
  bool want_psw_grad = false;
};
void build(const BackwardFuzzCase& c, BuiltBackward& out);

/// One line: the forward part's describe() plus optimizer, rounding, strategy and bad argument.
std::string describe(const BackwardFuzzCase& c);

/// What the judge checks besides the oracle.
struct BackwardJudgeOptions {
  /// The backend is the GPU one: its path counters must add up to the reference transpose (runs,
  /// lookups), runs with SL >= threshold on the long path asked for, chunks = Σ ceil(SL / chunk).
  bool check_counters = false;
  bool recheck = false;  ///< deterministic strategy: a second call must be bitwise identical
  /// Aggregate SR z-test (docs/oracle.md "B.7") when at least this many samples (0: off).
  std::int64_t z_test_min_samples = 2000;
  double z_limit = 6.0;
};

/// The judgement of one backward call.
struct BackwardJudgement {
  Verdict verdict;
  BackwardStats stats;            ///< of the call (when it returned)
  bool expected_invalid = false;  ///< validate rejects the call
  bool expected_violation = false;
  std::int64_t expected_warnings = 0;
  std::vector<std::int64_t> run_lengths;  ///< the reference transpose's SL per run
  /// What the backend produced, for the case folder: the outputs when it returned, or the error
  /// name ("invalid_argument", "bounds_check", "device_error").
  std::optional<std::vector<std::byte>> weights;
  std::optional<std::vector<float>> momentum, psw_grad;
  std::optional<std::string> error;
};

/// Judges dev.backward on `c` with strategy `s` (per_sample_weight_grad requested iff
/// `want_psw_grad`): InvalidArgument agreement with tbe::validate (the argument named, every
/// output untouched), FATAL's first offender (untouched), the warning count against tbe::repair,
/// canaries past every output, the oracle (oracle::judge_backward: weights, momentum,
/// per-sample-weight gradients, untouched rows bitwise), then the options' checks. Never throws
/// for a backend's misbehaviour.
BackwardJudgement judge_backward_call(Backend& dev, BackwardCase& c, const BackwardStrategy& s,
                                      bool want_psw_grad, const BackwardJudgeOptions& o = {});

/// build + judge_backward_call; a case that cannot be built fails check "generator".
BackwardJudgement judge_backward_case(Backend& dev, const BackwardFuzzCase& c,
                                      const BackwardJudgeOptions& o = {});

struct BackwardShrinkResult {
  BackwardFuzzCase shrunk;
  Verdict verdict;
  int steps = 0, runs = 0;
};
/// Shrinks a failing backward case: simpler backward options one at a time (SGD, no weight decay,
/// no max_norm, no clipping, zero momentum, RNE, integer gradients, deterministic, no recheck),
/// then the forward part with shrink() (the backward spec fixed), each step kept only when the
/// case still fails the same check; `limits` bound both together.
BackwardShrinkResult shrink_backward(
    const BackwardFuzzCase& failing, const Verdict& first,
    const std::function<Verdict(const BackwardFuzzCase&)>& judge, const ShrinkLimits& limits = {});

}  // namespace tbe::fuzz
