// Test harness for the CUDA backend: runs one ForwardCase through the device-level ForwardOp with
// canaries (NaN-poisoned output before launch, sentinel bytes past its end, a non-default stream)
// and through the reference, and reduces each side to an Outcome that can be compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "tbe/backend.h"
#include "tbe/bounds_check.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/host_case.h"

namespace tbe::test {

/// What a forward call did: returned an output, or threw one of the two contract errors.
struct Outcome {
  enum class Kind { Ok, InvalidArgument, BoundsCheck } kind = Kind::Ok;
  std::string argument;          ///< InvalidArgument::argument()
  BoundsViolation violation;     ///< BoundsCheckError::violation()
  std::string what;
  std::vector<std::byte> output; ///< Ok: numel elements of the output type
  ForwardStats stats;
  // GPU canaries
  bool sentinels_intact = true;  ///< bytes past the end of the output untouched
  bool poison_intact = true;     ///< on error: the output still holds the NaN poison
};
std::string to_string(const Outcome& o);

/// Device copies of a case's buffers (weights, indices, offsets, per-sample weights; sizes from
/// the containers, so invalid shapes are safe to upload) and `problem`: the case's view with every
/// data pointer moved to its device copy (per_sample_weights null when the case is unweighted; an
/// empty indices/offsets buffer points at a 256-byte dummy, as the host view is non-null). Tests
/// that build a cuda::ForwardOp on a ForwardCase use it: a host pointer left in the problem
/// reaches a kernel as an illegal address.
struct DeviceCase {
  cuda::DeviceBuffer weights, indices, offsets, psw;
  ForwardProblem problem;
  explicit DeviceCase(ForwardCase& c);
};

/// The reference forward (tbe::forward_reference) on the case.
Outcome run_reference(ForwardCase& c);

/// The CUDA ForwardOp on device copies of the case (uploaded from the containers as they are, so
/// invalid shapes are safe to upload), output poisoned with NaN (all bytes 0xFF) plus
/// kSentinelBytes of 0xA5 after it, on a non-default stream.
/// tuning: the ForwardTuning knobs (semantics must not depend on them).
Outcome run_gpu(ForwardCase& c, bool fused_bounds_check, const cuda::ForwardTuning& tuning = {});

/// A ForwardTuning with every pooled-gather knob drawn (pipelined, prefer_l1, rows in flight 4 or
/// 8, 32-bit row index, staged_rows Auto / 0 / 8 / 16 with Auto's threshold 0, 64 or 2^17 bags,
/// bags per streamed warp); the small-table knobs keep their defaults.
cuda::ForwardTuning gen_forward_tuning();

/// The implementation a failing case records: "tbe_optimized cuda::ForwardOp (fused bounds check,
/// pipelined=0, prefer_l1=1, rows_in_flight=4, row_index32=1, staged_rows=-1,
/// staged_auto_min_bags=131072, staged_bags_per_warp=0)".
std::string describe_gpu(bool fused_bounds_check, const cuda::ForwardTuning& tuning = {});
inline constexpr std::size_t kSentinelBytes = 256;

/// The GPU repair step (ForwardOp::repair) on device copies of the case.
RepairResult repair_gpu(ForwardCase& c);

/// Number of elements of `o.output` whose bytes differ between a and b.
std::int64_t count_bit_differences(const Outcome& a, const Outcome& b);

/// Failing evaluations leave a replayable case (docs/case-files.md): run the body of a property
/// through a FailureRecorder; when the body fails (an RC_ASSERT failure or any exception, not a
/// discard) the case and the GPU outcome given to record() are written to
/// tbe-failures/<property>/ (relative to the working directory, overwritten on every failing
/// evaluation: RapidCheck evaluates shrink candidates after the first failure, so the folder ends
/// up holding the shrunk counterexample) and the replay command is RC_LOGged.
class FailureRecorder {
 public:
  FailureRecorder(std::string property, const ForwardCase& c)
      : property_(std::move(property)), case_(c) {}
  /// The GPU outcome to store as the case's recorded outputs (the last one given wins).
  void record(const Outcome& gpu, std::string implementation) {
    gpu_ = gpu;
    implementation_ = std::move(implementation);
  }
  template <class Body>
  void run(Body&& body) {
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
  /// Writes the folder and RC_LOGs the replay command; never throws (a write error is logged).
  void save() noexcept;
  static std::string folder(const std::string& property);

 private:
  std::string property_;
  const ForwardCase& case_;
  std::optional<Outcome> gpu_;
  std::string implementation_;
};

/// Fills every table of `c` with values from a seeded stream: uniform in [-1, 1) (rounded to the
/// storage type), or small integers in [-8, 8] when small_integers.
void fill_weights(ForwardCase& c, std::uint64_t seed, bool small_integers = false);

}  // namespace tbe::test
