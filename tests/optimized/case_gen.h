// RapidCheck generators of forward cases over every axis the CUDA backend dispatches on: pooling,
// per-sample weights, VBE, index width, weight/output dtype, policy, D (odd, 1, 2048), L (0, 1,
// 255, 256, 257), tiny E (duplicates), offsets[0] > 0, and malformed offsets/indices.
// Valid inputs are built valid by construction; malformed ones by explicit mutations.
// Call only inside a RapidCheck property (they draw with operator*).
#pragma once

#include <cstdint>
#include <string>

#include "tbe/host_case.h"

namespace tbe::test {

struct CaseLimits {
  bool allow_vbe = true;
  bool allow_none_pooling = true;
  std::int64_t max_bags = 24;
};

/// A valid case (every offset and index in range); options.bounds_check = mode.
ForwardCase gen_valid_case(BoundsCheckMode mode, const CaseLimits& limits = {});

/// Applies 1..4 mutations to offsets and/or indices (values outside [0, N] / [0, E), broken
/// monotonicity, a wrong last offset). The case stays a valid *argument* (shapes unchanged).
void gen_malform(ForwardCase& c);

/// One line describing the case (for counterexamples).
std::string describe(const ForwardCase& c);

}  // namespace tbe::test
