// Test harness for the CUDA IKBO LCE (tbe::cuda::LceOp): runs one host LCE call through the
// device-level op with canaries (output poisoned with NaN bytes 0xFF before launch, sentinel
// bytes past its end, a non-default stream) and through the reference (tbe::ikbo::lce_reference),
// each reduced to an LceOutcome that can be compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/cuda/ikbo_lce.h"
#include "tbe/ikbo.h"
#include "tbe/ikbo_workloads.h"

namespace tbe::test {

/// What an LCE call did: returned an output, or threw InvalidArgument.
struct LceOutcome {
  enum class Kind { Ok, InvalidArgument } kind = Kind::Ok;
  std::string argument;           ///< InvalidArgument::argument()
  std::string what;
  std::vector<std::byte> output;  ///< Ok: B·M·N elements of policy.storage
  std::vector<std::string> paths; ///< LceOp::paths()
  bool sentinels_intact = true;   ///< bytes past the end of the output untouched
  bool poison_intact = true;      ///< on error: the output still holds the poison (bitwise)
};
std::string to_string(const LceOutcome& o);

/// How the tensors reach the op: dense, or K padded with zeros (LceLayout: W [M, k_pad] with zero
/// columns, E [batch, k_pad, N] with zero rows), as a model that keeps padded tensors has them.
struct LcePadding {
  std::int64_t k_c_pad = 0, k_u_pad = 0;  ///< 0: dense
};

/// The reference (lce_reference, validate, validate_map) on the host problem.
LceOutcome run_lce_reference(const ikbo::LceProblem& p);

/// LceOp on device copies of the host problem's buffers (sizes from the shape; nothing is
/// uploaded for a null pointer), canaries on. Shapes that validate() rejects reach LceOp, which
/// must throw before touching anything.
LceOutcome run_lce_gpu(const ikbo::LceProblem& p, cuda::LceStage stage,
                       const LcePadding& padding = {}, const cuda::LceTuning& tuning = {});
inline constexpr std::size_t kLceSentinelBytes = 256;

/// Number of elements whose bytes differ (-1 if the sizes differ).
std::int64_t count_element_differences(const LceOutcome& a, const LceOutcome& b, DType storage);

/// Failing evaluations of an LCE property leave an ikbo-lce case folder (docs/case-files.md), as
/// FailureRecorder does for the forward: the case (dense tensors: padding and tuning are
/// semantics-neutral and go to the provenance `how`) and the GPU outcome given to record() (as
/// `recorded`, expect pass) are written to tbe-failures/<property>/ (overwritten on every failing
/// evaluation: the folder ends up holding the shrunk counterexample) and the replay and check
/// commands are RC_LOGged.
class LceFailureRecorder {
 public:
  LceFailureRecorder(std::string property, const ikbo::LceCase& c, std::string how)
      : property_(std::move(property)), case_(c), how_(std::move(how)) {}
  /// The GPU outcome to store as the case's recorded output (the last one given wins).
  void record(const LceOutcome& gpu, std::string implementation) {
    gpu_ = gpu;
    implementation_ = std::move(implementation);
  }
  template <class Body>
  void run(Body&& body);
  /// Writes the folder and RC_LOGs the commands; never throws (a write error is logged).
  void save() noexcept;

 private:
  std::string property_;
  const ikbo::LceCase& case_;
  std::string how_;
  std::optional<LceOutcome> gpu_;
  std::string implementation_;
};

}  // namespace tbe::test

#include <rapidcheck.h>

namespace tbe::test {
template <class Body>
void LceFailureRecorder::run(Body&& body) {
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
