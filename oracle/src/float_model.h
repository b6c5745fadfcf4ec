// Internal helpers of tbe_oracle: rounding to the accumulation type, exact-representability and
// quantum (exponent of the lowest set bit) of FP64 values, and which float type embeds which
// (from tbe/dtype_traits.h).
#pragma once

#include <bit>
#include <cstdint>

#include "tbe/dtype_traits.h"
#include "tbe/float_loader.h"  // FloatLoader: how the oracle reads weights and grads
#include "tbe/precision.h"

namespace tbe::oracle::detail {

/// Work (element operations) below which an OpenMP loop runs on the calling thread: a parallel
/// region costs microseconds, far more with oversubscribed cores (spinning workers), which would
/// dominate the many tiny problems of the property tests (same rule as the reference's).
inline constexpr std::int64_t kParallelWork = 1 << 16;
inline bool worth_parallel(std::int64_t work) { return work >= kParallelWork; }

/// RNE rounding of x to acc: tbe::round_to with its F64 / F32 cases inline, since the emulations
/// round every operation (F16/BF16 and the rejection of integer types: round_to).
inline double round_acc(DType acc, double x) {
  switch (acc) {
    case DType::F64: return x;
    case DType::F32: return static_cast<double>(static_cast<float>(x));
    default: return round_to(acc, x);
  }
}

/// True if x (finite) is a value of type t.
inline bool representable(DType t, double x) { return round_acc(t, x) == x; }

/// Exponent e of the lowest set bit of x != 0 finite: x is an odd multiple of 2^e.
inline int lsb_exponent(double x) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const std::uint64_t frac = bits & ((std::uint64_t{1} << 52) - 1);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased == 0) return -1074 + std::countr_zero(frac);  // subnormal (frac != 0)
  const std::uint64_t sig = frac | (std::uint64_t{1} << 52);
  return biased - 1075 + std::countr_zero(sig);
}

/// True if every value of type `narrow` is a value of type `wide` (both floating): wide has at
/// least as many significand digits, as fine a quantum and as large a range.
inline bool embeds(DType narrow, DType wide) {
  const FloatTraits n = float_traits(narrow), w = float_traits(wide);
  return n.digits <= w.digits && n.min_subnormal_exponent >= w.min_subnormal_exponent &&
         n.max_finite <= w.max_finite;
}

}  // namespace tbe::oracle::detail
