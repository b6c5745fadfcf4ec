// Vocabulary of the project: element types, pooling and bounds-check modes.
// Semantics: docs/semantics.md (FBGEMM SplitTableBatchedEmbeddingBagsCodegen).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tbe {

/// Element type of a tensor. F16 is IEEE binary16, BF16 is bfloat16 (8-bit mantissa incl. hidden
/// bit), F32/F64 IEEE binary32/64; I32/I64 are the index/offset types.
enum class DType : std::uint8_t { F16, BF16, F32, F64, I32, I64 };

/// Pooling mode of a TBE forward: SUM and MEAN pool a bag into one row, NONE ("sequence")
/// returns one row per lookup. FBGEMM: PoolingMode.{SUM, MEAN, NONE}.
enum class PoolingMode : std::uint8_t { Sum, Mean, None };

/// Bounds-check mode, applied before lookup (docs/semantics.md "Bounds check"). FBGEMM: BoundsCheckMode.
/// Fatal: any bad index/bag/last offset -> BoundsCheckError naming the first offender, nothing
/// computed. Warning / Ignore: repair (max-scan rule) and count. None: caller promises valid input.
enum class BoundsCheckMode : std::uint8_t { Fatal, Warning, Ignore, None };

/// Rounding of a value stored into a narrower type.
enum class RoundingMode : std::uint8_t { Nearest, Stochastic };

/// Size of one element in bytes.
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F16: case DType::BF16: return 2;
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
  }
  return 0;
}
constexpr bool is_floating(DType t) { return t != DType::I32 && t != DType::I64; }
constexpr bool is_index(DType t) { return t == DType::I32 || t == DType::I64; }

/// Lower-case names used in reports, CLI flags and case files: "fp16", "bf16", "fp32", "fp64",
/// "int32", "int64"; "sum", "mean", "none"; "fatal", "warning", "ignore", "none"; "rne", "sr".
std::string to_string(DType t);
std::string to_string(PoolingMode m);
std::string to_string(BoundsCheckMode m);
std::string to_string(RoundingMode m);

/// Parse the names above. Throws InvalidArgument naming `what` and the bad text.
DType parse_dtype(const std::string& s, const char* what = "dtype");
PoolingMode parse_pooling(const std::string& s, const char* what = "pooling");
BoundsCheckMode parse_bounds_check(const std::string& s, const char* what = "bounds_check");

}  // namespace tbe
