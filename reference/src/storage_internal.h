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
#include "tbe/dtype_traits.h"
#include "tbe/errors.h"
#include "tbe/types.h"

/// Marks a kernel whose inner loops are row loops over these storage types: compiled for the
/// baseline x86-64 ISA and for AVX2 (4 FP64 lanes instead of 2), the clone picked when the program
/// loads (GCC function multiversioning; Clang 14 does not clone templates, so it builds the
/// baseline only). Both clones perform the same IEEE operations in the same order (AVX2 brings no
/// FMA, and nothing is reassociated), so they write the same bytes.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TBE_ROW_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define TBE_ROW_KERNEL
#endif

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

/// RNE of the row x[0, D) to the 16-bit format T (F16, BF16; k = p - 1 fraction bits and exponent
/// bias b from DTypeTraits<T>: FP16 10, 15; BF16 7, 127) into p[0, D), for rows whose every |x|
/// lies in the range of normal results [min_normal = 2^(1 - b), 2^(b + 1)); returns false (p then
/// holds garbage) when one does not. Branch-free, so the loop vectorizes: c = 1.5·2^(E + 52 - k)
/// for |x| in [2^E, 2^(E+1)) has an FP64 ulp of 2^(E - k), so (|x| + c) - c is |x| rounded to p
/// significant bits with ties to even (c's low bits are 0: the parity is |x|'s), and the exact
/// result's bits shifted into place are the rounded value, the carry of a round-up included (up to
/// the all-ones exponent with fraction 0 = inf, RNE's overflow). Equal to half_rne /
/// bfloat16_rne (rounding to odd first changes nothing, round_internal.h), pinned by
/// tests/reference/test_storage.cpp. Needs IEEE FP64 arithmetic (no -ffast-math).
template <DType T>
inline bool rne_normal_row(std::uint16_t* p, const double* x, std::int64_t D) {
  constexpr int kMantissa = DTypeTraits<T>::digits - 1;
  constexpr int kBias =  // min_normal = 2^(1 - bias)
      1 - (static_cast<int>(std::bit_cast<std::uint64_t>(DTypeTraits<T>::min_normal) >> 52) - 1023);
  static_assert(sizeof(typename DTypeTraits<T>::Storage) == 2 && kMantissa < 16 && kBias < 1023);
  constexpr int shift = 52 - kMantissa;
  constexpr std::uint32_t first_exponent = 1023 + 1 - kBias, exponents = 2 * kBias;
  std::uint32_t outside = 0;
  for (std::int64_t d = 0; d < D; ++d) {
    const std::uint64_t u = std::bit_cast<std::uint64_t>(x[d]);
    const std::uint64_t a = u & 0x7fffffffffffffffull;  // |x|
    outside |= static_cast<std::uint32_t>(static_cast<std::uint32_t>(a >> 52) - first_exponent >=
                                          exponents);
    const double c = std::bit_cast<double>((a & 0x7ff0000000000000ull) +
                                           (static_cast<std::uint64_t>(shift) << 52)) * 1.5;
    const double y = (std::bit_cast<double>(a) + c) - c;
    const std::uint64_t h = (std::bit_cast<std::uint64_t>(y) >> shift) -
                            (static_cast<std::uint64_t>(1023 - kBias) << kMantissa);
    p[d] = static_cast<std::uint16_t>(h | ((u >> 48) & 0x8000u));
  }
  return outside == 0;
}

/// Each storage struct S: `type` (host element), `dtype`, exact `load(p, i)` (FP64), one-rounding
/// `store(p, i, v)` and its row form `store_row(p, x, D)` (p[d] = store of x[d]), and for rows read
/// many times `fast_row(p, D)`: true when `load_fast` (cheaper where `load` must handle inf / NaN)
/// gives the same value as `load` on every element of p[0, D).

/// FP32 weights / gradients.
struct F32Storage {
  using type = float;
  static constexpr DType dtype = DType::F32;
  static_assert(sizeof(type) == sizeof(DTypeTraits<dtype>::Storage));
  static double load(const type* p, std::int64_t i) { return p[i]; }
  static bool fast_row(const type*, std::int64_t) { return true; }  // load_fast is load
  static double load_fast(const type* p, std::int64_t i) { return p[i]; }
  static void store(type* p, std::int64_t i, double v) { p[i] = static_cast<float>(v); }
  static void store_row(type* p, const double* x, std::int64_t D) {
    for (std::int64_t d = 0; d < D; ++d) p[d] = static_cast<float>(x[d]);
  }
};

/// FP16 (IEEE binary16), held as its bits.
struct F16Storage {
  using type = std::uint16_t;
  static constexpr DType dtype = DType::F16;
  static_assert(sizeof(type) == sizeof(DTypeTraits<dtype>::Storage));
  static double load(const type* p, std::int64_t i) { return half_bits_to_float(p[i]); }
  /// No element is inf / NaN (for the all-ones exponent alone, + 0x0400 carries into bit 15).
  static bool fast_row(const type* p, std::int64_t D) {
    std::uint16_t carry = 0;
    for (std::int64_t d = 0; d < D; ++d)
      carry |= static_cast<std::uint16_t>((p[d] & 0x7c00u) + 0x0400u);
    return (carry & 0x8000u) == 0;
  }
  /// A finite half: sign, exponent and significand in FP32 position, scaled by 2^112 (exact).
  static double load_fast(const type* p, std::int64_t i) {
    const std::uint32_t h = p[i];
    return std::bit_cast<float>(((h & 0x8000u) << 16) | ((h & 0x7fffu) << 13)) * 0x1p112f;
  }
  static void store(type* p, std::int64_t i, double v) {
    p[i] = Eigen::numext::bit_cast<std::uint16_t>(half_rne(v));
  }
  static void store_row(type* p, const double* x, std::int64_t D) {
    if (!rne_normal_row<DType::F16>(p, x, D))
      for (std::int64_t d = 0; d < D; ++d) store(p, d, x[d]);
  }
};

/// BF16, held as its bits (the top half of an FP32).
struct BF16Storage {
  using type = std::uint16_t;
  static constexpr DType dtype = DType::BF16;
  static_assert(sizeof(type) == sizeof(DTypeTraits<dtype>::Storage));
  static double load(const type* p, std::int64_t i) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(p[i]) << 16);
  }
  static bool fast_row(const type*, std::int64_t) { return true; }  // load_fast is load
  static double load_fast(const type* p, std::int64_t i) { return load(p, i); }
  static void store(type* p, std::int64_t i, double v) {
    p[i] = Eigen::numext::bit_cast<std::uint16_t>(bfloat16_rne(v));
  }
  static void store_row(type* p, const double* x, std::int64_t D) {
    if (!rne_normal_row<DType::BF16>(p, x, D))
      for (std::int64_t d = 0; d < D; ++d) store(p, d, x[d]);
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
