// Internal: fast exact reads of FP32/FP16/BF16 host buffers as FP64 (not a public header).
#pragma once

#include <Eigen/Core>
#include <bit>
#include <cstdint>
#include <vector>

#include "tbe/host_case.h"
#include "tbe/types.h"

namespace tbe::detail {

/// Reads element i of a host buffer of a floating type as FP64 (exact). FP16 goes through a
/// 65536-entry table; other types through load_as_double.
class FloatLoader {
 public:
  FloatLoader(DType t, const void* data) : t_(t), data_(data) {
    if (t == DType::F16) lut_ = half_table();
  }
  double operator()(std::int64_t i) const {
    switch (t_) {
      case DType::F32: return static_cast<const float*>(data_)[i];
      case DType::F16: return lut_[static_cast<const std::uint16_t*>(data_)[i]];
      case DType::BF16:
        return std::bit_cast<float>(
            static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(data_)[i]) << 16);
      default: return load_as_double(t_, data_, i);
    }
  }

 private:
  static const float* half_table() {
    static const std::vector<float> table = [] {
      std::vector<float> v(65536);
      for (std::uint32_t b = 0; b < 65536; ++b)
        v[b] = static_cast<float>(
            Eigen::numext::bit_cast<Eigen::half>(static_cast<std::uint16_t>(b)));
      return v;
    }();
    return table.data();
  }
  DType t_;
  const void* data_;
  const float* lut_ = nullptr;
};

}  // namespace tbe::detail
