// Precision policies (docs/oracle.md, docs/semantics.md "Rounding") and once-only rounding to
// the element types; the per-type traits (unit roundoff, ranges, storage) are tbe/dtype_traits.h.
// A policy is chosen once (CLI / test generator), carried in the problem options, read by the
// CUDA dispatch (which accumulator to instantiate) and by the oracle (to size enclosures), and
// printed in every report line.
#pragma once

#include <cstdint>
#include <string>

#include "tbe/dtype_traits.h"
#include "tbe/types.h"

namespace tbe {

/// Which family of rules the policy follows.
enum class PolicyKind : std::uint8_t {
  /// Seed default: FP16/BF16 weights accumulate in FP32; FP32 weights accumulate in FP64.
  SeedDefault,
  /// Mirrors FBGEMM's CUDA kernels: FP32 accumulation for every weight type.
  FbgemmCuda,
};

/// A precision policy for one TBE call: storage, output and accumulation types, optimizer state
/// type, write-back rounding. Build one with make_policy(); fields are plain data so tests may
/// construct deliberately wrong policies (e.g. FP16 accumulation) for sharpness checks.
struct PrecisionPolicy {
  PolicyKind kind = PolicyKind::SeedDefault;
  DType weights = DType::F32;       ///< storage type of embedding rows
  DType output = DType::F32;        ///< type of the forward output (rounded once)
  DType accumulation = DType::F64;  ///< type every reduction accumulates in
  DType optimizer_state = DType::F32;
  RoundingMode write_back = RoundingMode::Nearest;

  bool operator==(const PrecisionPolicy&) const = default;
};

/// The policy of `kind` for the given weight and output types.
/// SeedDefault: accumulation DTypeTraits<weights>::seed_default_accumulation (F64 for F32 weights,
/// else F32). FbgemmCuda: accumulation F32.
/// Throws InvalidArgument if weights/output are not one of F32/F16/BF16.
PrecisionPolicy make_policy(PolicyKind kind, DType weights, DType output,
                            RoundingMode write_back = RoundingMode::Nearest);

/// "seed-default" / "fbgemm-cuda".
std::string to_string(PolicyKind k);
PolicyKind parse_policy_kind(const std::string& s, const char* what = "policy");
/// e.g. "seed-default[w=fp16,out=fp32,acc=fp32,state=fp32,rne]".
std::string to_string(const PrecisionPolicy& p);

/// Round an FP64 value once to `t` with round-to-nearest-even (F64: identity). Correct rounding:
/// F16/BF16 go through FP32 rounded to *odd*, then RNE (exact since 24 >= p + 2). Note: a plain
/// double -> float -> half double rounding is NOT correct for arbitrary doubles (only for the
/// result of one operation on narrow operands): a value just beside a half midpoint can land on it.
/// Throws InvalidArgument for integer types.
double round_to(DType t, double x);
/// Largest value of type `t` <= x, and smallest >= x (directed rounding; used by SR and the oracle).
double round_down_to(DType t, double x);
double round_up_to(DType t, double x);

}  // namespace tbe
