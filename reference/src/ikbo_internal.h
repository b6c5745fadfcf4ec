// Internal helpers of the IKBO reference (ikbo_lce.cpp, ikbo_attention.cpp; not a public header):
// storage -> FP64 conversion of whole tensors, rounded stores, message formatting.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "parallel_internal.h"
#include "round_internal.h"
#include "tbe/errors.h"
#include "tbe/ikbo.h"
#include "tbe/types.h"

namespace tbe::ikbo::detail {

/// Storage element i (F16/BF16/F32) as FP64, exact.
inline double load_storage(DType t, const void* data, std::int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::F16:
      return static_cast<float>(
          Eigen::numext::bit_cast<Eigen::half>(static_cast<const std::uint16_t*>(data)[i]));
    case DType::BF16: {
      const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(data)[i])
                                 << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    default: return static_cast<const double*>(data)[i];
  }
}

/// n storage elements as FP64 (exact), OpenMP for large tensors.
inline std::vector<double> to_fp64(DType t, const void* data, std::int64_t n) {
  std::vector<double> out(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static) if (tbe::detail::worth_parallel(n))
  for (std::int64_t i = 0; i < n; ++i) out[i] = load_storage(t, data, i);
  return out;
}

/// Stores x rounded once (RNE) to t (F16/BF16/F32) at element i.
inline void store_rounded(DType t, void* data, std::int64_t i, double x) {
  switch (t) {
    case DType::F32: static_cast<float*>(data)[i] = static_cast<float>(x); break;
    case DType::F16:
      static_cast<std::uint16_t*>(data)[i] =
          Eigen::numext::bit_cast<std::uint16_t>(tbe::detail::half_rne(x));
      break;
    case DType::BF16:
      static_cast<std::uint16_t*>(data)[i] =
          Eigen::numext::bit_cast<std::uint16_t>(tbe::detail::bfloat16_rne(x));
      break;
    default: static_cast<double*>(data)[i] = x; break;
  }
}

inline bool is_storage_type(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32;
}
inline bool is_ikbo_accumulation(DType t) { return t == DType::F32 || t == DType::F64; }

/// Policy checks shared by LCE and attention; argument names start with `prefix` ("lce.").
Status validate_policy(const IkboPolicy& pol, const std::string& prefix);

inline std::string s(std::int64_t v) { return std::to_string(v); }

}  // namespace tbe::ikbo::detail
