// The base workloads of tbe-verify's forward matrix (docs/workloads.md "tbe-verify's matrix
// bases"): one per weight storage type, derived from the named workload (seed-large at B) with
// mixed and odd D per feature, tables of different E, a permuted feature_table_map with shared
// tables and mixed bag lengths, so that every case reaches every pooled forward path (vector and
// scalar loads, column chunks for D > 32·VEC, empty bags) and the pooling=none cases reach the
// sequence path the group asks for.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tbe/types.h"
#include "tbe/workloads.h"

namespace tbe::judge {

/// The D values of the matrix (edge sizes: 1, odd, 32·VEC ± 1 for FP32 and FP16, 2048 = kMaxD).
inline constexpr std::array<std::int32_t, 10> kMatrixDims = {1,   3,    33,   127,  128,
                                                             264, 1000, 1025, 2047, 2048};

/// One group's base: the spec to generate and the features of its pooling=none variant.
struct MatrixBase {
  WorkloadSpec spec;
  /// Features (indices into spec's features) the pooling=none cases keep: they all map to one
  /// table, so they share one D (NONE requires one D).
  std::vector<std::int32_t> sequence_features;
};

/// The base of weight group `weights` (F32, F16, BF16) derived from `named` (its E, L, B, index
/// distribution and seed). Tables t = 0..9 have D_t = kMatrixDims[t] and E_t = clamp(E·128 / D_t,
/// 64, 4·E) rounded up to a multiple of 8 (16-byte aligned tables) except table 3 (D = 127), which has E_t = 64 (duplicates in every bag). Features
/// f = 0..9 map to table (7f + 3g) mod 10 (g = 0, 1, 2 for F32, F16, BF16: the D of a feature
/// rotates with the group); feature 10 shares the group's sequence table (D 264 for F32: 16-byte
/// vectors of FP32; 1000 for F16: vectors of 8; 33 for BF16: scalar loads) and feature 11 shares
/// feature 1's table. Mean L_f = clamp(round(L·256 / D_f), 1, 64), lengths uniform in
/// [L_f − 3, L_f + 3] clipped at 0 (empty bags where L_f <= 3). Throws InvalidArgument for a
/// weights type that is not a storage type.
MatrixBase matrix_base(const WorkloadSpec& named, DType weights);

}  // namespace tbe::judge
