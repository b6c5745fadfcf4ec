// Shared helpers of tbe-bench's CUDA subcommands: CUDA error exit, event timing after warm-up with
// the L2 flushed before every iteration (median / min / max: bench_timing.h), the D of a workload.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <optional>
#include <stdexcept>

#include <cuda_runtime.h>

#include "bench_args.h"
#include "bench_timing.h"
#include "tbe/workloads.h"

namespace tbe::bench {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

/// Exit status of a subcommand that found no device: ctest's skip code (never a pass).
inline constexpr int kNoDeviceExit = 77;

/// Fills `prop` with device 0's properties and returns true; with no CUDA device visible, prints
/// why nothing is timed and returns false (the subcommand then returns kNoDeviceExit).
inline bool first_device(cudaDeviceProp& prop) {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "tbe-bench: no CUDA device visible (%s); nothing to time\n",
                 e == cudaSuccess ? "device count 0" : cudaGetErrorString(e));
    return false;
  }
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  return true;
}

/// The variants of `all` (each with a `name`) that --only `only` selects, in their order
/// (select_variants); an unknown name prints the usage error as `command`'s and gives nullopt
/// (the subcommand then exits 2 before the workload is generated).
template <class Variant>
std::optional<std::vector<Variant>> only_variants(const std::vector<Variant>& all,
                                                  const std::string& only, const char* command) {
  std::vector<std::string> names;
  for (const Variant& v : all) names.push_back(v.name);
  std::vector<std::string> chosen;
  try {
    chosen = select_variants(names, only);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "tbe-bench %s: %s\n", command, e.what());
    return std::nullopt;
  }
  std::vector<Variant> out;
  for (const Variant& v : all)
    if (std::find(chosen.begin(), chosen.end(), v.name) != chosen.end()) out.push_back(v);
  return out;
}

/// Times `body` (enqueued on `stream`) with events; flushes L2 before every iteration. Warm-up:
/// 3 calls, then, when `warmup_ms` > 0, (flush, call) pairs as the timed loop runs them until
/// `warmup_ms` milliseconds of wall clock have passed, so that a kernel near the board's power
/// limit is timed at the clock it settles to rather than at the one its predecessor left
/// (`tbe-bench ikbo-fa --warmup-ms`; bench/peer_timing.py does the same).
template <class F>
Timing time_it(F&& body, int iters, cudaStream_t stream, void* flush, std::size_t flush_bytes,
               double warmup_ms = 0) {
  for (int i = 0; i < 3; ++i) body();
  check(cudaStreamSynchronize(stream), "warm-up");
  const auto soak_start = std::chrono::steady_clock::now();
  for (int i = 0; warmup_ms > 0; ++i) {
    const std::chrono::duration<double, std::milli> spent =
        std::chrono::steady_clock::now() - soak_start;
    if (spent.count() >= warmup_ms) break;
    if (flush != nullptr) check(cudaMemsetAsync(flush, i & 0xff, flush_bytes, stream), "flush L2");
    body();
    check(cudaStreamSynchronize(stream), "warm-up");
  }
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

/// The D of a generated case's features (or a workload's tables): `d` when all are the same
/// (`one` true), else "mixed".
struct FeatureDims {
  std::int32_t d = 0;
  bool one = true;
  std::string text;
  explicit FeatureDims(const std::vector<std::int32_t>& dims)
      : d(dims.empty() ? 0 : dims[0]),
        one(std::all_of(dims.begin(), dims.end(), [&](std::int32_t x) { return x == d; })),
        text(one ? std::to_string(d) : "mixed") {}
};

/// True when the workload's tables do not all have the same D (prod-mixed, small-table) and
/// `command`'s peer harness takes one D (tbe-bench backward: bench/peer_backward.py): `command`
/// refuses --dump-npy with `why` on stderr. (forward dumps mixed D: bench/peer_tbe_forward.py and
/// bench/peer_tbe_backward.py read them.)
inline bool refuse_mixed_d_dump(const WorkloadSpec& spec, const char* command, const char* why) {
  if (FeatureDims(spec.table_dims).one) return false;
  std::fprintf(stderr, "tbe-bench %s: --dump-npy: workload %s has tables of different D (%s)\n",
               command, spec.name.c_str(), why);
  return true;
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

}  // namespace tbe::bench
