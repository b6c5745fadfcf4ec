// Shared helpers of tbe-bench's subcommands: CUDA error exit, event timing after warm-up with the
// L2 flushed before every iteration, median / min / max.
#pragma once

#include <stdexcept>
#include <string>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

namespace tbe::bench {

/// A bad command line: main() prints "tbe-bench: <what>" and exits 2 (before any device work).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses a whole decimal integer in [lo, hi] for `flag`; throws UsageError naming the flag, the
/// text and the range.
inline std::int64_t parse_int_arg(const std::string& flag, const std::string& text, std::int64_t lo,
                                  std::int64_t hi) {
  std::size_t used = 0;
  long long v = 0;
  bool ok = !text.empty();
  if (ok) {
    try {
      v = std::stoll(text, &used, 10);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || used != text.size() || v < lo || v > hi)
    throw UsageError(flag + ": '" + text + "' is not an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

inline Timing summarize(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.min_ms = ms.front();
  t.max_ms = ms.back();
  const std::size_t n = ms.size();
  t.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return t;
}

/// Times `body` (enqueued on `stream`) with events; flushes L2 before every iteration.
template <class F>
Timing time_it(F&& body, int iters, cudaStream_t stream, void* flush, std::size_t flush_bytes) {
  for (int i = 0; i < 3; ++i) body();
  check(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    if (flush != nullptr) check(cudaMemsetAsync(flush, i & 0xff, flush_bytes, stream), "flush L2");
    check(cudaEventRecord(a, stream), "record");
    body();
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return summarize(ms);
}

/// Device-to-device copy bandwidth (bytes read + written per second), 1 GiB copied.
inline double copy_bandwidth_gbps(cudaStream_t stream) {
  const std::size_t bytes = 1ull << 30;
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, bytes), "malloc");
  check(cudaMalloc(&dst, bytes), "malloc");
  check(cudaMemset(src, 1, bytes), "memset");
  const Timing t = time_it([&] {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
  }, 10, stream, nullptr, 0);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * bytes / (t.median_ms * 1e-3) / 1e9;
}

/// `tbe-bench backward ...` (bench/backward_bench.cu).
int backward_main(int argc, char** argv);

}  // namespace tbe::bench
