// Host-side timing of tbe-bench (no CUDA in this header): median / min / max of a series, and
// wall-clock timing of a host call after warm-up (the CPU subcommand; the CUDA subcommands time
// with events, bench_common.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace tbe::bench {

/// Summary of one timed series, in milliseconds.
struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

/// Median (mean of the two middle values for an even count), min and max of `ms` (non-empty).
template <class T>
Timing summarize(std::vector<T> ms) {
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.min_ms = ms.front();
  t.max_ms = ms.back();
  const std::size_t n = ms.size();
  t.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return t;
}

/// Times the host call `body` with std::chrono::steady_clock: `warmup` untimed calls, then
/// `iters` (>= 1) timed ones.
template <class F>
Timing time_host(F&& body, int iters, int warmup) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return summarize(std::move(ms));
}

}  // namespace tbe::bench
