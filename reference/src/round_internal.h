// Internal: correctly rounded FP64 -> FP16/BF16 conversion (shared by precision.cpp, forward.cpp
// and host_case.cpp; not a public header).
//
// Why not simply double -> float -> half? That double rounding is innocuous only for the exact
// result of one +, -, ×, ÷ or sqrt on operands of the narrow type (24 >= 2p + 2, Figueroa). An
// arbitrary double, e.g. an FP64 sum of many terms, can lie just beside a half midpoint: the first
// rounding lands exactly on the midpoint and the tie then goes the wrong way. Rounding the first
// step to *odd* instead (Boldo & Melquiond) keeps the sticky information: RNE_p(RO_24(x)) =
// RNE_p(x) whenever 24 >= p + 2, which holds for FP16 (p = 11) and BF16 (p = 8).
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "tbe/dtype_traits.h"

namespace tbe::detail {

/// x rounded to FP32 with round-to-odd: exact values stay, inexact ones take the neighbour with an
/// odd significand (overflow goes to ±FLT_MAX, which is odd, never to inf).
inline float round_to_odd_f32(double x) {
  float f = static_cast<float>(x);  // RNE: one of the two neighbours of x
  if (static_cast<double>(f) == x || std::isnan(x)) return f;
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 1u) == 0)
    f = std::nextafter(f, x > static_cast<double>(f) ? std::numeric_limits<float>::infinity()
                                                     : -std::numeric_limits<float>::infinity());
  return f;
}

// Round-to-odd to FP32, then RNE to p bits, is RNE to p bits when FP32 keeps p + 2 bits.
static_assert(DTypeTraits<DType::F32>::digits >= DTypeTraits<DType::F16>::digits + 2);
static_assert(DTypeTraits<DType::F32>::digits >= DTypeTraits<DType::BF16>::digits + 2);

/// Correct RNE of an FP64 value to FP16 / BF16 (their host storage types, Eigen::half /
/// Eigen::bfloat16).
inline DTypeTraits<DType::F16>::Storage half_rne(double x) {
  return DTypeTraits<DType::F16>::Storage(round_to_odd_f32(x));
}
inline DTypeTraits<DType::BF16>::Storage bfloat16_rne(double x) {
  return DTypeTraits<DType::BF16>::Storage(round_to_odd_f32(x));
}

}  // namespace tbe::detail
