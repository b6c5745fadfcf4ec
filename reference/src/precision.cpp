// Precision policies and once-only rounding to the storage types (precision.h).
#include "tbe/precision.h"

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tbe/errors.h"
#include "round_internal.h"
#include "storage_internal.h"

namespace tbe {

namespace {

bool is_storage_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Next representable value of 16-bit type T (F16 or BF16) above x, which must be representable
// in T (or +-inf). Works on the sign-magnitude bit pattern: for x >= 0 the successor is bits+1,
// for x < 0 it is bits-1 (magnitude shrinks); -0 and +0 both step to the smallest subnormal.
template <DType T>
double next_up_16(double x) {
  using Storage = typename DTypeTraits<T>::Storage;  // Eigen::half / Eigen::bfloat16
  static_assert(sizeof(Storage) == 2);
  if (std::isnan(x) || x == std::numeric_limits<double>::infinity()) return x;
  std::uint16_t bits = Eigen::numext::bit_cast<std::uint16_t>(Storage(static_cast<float>(x)));
  const std::uint16_t sign = bits & 0x8000u, mag = bits & 0x7FFFu;
  if (mag == 0) {
    bits = 0x0001u;  // +-0 -> smallest positive subnormal
  } else if (sign == 0) {
    bits = static_cast<std::uint16_t>(bits + 1);  // max finite + 1 ulp -> +inf pattern
  } else {
    bits = static_cast<std::uint16_t>(bits - 1);  // -inf - 1 -> -max finite
  }
  return static_cast<double>(static_cast<float>(Eigen::numext::bit_cast<Storage>(bits)));
}

// Next value of floating type t above x (a value of t); round_to has rejected other types.
double next_up(DType t, double x) {
  switch (t) {
    case DType::F64: return std::nextafter(x, std::numeric_limits<double>::infinity());
    case DType::F32:
      return static_cast<double>(
          std::nextafter(static_cast<float>(x), std::numeric_limits<float>::infinity()));
    case DType::F16: return next_up_16<DType::F16>(x);
    case DType::BF16: return next_up_16<DType::BF16>(x);
    case DType::I32:
    case DType::I64: break;
  }
  throw InvalidArgument("dtype", "next_up: " + to_string(t) + " is not a floating type");
}
double next_down(DType t, double x) { return -next_up(t, -x); }

}  // namespace

PrecisionPolicy make_policy(PolicyKind kind, DType weights, DType output, RoundingMode write_back) {
  if (!is_storage_type(weights))
    throw InvalidArgument("policy.weights", "policy.weights: " + to_string(weights) +
                                                " is not a storage type (allowed: fp32, fp16, bf16)");
  if (!is_storage_type(output))
    throw InvalidArgument("policy.output", "policy.output: " + to_string(output) +
                                               " is not an output type (allowed: fp32, fp16, bf16)");
  PrecisionPolicy p;
  p.kind = kind;
  p.weights = weights;
  p.output = output;
  p.accumulation = kind == PolicyKind::SeedDefault ? float_traits(weights).seed_default_accumulation
                                                   : DType::F32;
  p.optimizer_state = DType::F32;
  p.write_back = write_back;
  return p;
}

std::string to_string(PolicyKind k) {
  switch (k) {
    case PolicyKind::SeedDefault: return "seed-default";
    case PolicyKind::FbgemmCuda: return "fbgemm-cuda";
  }
  return "policy(" + std::to_string(static_cast<int>(k)) + ")";
}

PolicyKind parse_policy_kind(const std::string& s, const char* what) {
  if (s == "seed-default") return PolicyKind::SeedDefault;
  if (s == "fbgemm-cuda") return PolicyKind::FbgemmCuda;
  throw InvalidArgument(what, std::string(what) + ": unknown policy '" + s +
                                  "' (known: seed-default, fbgemm-cuda)");
}

std::string to_string(const PrecisionPolicy& p) {
  return to_string(p.kind) + "[w=" + to_string(p.weights) + ",out=" + to_string(p.output) +
         ",acc=" + to_string(p.accumulation) + ",state=" + to_string(p.optimizer_state) + "," +
         to_string(p.write_back) + "]";
}

double round_to(DType t, double x) {
  switch (t) {
    case DType::F64: return x;
    // double -> float conversion is correctly rounded (RNE) in IEEE arithmetic; overflow -> inf.
    case DType::F32: return static_cast<double>(static_cast<float>(x));
    // Through FP32 with round-to-odd, then Eigen's RNE float -> half / bfloat16 (round_internal.h:
    // plain double -> float -> half is NOT correct for arbitrary doubles).
    // Values in the normal range take the branch-free RNE of storage_internal.h (the same bits as
    // half_rne / bfloat16_rne, tests/reference/test_storage.cpp); the rest (subnormal results,
    // overflow, zero, inf, NaN) the round-to-odd path.
    case DType::F16: {
      std::uint16_t h;
      if (detail::rne_normal_row<DType::F16>(&h, &x, 1)) return detail::half_bits_to_float(h);
      return static_cast<double>(static_cast<float>(detail::half_rne(x)));
    }
    case DType::BF16: {
      std::uint16_t h;
      if (detail::rne_normal_row<DType::BF16>(&h, &x, 1))
        return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16));
      return static_cast<double>(static_cast<float>(detail::bfloat16_rne(x)));
    }
    case DType::I32:
    case DType::I64: break;
  }
  throw InvalidArgument("dtype", "round_to: " + to_string(t) + " is not a floating type");
}

double round_down_to(DType t, double x) {
  if (std::isnan(x)) return x;
  const double r = round_to(t, x);  // a neighbour of x: RD(x) or RU(x)
  return r <= x ? r : next_down(t, r);
}

double round_up_to(DType t, double x) {
  if (std::isnan(x)) return x;
  const double r = round_to(t, x);
  return r >= x ? r : next_up(t, r);
}

}  // namespace tbe
