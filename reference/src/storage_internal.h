// Internal: typed element access to host buffers of the float storage types (not a public header),
// for the reference kernels' inner loops (forward.cpp, backward.cpp): exact loads as FP64 and
// correctly rounded stores (RNE; FP16/BF16 through round-to-odd FP32, round_internal.h), the same
// values as load_as_double / store_from_double (host_case.h) without a dtype switch per element.
#pragma once

#include <Eigen/Core>
#include <bit>
#include <cstdint>
#include <string>

#include "round_internal.h"
#include "tbe/errors.h"
#include "tbe/types.h"

namespace tbe::detail {

/// IEEE binary16 bits -> the FP32 value (exact, NaN payloads kept; equal to Eigen's conversion,
/// pinned for all 65536 patterns by tests/reference/test_storage.cpp). Branch-free, so loops over
/// a row vectorize. Finite values: the exponent and significand shifted into FP32 position read
/// as 2^-112 times the value, and the scaling by 2^112 is exact (subnormal halves become normal
/// floats). Inf / NaN (exponent all ones) get the FP32 exponent all ones (a mask, not a branch).
inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = static_cast<std::uint32_t>(h & 0x7fffu) << 13;
  const std::uint32_t special = 0u - static_cast<std::uint32_t>(em >= (0x7c00u << 13));  // mask
  const std::uint32_t finite = std::bit_cast<std::uint32_t>(std::bit_cast<float>(em) * 0x1p112f);
  return std::bit_cast<float>((finite & ~special) | ((0x7f800000u | em) & special) | sign);
}

/// RNE of x to a binary format with kMantissa fraction bits and exponent bias kBias (FP16: 10, 15;
/// BF16: 7, 127), straight from the FP64 bits, for the common case of a normal result: |x| in
/// [2^(1 - kBias), 2^(kBias + 1)). Returns false (and leaves `bits`) outside it. A carry out of
/// the fraction bumps the exponent, up to the all-ones exponent with fraction 0 = inf, which is
/// RNE's overflow. Equal to half_rne / bfloat16_rne there (rounding to odd first changes
/// nothing, round_internal.h), pinned by tests/reference/test_storage.cpp.
template <int kMantissa, int kBias>
inline bool rne_normal_bits(double x, std::uint16_t& bits) {
  const std::uint64_t u = std::bit_cast<std::uint64_t>(x);
  const std::uint64_t a = u & 0x7fffffffffffffffull;  // |x|
  constexpr std::uint64_t lo = static_cast<std::uint64_t>(1023 + 1 - kBias) << 52;
  constexpr std::uint64_t hi = static_cast<std::uint64_t>(1023 + kBias + 1) << 52;
  if (a < lo || a >= hi) return false;
  constexpr int shift = 52 - kMantissa;
  constexpr std::uint64_t halfway = std::uint64_t{1} << (shift - 1);
  const std::uint64_t rest = a & ((std::uint64_t{1} << shift) - 1);
  std::uint64_t h = (a >> shift) - (static_cast<std::uint64_t>(1023 - kBias) << kMantissa);
  h += static_cast<std::uint64_t>(rest > halfway || (rest == halfway && (h & 1) != 0));
  bits = static_cast<std::uint16_t>(h | ((u >> 48) & 0x8000u));
  return true;
}

/// FP32 weights / gradients.
struct F32Storage {
  using type = float;
  static constexpr DType dtype = DType::F32;
  static double load(const type* p, std::int64_t i) { return p[i]; }
  static void store(type* p, std::int64_t i, double v) { p[i] = static_cast<float>(v); }
};

/// FP16 (IEEE binary16), held as its bits.
struct F16Storage {
  using type = std::uint16_t;
  static constexpr DType dtype = DType::F16;
  static double load(const type* p, std::int64_t i) { return half_bits_to_float(p[i]); }
  static void store(type* p, std::int64_t i, double v) {
    if (!rne_normal_bits<10, 15>(v, p[i]))
      p[i] = Eigen::numext::bit_cast<std::uint16_t>(half_rne(v));
  }
};

/// BF16, held as its bits (the top half of an FP32).
struct BF16Storage {
  using type = std::uint16_t;
  static constexpr DType dtype = DType::BF16;
  static double load(const type* p, std::int64_t i) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(p[i]) << 16);
  }
  static void store(type* p, std::int64_t i, double v) {
    if (!rne_normal_bits<7, 127>(v, p[i]))
      p[i] = Eigen::numext::bit_cast<std::uint16_t>(bfloat16_rne(v));
  }
};

/// The dtype -> storage-type switch of the reference kernels: returns
/// f.template operator()<S>() for the storage struct S of `t` (F32, F16, BF16). Any other dtype
/// (validate() rejects them before) throws InvalidArgument naming `what`.
template <class F>
decltype(auto) with_float_storage(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::F32: return f.template operator()<F32Storage>();
    case DType::F16: return f.template operator()<F16Storage>();
    case DType::BF16: return f.template operator()<BF16Storage>();
    default: break;
  }
  throw InvalidArgument(what, std::string(what) + ": " + to_string(t) +
                                  " is not a storage type (fp32, fp16, bf16)");
}

}  // namespace tbe::detail
