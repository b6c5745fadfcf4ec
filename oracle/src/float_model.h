// Internal helpers of tbe_oracle: rounding to the accumulation type, exact-representability and
// quantum (exponent of the lowest set bit) of FP64 values, and which float type embeds which
// (from tbe/dtype_traits.h).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

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

/// The FP64 neighbour of x towards -inf / +inf: std::nextafter(x, ∓inf) by bit steps, inline
/// (the enclosures step every interval end). NaN stays NaN; -inf / +inf stay themselves.
inline double next_down64(double x) {
  if (x != x || x == -std::numeric_limits<double>::infinity()) return x;
  if (x == 0.0) return -std::numeric_limits<double>::denorm_min();
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  return std::bit_cast<double>(x > 0.0 ? bits - 1 : bits + 1);
}
inline double next_up64(double x) { return -next_down64(-x); }

/// tbe::round_down_to / round_up_to (the largest value of t <= x, the smallest >= x; NaN stays
/// NaN) with the FP32 case inline: the FP32 result of RNE steps one FP32 value by its bits when
/// it lies on the wrong side of x (±0 step to ∓ / ± the smallest subnormal; ±inf to ±max). The
/// same values as tbe::round_down_to / round_up_to (pinned by tests/oracle/test_float_model.cpp).
inline double round_down(DType t, double x) {
  if (t != DType::F32) return round_down_to(t, x);
  if (x != x) return x;
  const float f = static_cast<float>(x);
  if (static_cast<double>(f) <= x) return static_cast<double>(f);
  if (f == 0.0f) return -static_cast<double>(std::numeric_limits<float>::denorm_min());
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  return static_cast<double>(std::bit_cast<float>(f > 0.0f ? bits - 1 : bits + 1));
}
inline double round_up(DType t, double x) {
  if (t != DType::F32) return round_up_to(t, x);
  return x != x ? x : -round_down(DType::F32, -x);
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
