// Internal: when to open an OpenMP parallel region (not a public header).
#pragma once

#include <cstdint>

namespace tbe::detail {

/// Work (element operations) below which a loop runs on the calling thread. Opening a parallel
/// region costs microseconds, and far more when the cores are oversubscribed (spinning workers),
/// which would dominate the many tiny problems of the property tests.
inline constexpr std::int64_t kParallelWork = 1 << 16;

inline bool worth_parallel(std::int64_t work) { return work >= kParallelWork; }

}  // namespace tbe::detail
