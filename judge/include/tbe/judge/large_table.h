// tbe-verify's large-table rows (--full): one FP16 table with E·D >= 2^31 elements (D = 1024,
// E = 2^21 + 128 rows) and int32 indices, looked up at rows whose element offset is >= 2^31 and
// at low rows, so a kernel that forms the row offset in 32 bits reads (forward) or writes
// (backward) another row: the forward output leaves its enclosure, the backward's untouched rows
// change. The rows need about 8.3 GB of device memory and 9 GB of host memory; they are skipped,
// saying so, when the device has less free memory or there is no device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tbe/backend.h"
#include "tbe/judge/row.h"

namespace tbe::judge {

/// The large table's shape.
inline constexpr std::int32_t kLargeTableDim = 1024;
inline constexpr std::int64_t kLargeTableRows = (std::int64_t{1} << 21) + 128;

/// Device bytes the large-table rows need (weights twice for the backward's in and out copies,
/// plus lookups, outputs and a workspace margin).
std::size_t large_table_device_bytes();

struct LargeTableConfig {
  Backend* device = nullptr;       ///< backend under test; nullptr: rows skipped (skip_reason)
  std::string skip_reason;         ///< why there is no device
  std::size_t device_free_bytes = 0;  ///< free device memory (tbe::cuda_free_bytes())
  std::uint64_t seed = 1;
};

/// One result per row: "large.forward" (SUM, seed-default FP16 -> FP32, fused bounds check off:
/// bounds mode NONE) and "large.backward" (EXACT_SGD, RNE): each judged by the oracle, the
/// backward's untouched rows bitwise. Skipped rows carry the reason (no device; "needs N GiB of
/// device memory, M GiB free").
struct LargeTableRow {
  std::string name;
  RowResult row;
};
std::vector<LargeTableRow> run_large_table_rows(const LargeTableConfig& cfg);

}  // namespace tbe::judge
