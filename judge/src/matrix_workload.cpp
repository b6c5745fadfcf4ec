// The forward matrix's base workloads (matrix_workload.h).
#include "tbe/judge/matrix_workload.h"

#include <algorithm>
#include <cmath>

#include "tbe/errors.h"

namespace tbe::judge {
namespace {

constexpr std::int64_t kTables = static_cast<std::int64_t>(kMatrixDims.size());
constexpr std::int32_t kSmallTable = 3;      // D = 127, E = 64
constexpr std::int64_t kSmallTableRows = 64;

int group_of(DType weights) {
  switch (weights) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 2;
    default: break;
  }
  throw InvalidArgument("weights", "matrix_base: weights " + to_string(weights) +
                                       " is not a storage type (fp32, fp16, bf16)");
}

std::int32_t table_with_dim(std::int32_t d) {
  return static_cast<std::int32_t>(std::find(kMatrixDims.begin(), kMatrixDims.end(), d) -
                                   kMatrixDims.begin());
}

}  // namespace

MatrixBase matrix_base(const WorkloadSpec& named, DType weights) {
  const int g = group_of(weights);
  // The sequence table of each group: FP32 vec4 (D % 4 == 0), FP16 vec8 (D % 8 == 0), BF16 scalar.
  constexpr std::int32_t kSequenceDim[3] = {264, 1000, 33};
  MatrixBase out;
  WorkloadSpec& s = out.spec;
  s = named;
  s.name = named.name + "-matrix-" + to_string(weights);
  s.table_rows.clear();
  s.table_dims.clear();
  for (std::int64_t t = 0; t < kTables; ++t) {
    const std::int32_t D = kMatrixDims[t];
    // E_t a multiple of 8: every table starts 16-byte aligned for 16-bit and FP32 rows, so the
    // vector path is chosen by D alone.
    const std::int64_t E =
        t == kSmallTable
            ? kSmallTableRows
            : (std::clamp<std::int64_t>(named.E * 128 / D, kSmallTableRows, 4 * named.E) + 7) / 8 * 8;
    s.table_rows.push_back(E);
    s.table_dims.push_back(D);
  }
  s.feature_table_map.clear();
  for (std::int64_t f = 0; f < kTables; ++f)
    s.feature_table_map.push_back(static_cast<std::int32_t>((7 * f + 3 * g) % kTables));
  const std::int32_t seq_table = table_with_dim(kSequenceDim[g]);
  s.feature_table_map.push_back(seq_table);                 // feature 10: shares the seq table
  s.feature_table_map.push_back(s.feature_table_map[1]);    // feature 11: shares feature 1's
  s.T = static_cast<std::int64_t>(s.feature_table_map.size());
  s.E = *std::max_element(s.table_rows.begin(), s.table_rows.end());
  s.D = kMatrixDims.back();
  s.feature_L.clear();
  for (std::int32_t t : s.feature_table_map) {
    const double L = std::round(static_cast<double>(named.L) * 256.0 / kMatrixDims[t]);
    s.feature_L.push_back(std::clamp<std::int64_t>(static_cast<std::int64_t>(L), 1, 64));
  }
  s.lengths = LengthDistribution::Uniform;
  s.length_spread = 3.0;
  for (std::int32_t f = 0; f < static_cast<std::int32_t>(s.T); ++f)
    if (s.feature_table_map[f] == seq_table) out.sequence_features.push_back(f);
  return out;
}

}  // namespace tbe::judge
