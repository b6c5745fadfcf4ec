// Test harness for the CUDA backward: runs one BackwardCase through the device-level BackwardOp
// (optionally with the transpose hoisted into a TransposeOp on a second stream) with canaries:
// sentinel bytes past the end of every output, NaN-poisoned per-sample-weight gradients, a
// non-default stream; and a generator of random backward cases (weights, grad_output, optimizer,
// strategy) over every axis the kernels dispatch on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backward.h"
#include "tbe/backward_case.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/small_table.h"
#include "tbe/errors.h"
#include "tbe/oracle/backward_oracle.h"

namespace tbe::test {

/// What a backward call did on one backend.
struct BackwardOutcome {
  enum class Kind { Ok, InvalidArgument, BoundsCheck } kind = Kind::Ok;
  std::string argument, what;
  BoundsViolation violation;
  std::vector<std::byte> weights;  ///< the whole weights output buffer after the call
  std::vector<float> momentum;     ///< the whole momentum output (Adagrad) after the call
  std::vector<float> psw_grad;     ///< [N] when requested
  BackwardStats stats;
  bool sentinels_intact = true;    ///< bytes past the end of every output untouched
  oracle::BackwardResultView view() const {
    return {weights.data(), momentum.empty() ? nullptr : momentum.data(),
            psw_grad.empty() ? nullptr : psw_grad.data()};
  }
};
std::string to_string(const BackwardOutcome& o);

struct BackwardRunOptions {
  BackwardStrategy strategy;
  bool in_place = false;   ///< outputs alias the input weights / momentum
  bool hoisted = false;    ///< TransposeOp on a second stream, handed to BackwardOp::run
  bool want_psw = false;   ///< request per-sample-weight gradients (weighted problems)
  /// The small-table path's knobs (docs/small-table.md), for the ForwardOp too.
  cuda::SmallTableTuning small_table;
  /// The short-run kernel instance (cuda::BackwardTuning::ShortRuns).
  cuda::BackwardTuning::ShortRuns short_runs = cuda::BackwardTuning::ShortRuns::Auto;
  /// The short-run kernel's group sizes (cuda::BackwardTuning::ShortGroups).
  cuda::BackwardTuning::ShortGroups short_groups = cuda::BackwardTuning::ShortGroups::Auto;
  /// The chunk-order sort (cuda::BackwardTuning::ChunkOrder).
  cuda::BackwardTuning::ChunkOrder chunk_order = cuda::BackwardTuning::ChunkOrder::Auto;
  /// Whether the lookups are sorted (cuda::BackwardTuning::Sort; Auto skips the sort when every
  /// feature takes the small-table path).
  cuda::BackwardTuning::Sort sort = cuda::BackwardTuning::Sort::Auto;
  /// The small-table split-K kernel (cuda::BackwardTuning::SplitK).
  cuda::BackwardTuning::SplitK split_k = cuda::BackwardTuning::SplitK::Warp;
  /// How the chunk kernel takes its chunks (cuda::BackwardTuning::ChunkSchedule).
  cuda::BackwardTuning::ChunkSchedule chunk_schedule = cuda::BackwardTuning::ChunkSchedule::Dynamic;
  /// Short runs and chunks in two launches or one (cuda::BackwardTuning::RunLaunch), and the
  /// share of warps that start on the chunks in one.
  cuda::BackwardTuning::RunLaunch run_launch = cuda::BackwardTuning::RunLaunch::Auto;
  std::int32_t interleave_chunk_every = 1;
  /// The sort keys of the transpose inside BackwardOp::run (cuda::TransposeTuning), and of the
  /// TransposeOp of a hoisted run (they may differ: both hand the run kernels the same run arrays).
  cuda::TransposeTuning transpose;
  cuda::TransposeTuning hoisted_transpose;
  /// Run the ForwardOp first with its histogram saved, and hand it to the backward
  /// (stale_batch: stamped with batch 1 while the backward runs batch 2).
  bool saved_counts = false;
  bool stale_batch = false;
  /// grad_output placed this many bytes past a 256-byte-aligned device address: one element
  /// makes its rows unaligned, so the run kernels take the register gather ("bwd.gather.registers")
  /// instead of the staged one.
  std::size_t grad_misalign = 0;
};

/// The CUDA BackwardOp on device copies of `c`.
BackwardOutcome run_backward_gpu(BackwardCase& c, const BackwardRunOptions& o);
/// The reference backward (tbe::backward_reference) on host copies of `c`.
BackwardOutcome run_backward_reference(BackwardCase& c, bool want_psw);

/// The oracle's judgement of an outcome (oracle::check_backward on the case's host problem).
oracle::BackwardCheckReport judge(BackwardCase& c, const BackwardOutcome& gpu);

/// Fills grad_output with values from a seeded stream: uniform in [-1, 1) rounded to the output
/// type, or small integers in [-4, 4].
void fill_grad_output(BackwardCase& c, std::uint64_t seed, bool small_integers);

/// RapidCheck generator (call inside a property): a valid backward case built from
/// gen_valid_case (modes, pooling, VBE, dtypes, policy), with SR on some 16-bit cases, an
/// optimizer with random hyper-parameters, momentum and grad_output. `small_rows` draws tables
/// of 1..3 rows and longer bags so that runs get long.
/// How gen_backward_case draws D_t: as gen_valid_case does (Any), rounded up to a multiple of 4
/// (MultipleOf4: with an aligned grad_output the run kernels may take the staged gather,
/// kernels/backward_runs.cuh), or a multiple of 4 in [64, 128] (Staged: warp groups of 16 or 32
/// lanes, the staged gather's shape).
enum class DimRule { Any, MultipleOf4, Staged };
BackwardCase gen_backward_case(BoundsCheckMode mode, bool small_rows, DimRule dims = DimRule::Any);
/// A strategy with random threshold, chunk size, long-run mode and determinism.
BackwardStrategy gen_strategy();
std::string describe(const BackwardStrategy& s);

/// Failing evaluations of a backward property leave a backward case folder (docs/case-files.md
/// "Backward"), as FailureRecorder does for the forward: run the body through a
/// BackwardFailureRecorder; when it fails (an RC_ASSERT failure or any exception, not a discard)
/// the case (inputs, optimizer, SR stream, the strategy and whether the transpose was hoisted)
/// and the GPU outcome given to record() (as `recorded`, expect pass) are written to
/// tbe-failures/<property>/ (overwritten on every failing evaluation, so the folder ends up holding
/// the shrunk counterexample) and the replay and check commands are RC_LOGged.
class BackwardFailureRecorder {
 public:
  BackwardFailureRecorder(std::string property, const BackwardCase& c, const BackwardStrategy& s,
                          bool hoisted = false)
      : property_(std::move(property)), case_(c), strategy_(s), hoisted_(hoisted) {}
  /// The GPU outcome to store as the case's recorded outputs (the last one given wins).
  void record(const BackwardOutcome& gpu, std::string implementation) {
    gpu_ = gpu;
    implementation_ = std::move(implementation);
  }
  template <class Body>
  void run(Body&& body);
  /// Writes the folder and RC_LOGs the commands; never throws (a write error is logged).
  void save() noexcept;

 private:
  std::string property_;
  const BackwardCase& case_;
  BackwardStrategy strategy_;
  bool hoisted_;
  std::optional<BackwardOutcome> gpu_;
  std::string implementation_;
};

}  // namespace tbe::test

#include <rapidcheck.h>

namespace tbe::test {
template <class Body>
void BackwardFailureRecorder::run(Body&& body) {
  try {
    body();
  } catch (const rc::detail::CaseResult& r) {
    if (r.type == rc::detail::CaseResult::Type::Failure) save();
    throw;
  } catch (...) {
    save();
    throw;
  }
}
}  // namespace tbe::test
