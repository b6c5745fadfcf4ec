// The one traits table of the floating element types (Eigen's NumTraits, CUTLASS's numeric
// types): per DType the host storage type, significand digits p, unit roundoff u = 2^-p (RNE),
// smallest subnormal (and its exponent), smallest normal, largest finite value, the accumulation
// type of the seed-default precision policy and the rounding style. The reference, the oracle
// and the tools read these properties here; nothing else switches on a float DType for them.
// Values: IEEE 754 binary16 / binary32 / binary64 and bfloat16; rounding: docs/semantics.md
// "Rounding".
//
// Two ways in:
// - compile time: DTypeTraits<DType::F16>::unit_roundoff, DTypeTraits<T>::Storage. Integer
//   dtypes (I32, I64) are rejected at compile time: DTypeTraits<DType::I32> fails a static_assert.
// - run time: float_traits(t) returns the same values as a FloatTraits struct; it throws
//   InvalidArgument for an integer dtype (it never answers with another type's traits).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "tbe/errors.h"
#include "tbe/types.h"

// Eigen's 16-bit float types (defined by <Eigen/Core>, which declares them the same way): naming
// them as DTypeTraits<T>::Storage needs no Eigen include; using them does.
namespace Eigen {
struct half;
struct bfloat16;
}  // namespace Eigen

namespace tbe {

/// Compile-time traits of the floating DType T. The primary template is the rejection of every
/// other DType (I32, I64): instantiating it fails to compile.
template <DType T>
struct DTypeTraits {
  static_assert(is_floating(T), "DTypeTraits: I32/I64 are index types, they have no float traits");
};

/// IEEE binary16.
template <>
struct DTypeTraits<DType::F16> {
  using Storage = Eigen::half;  ///< host type of one element (2 bytes)
  static constexpr int digits = 11;                       ///< p (hidden bit included)
  static constexpr double unit_roundoff = 0x1p-11;        ///< u = 2^-p
  static constexpr int min_subnormal_exponent = -24;      ///< smallest subnormal = 2^-24
  static constexpr double min_subnormal = 0x1p-24;
  static constexpr double min_normal = 0x1p-14;
  static constexpr double max_finite = 65504.0;           ///< (2 - 2^-10)·2^15
  static constexpr DType seed_default_accumulation = DType::F32;
  static constexpr std::float_round_style rounding = std::round_to_nearest;  ///< ties to even
};

/// bfloat16: binary32's exponent range with an 8-bit significand.
template <>
struct DTypeTraits<DType::BF16> {
  using Storage = Eigen::bfloat16;  ///< host type of one element (2 bytes)
  static constexpr int digits = 8;
  static constexpr double unit_roundoff = 0x1p-8;
  static constexpr int min_subnormal_exponent = -133;
  static constexpr double min_subnormal = 0x1p-133;
  static constexpr double min_normal = 0x1p-126;
  static constexpr double max_finite = 0x1.FEp127;        ///< (2 - 2^-7)·2^127
  static constexpr DType seed_default_accumulation = DType::F32;
  static constexpr std::float_round_style rounding = std::round_to_nearest;
};

/// IEEE binary32.
template <>
struct DTypeTraits<DType::F32> {
  using Storage = float;
  static constexpr int digits = 24;
  static constexpr double unit_roundoff = 0x1p-24;
  static constexpr int min_subnormal_exponent = -149;
  static constexpr double min_subnormal = 0x1p-149;
  static constexpr double min_normal = 0x1p-126;
  static constexpr double max_finite = 0x1.FFFFFEp127;    ///< (2 - 2^-23)·2^127
  static constexpr DType seed_default_accumulation = DType::F64;
  static constexpr std::float_round_style rounding = std::round_to_nearest;
};

/// IEEE binary64 (the reference's arithmetic; the seed default keeps it).
template <>
struct DTypeTraits<DType::F64> {
  using Storage = double;
  static constexpr int digits = 53;
  static constexpr double unit_roundoff = 0x1p-53;
  static constexpr int min_subnormal_exponent = -1074;
  static constexpr double min_subnormal = 0x1p-1074;
  static constexpr double min_normal = 0x1p-1022;
  static constexpr double max_finite = 0x1.FFFFFFFFFFFFFp1023;  ///< (2 - 2^-52)·2^1023
  static constexpr DType seed_default_accumulation = DType::F64;
  static constexpr std::float_round_style rounding = std::round_to_nearest;
};

/// The values of DTypeTraits<T> (everything but Storage) for a DType known at run time.
struct FloatTraits {
  double unit_roundoff;  ///< u = 2^-p
  double min_subnormal;  ///< smallest positive subnormal, 2^min_subnormal_exponent
  double max_finite;     ///< largest finite value
  int digits;            ///< p, significand bits (hidden bit included)
  int min_subnormal_exponent;
  double min_normal;  ///< smallest positive normal
  DType seed_default_accumulation;  ///< accumulation type of PolicyKind::SeedDefault (precision.h)
  std::float_round_style rounding;

  /// The values of DTypeTraits<T>.
  template <DType T>
  static constexpr FloatTraits of() {
    using Tr = DTypeTraits<T>;
    return {Tr::unit_roundoff,          Tr::min_subnormal, Tr::max_finite,
            Tr::digits,                 Tr::min_subnormal_exponent,
            Tr::min_normal,             Tr::seed_default_accumulation,
            Tr::rounding};
  }
};

/// The traits of floating type t (F16, BF16, F32, F64). Throws InvalidArgument (argument
/// "dtype") for an integer dtype.
inline FloatTraits float_traits(DType t) {
  switch (t) {
    case DType::F16: return FloatTraits::of<DType::F16>();
    case DType::BF16: return FloatTraits::of<DType::BF16>();
    case DType::F32: return FloatTraits::of<DType::F32>();
    case DType::F64: return FloatTraits::of<DType::F64>();
    case DType::I32:
    case DType::I64: break;
  }
  throw InvalidArgument("dtype", "float_traits: " + to_string(t) +
                                     " is not a floating type (fp16, bf16, fp32, fp64)");
}

}  // namespace tbe
