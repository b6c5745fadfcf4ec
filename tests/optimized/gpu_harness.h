// Test harness for the CUDA backend: runs one ForwardCase through the device-level ForwardOp with
// canaries (NaN-poisoned output before launch, sentinel bytes past its end, a non-default stream)
// and through the reference, and reduces each side to an Outcome that can be compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backend.h"
#include "tbe/bounds_check.h"
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

/// The reference forward (tbe::forward_reference) on the case.
Outcome run_reference(ForwardCase& c);

/// The CUDA ForwardOp on device copies of the case (uploaded from the containers as they are, so
/// invalid shapes are safe to upload), output poisoned with NaN (all bytes 0xFF) plus
/// kSentinelBytes of 0xA5 after it, on a non-default stream.
/// pipelined / prefer_l1: the ForwardTuning knobs (semantics must not depend on them).
Outcome run_gpu(ForwardCase& c, bool fused_bounds_check, bool pipelined = false,
                bool prefer_l1 = true, int rows_in_flight = 4);
inline constexpr std::size_t kSentinelBytes = 256;

/// The GPU repair step (ForwardOp::repair) on device copies of the case.
RepairResult repair_gpu(ForwardCase& c);

/// Number of elements of `o.output` whose bytes differ between a and b.
std::int64_t count_bit_differences(const Outcome& a, const Outcome& b);

/// Fills every table of `c` with values from a seeded stream: uniform in [-1, 1) (rounded to the
/// storage type), or small integers in [-8, 8] when small_integers.
void fill_weights(ForwardCase& c, std::uint64_t seed, bool small_integers = false);

}  // namespace tbe::test
