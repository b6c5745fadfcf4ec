// Internal helpers of tbe_oracle: rounding to the accumulation type, exact-representability and
// quantum (exponent of the lowest set bit) of FP64 values, and a fast typed weight loader.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tbe/host_case.h"
#include "tbe/precision.h"

namespace tbe::oracle::detail {

/// Work (element operations) below which an OpenMP loop runs on the calling thread: a parallel
/// region costs microseconds, far more with oversubscribed cores (spinning workers), which would
/// dominate the many tiny problems of the property tests (same rule as the reference's).
inline constexpr std::int64_t kParallelWork = 1 << 16;
inline bool worth_parallel(std::int64_t work) { return work >= kParallelWork; }

/// RNE rounding of x to acc (F64 identity, F32 by conversion, F16/BF16 via tbe::round_to).
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

/// Exponent of the smallest positive subnormal of t (-24 F16, -133 BF16, -149 F32, -1074 F64).
inline int min_subnormal_exponent(DType t) {
  switch (t) {
    case DType::F16: return -24;
    case DType::BF16: return -133;
    case DType::F32: return -149;
    default: return -1074;
  }
}
/// Smallest positive normal of t.
inline double min_normal(DType t) {
  switch (t) {
    case DType::F16: return 0x1p-14;
    case DType::BF16:
    case DType::F32: return 0x1p-126;
    default: return std::numeric_limits<double>::min();
  }
}

/// True if every value of type `narrow` is a value of type `wide`.
inline bool embeds(DType narrow, DType wide) {
  if (narrow == wide || wide == DType::F64) return true;
  if (wide == DType::F32) return narrow == DType::F16 || narrow == DType::BF16;
  return false;
}

/// Reads weights of one storage type as FP64 (exact).
class WeightLoader {
 public:
  WeightLoader(DType t, const void* data) : t_(t), data_(data) {
    if (t == DType::F16) lut_ = half_table();
  }
  double operator()(std::int64_t i) const {
    switch (t_) {
      case DType::F32: return static_cast<const float*>(data_)[i];
      case DType::F16: return lut_[static_cast<const std::uint16_t*>(data_)[i]];
      case DType::BF16: {
        const std::uint32_t bits = static_cast<std::uint32_t>(
                                       static_cast<const std::uint16_t*>(data_)[i])
                                   << 16;
        return std::bit_cast<float>(bits);
      }
      default: return load_as_double(t_, data_, i);
    }
  }

 private:
  static const float* half_table() {
    static const std::vector<float> table = [] {
      std::vector<float> v(65536);
      for (std::uint32_t b = 0; b < 65536; ++b) {
        const std::uint16_t h = static_cast<std::uint16_t>(b);
        v[b] = static_cast<float>(load_as_double(DType::F16, &h, 0));
      }
      return v;
    }();
    return table.data();
  }
  DType t_;
  const void* data_;
  const float* lut_ = nullptr;
};

}  // namespace tbe::oracle::detail
