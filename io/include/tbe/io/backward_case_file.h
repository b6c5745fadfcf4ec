// Backward case folders (`operator: "backward"`): one TBE backward + exact-optimizer call
// (tbe/backward.h, semantics docs/backward.md) as case.json plus fixed-name .npy tensors: the
// forward inputs of a forward case (weights BEFORE the update), grad_output.npy, momentum.npy
// (rowwise Adagrad), optionally the updated weights / momentum / per-sample-weight gradients an
// implementation produced, and what the suite expects when judging them. Format:
// docs/case-files.md "Backward".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backward_case.h"
#include "tbe/io/case_file.h"

namespace tbe::io {

/// The GPU strategy a backward case was run or found with (case.json "strategy"). The strategy is
/// semantics-neutral (docs/backward.md "Work routing"): it is provenance for replaying a GPU
/// failure and never changes how the recorded outputs are judged.
struct BackwardStrategyRecord {
  BackwardStrategy strategy;
  bool hoisted = false;  ///< the transpose ran in a TransposeOp first (tbe/cuda/backward.h)
};

/// What an implementation produced for a backward case; every output is optional (judge what is
/// there), an implementation that raised records `error` and no output.
struct BackwardRecordedOutputs {
  std::string implementation;  ///< e.g. "torch 2.11 fbgemm_gpu SplitTableBatchedEmbeddingBagsCodegen"
  /// The whole weights buffer after the update: [Σ_t E_t·D_t] of tables.dtype (rows without a
  /// lookup hold their input value).
  std::optional<std::vector<std::byte>> weights;
  std::optional<std::vector<float>> momentum;                ///< [Σ_t E_t] FP32; Adagrad only
  std::optional<std::vector<float>> per_sample_weight_grad;  ///< [N] FP32; weighted cases only
  std::optional<std::int64_t> warnings;  ///< bounds-check warning count, if it reports one
  std::optional<std::string> error;      ///< "bounds_check", "invalid_argument", "device_error"
};

/// A backward case plus metadata. problem.forward holds the weights before the update;
/// problem.momentum is [Σ_t E_t] for rowwise Adagrad and empty for SGD.
struct BackwardCaseFile {
  std::string name;
  std::string provenance;  ///< free text: generator/seed, property, bug report id
  std::uint64_t seed = 0;
  BackwardCase problem;
  std::optional<BackwardStrategyRecord> strategy;
  std::optional<BackwardRecordedOutputs> recorded;
  std::optional<Expectation> expect;
};

/// Writes `dir`/case.json and the tensors (creates `dir`; fixed tensor names this case does not
/// write are removed). Throws InvalidArgument for a hyper-parameter that is not finite (JSON holds
/// finite numbers only), momentum or recorded outputs inconsistent with the optimizer /
/// weighting, recorded outputs together with an error, int32 indices that do not fit, I/O errors.
void write_case(const std::string& dir, const BackwardCaseFile& c);
/// Reads and validates a backward case folder (untrusted input): the checks of read_case on the
/// forward inputs, then the optimizer, SR stream and strategy keys, grad_output.npy (the forward
/// output's element count and dtype, any shape), momentum.npy ([Σ_t E_t] FP32, required for
/// rowwise Adagrad, an error for SGD), tbe::validate(BackwardProblem, strategy), the recorded
/// tensors. Errors are InvalidArgument naming the file, the key and the bad value.
BackwardCaseFile read_backward_case(const std::string& dir);
/// True when both cases hold the same data bit for bit (floats and hyper-parameters compared by
/// their bits), strategy, recorded outputs and expectation included.
bool bitwise_equal(const BackwardCaseFile& a, const BackwardCaseFile& b);

}  // namespace tbe::io
