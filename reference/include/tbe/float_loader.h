// Fast exact reads of host buffers of a floating element type as FP64, shared by the reference
// (backward) and the oracle (enclosures, emulations), which read every weight of a problem.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "tbe/host_case.h"
#include "tbe/types.h"

namespace tbe {

/// Reads element i of a host buffer of type t as FP64, exactly (every F16/BF16/F32 value is a
/// double). FP16 goes through a 65536-entry table (built once per process), BF16 by widening its
/// bits to FP32, FP32 by conversion, other types (F64, indices) through load_as_double.
/// `data` must hold at least i + 1 elements of t; nothing is checked.
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

}  // namespace tbe
