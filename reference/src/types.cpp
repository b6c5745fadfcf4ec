// Names of the vocabulary enums (types.h) and their parsers.
#include "tbe/types.h"

#include "tbe/errors.h"

namespace tbe {

std::string to_string(DType t) {
  switch (t) {
    case DType::F16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::F32: return "fp32";
    case DType::F64: return "fp64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
  }
  return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
}

std::string to_string(PoolingMode m) {
  switch (m) {
    case PoolingMode::Sum: return "sum";
    case PoolingMode::Mean: return "mean";
    case PoolingMode::None: return "none";
  }
  return "pooling(" + std::to_string(static_cast<int>(m)) + ")";
}

std::string to_string(BoundsCheckMode m) {
  switch (m) {
    case BoundsCheckMode::Fatal: return "fatal";
    case BoundsCheckMode::Warning: return "warning";
    case BoundsCheckMode::Ignore: return "ignore";
    case BoundsCheckMode::None: return "none";
  }
  return "bounds_check(" + std::to_string(static_cast<int>(m)) + ")";
}

std::string to_string(RoundingMode m) {
  switch (m) {
    case RoundingMode::Nearest: return "rne";
    case RoundingMode::Stochastic: return "sr";
  }
  return "rounding(" + std::to_string(static_cast<int>(m)) + ")";
}

DType parse_dtype(const std::string& s, const char* what) {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32, DType::I64})
    if (s == to_string(t)) return t;
  throw InvalidArgument(what, std::string(what) + ": unknown dtype '" + s +
                                  "' (known: fp16, bf16, fp32, fp64, int32, int64)");
}

PoolingMode parse_pooling(const std::string& s, const char* what) {
  for (PoolingMode m : {PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None})
    if (s == to_string(m)) return m;
  throw InvalidArgument(what, std::string(what) + ": unknown pooling mode '" + s +
                                  "' (known: sum, mean, none)");
}

BoundsCheckMode parse_bounds_check(const std::string& s, const char* what) {
  for (BoundsCheckMode m : {BoundsCheckMode::Fatal, BoundsCheckMode::Warning,
                            BoundsCheckMode::Ignore, BoundsCheckMode::None})
    if (s == to_string(m)) return m;
  throw InvalidArgument(what, std::string(what) + ": unknown bounds-check mode '" + s +
                                  "' (known: fatal, warning, ignore, none)");
}

}  // namespace tbe
