// IKBO attention: the device grouping of candidates by user (CUB radix sort, run-length encoding,
// scans; kernels/ikbo_attention_launch.h) and the storage-type dispatch of the forward kernel.
#include <bit>
#include <cstdint>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/ikbo_attention_fwd.cuh"
#include "kernels/ikbo_attention_launch.h"
#include "kernels/ikbo_lce_launch.h"
#include "kernels/ikbo_map_check.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

constexpr int kThreads = tuning::AttentionMmaSync::kGroupingThreads;

unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

/// Radix-sort key bits that order users [0, U): bit_width(U - 1), at least 1. Values outside
/// [0, U) (a bad map, caught by the map check) sort by their low bits only; the attention kernel
/// never runs on them.
int key_bits(std::int64_t U) {
  const int b = std::bit_width(static_cast<std::uint64_t>(U > 1 ? U - 1 : 1));
  return b < 1 ? 1 : b;
}

__global__ void iota_kernel(std::int32_t* out, std::int32_t n) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = i;
}

/// Length of the work list (work_end of the last slot; work_end is non-decreasing).
__device__ __forceinline__ std::int32_t work_list_end(std::int32_t last_end TBE_MUTANT_PARAM(m)) {
  return TBE_MUTANT_SWAP(m, kAttnWorkItemLastDropped, last_end - 1, last_end);
}

/// Work item w < work_list_end: the block of the run r with work_end[r − 1] <= w < work_end[r]
/// (binary search over the `slots` entries of work_end). Generic pointers: global or shared.
__device__ __forceinline__ AttentionWorkItem work_item_at(std::int32_t w,
                                                          const std::int32_t* work_end,
                                                          std::int32_t slots,
                                                          const std::int32_t* run_user,
                                                          const std::int32_t* run_start,
                                                          const std::int32_t* run_count,
                                                          std::int64_t n_seed, int block_rows) {
  std::int32_t lo = 0, hi = slots - 1;
  while (lo < hi) {
    const std::int32_t mid = lo + ((hi - lo) >> 1);
    if (work_end[mid] > w) hi = mid; else lo = mid + 1;
  }
  const std::int32_t blk = w - (lo == 0 ? 0 : work_end[lo - 1]);
  const std::int64_t run_rows = static_cast<std::int64_t>(run_count[lo]) * n_seed;
  AttentionWorkItem it;
  it.user = run_user[lo];
  it.cand0 = run_start[lo];
  it.row0 = blk * block_rows;
  it.rows = static_cast<std::int32_t>(run_rows - it.row0 < block_rows ? run_rows - it.row0
                                                                       : block_rows);
  return it;
}

/// Row blocks of a run of `count` candidates: ceil(count·n_seed / block_rows).
__device__ __forceinline__ std::int32_t run_blocks(std::int32_t count, std::int64_t n_seed,
                                                   int block_rows) {
  const std::int64_t rows = static_cast<std::int64_t>(count) * n_seed;
  return static_cast<std::int32_t>((rows + block_rows - 1) / block_rows);
}

/// work_blocks[r] = ceil(run_count[r]·n_seed / block_rows) for r < num_runs; 0 (and run_count 0)
/// for the slots past the runs.
__global__ void run_blocks_kernel(std::int32_t* run_count, std::int32_t* work_blocks,
                                  const std::int32_t* num_runs, std::int32_t slots,
                                  std::int64_t n_seed, int block_rows) {
  const std::int32_t r = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= slots) return;
  if (r < *num_runs) {
    work_blocks[r] = run_blocks(run_count[r], n_seed, block_rows);
  } else {
    run_count[r] = 0;
    work_blocks[r] = 0;
  }
}

/// items[w] for every slot w < slots: work_item_at(w), rows 0 past the work list's end.
__global__ void work_items_kernel(AttentionWorkItem* items, std::int32_t slots,
                                  const std::int32_t* work_end, const std::int32_t* run_user,
                                  const std::int32_t* run_start, const std::int32_t* run_count,
                                  std::int32_t runs, std::int64_t n_seed,
                                  int block_rows TBE_MUTANT_PARAM(m)) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots) return;
  const auto w = static_cast<std::int32_t>(i);
  items[w] = w < work_list_end(work_end[runs - 1] TBE_MUTANT_FORWARD(m))
                 ? work_item_at(w, work_end, runs, run_user, run_start, run_count, n_seed,
                                block_rows)
                 : AttentionWorkItem{};
}

using OneCta = tuning::AttentionGroupingOneCta;
using OneCtaSort = cub::BlockRadixSort<std::uint32_t, OneCta::kThreads, OneCta::kItems, std::int32_t>;
using OneCtaScan = cub::BlockScan<std::int32_t, OneCta::kThreads>;
using OneCtaMin = cub::BlockReduce<unsigned long long, OneCta::kThreads>;

/// Shared memory of grouping_one_cta_kernel (dynamic: 64 KB of run data past the static limit).
struct OneCtaShared {
  static constexpr int kCap = OneCta::kMaxCandidates;
  union {
    typename OneCtaSort::TempStorage sort;
    struct {
      std::uint32_t key[kCap];        // sorted keys; then run users (run_user[r], r < runs)
      std::int32_t start[kCap];       // run starts
      std::int32_t count[kCap];       // run counts (0 past the runs)
      std::int32_t work_end[kCap];    // inclusive scan of the runs' row blocks
    } a;
  };
  union {
    typename OneCtaScan::TempStorage scan;
    typename OneCtaMin::TempStorage min;
  } red;
};

/// The whole grouping of B <= OneCta::kMaxCandidates candidates and the map check in one CTA of
/// OneCta::kThreads threads, thread t holding positions [t·kItems, t·kItems + kItems) (blocked):
///   map check     map_error := the first bad position (block min), or kLceMapOk;
///   sort          cub::BlockRadixSort of (key, position) on bits [0, key_bits), stable (the
///                 positions past B carry key 0xffffffff: they sort after every real one); skipped
///                 when the keys' sort bits are already non-decreasing (a sorted map, the common
///                 layout: the stable sort is then the identity);
///   runs          heads where the full 32-bit key changes (as DeviceRunLengthEncode compares),
///                 numbered by a block exclusive scan; run r's start is its head's position, its
///                 count the next start minus it (B for the last);
///   work list     work_end = inclusive scan of run_blocks over the B run slots (0 past the runs),
///                 then items[w] for every slot as work_items_kernel writes them, from the run
///                 data in shared memory (no global round trip).
/// Writes exactly what the device-wide build does (run_user only for r < num_runs).
__global__ void __launch_bounds__(OneCta::kThreads, 1)
    grouping_one_cta_kernel(const std::int32_t* __restrict__ map, std::int32_t B, std::int64_t U,
                            std::int64_t n_seed, int block_rows, int key_bits, AttentionGrouping g,
                            unsigned long long* map_error TBE_MUTANT_PARAM(m)) {
  constexpr int kT = OneCta::kThreads, kI = OneCta::kItems;
  extern __shared__ __align__(16) unsigned char grouping_smem[];
  OneCtaShared& sm = *reinterpret_cast<OneCtaShared*>(grouping_smem);
  const int t = static_cast<int>(threadIdx.x);
  std::uint32_t key[kI];
  std::int32_t val[kI];
  unsigned long long bad = kLceMapOk;
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    const std::int32_t pos = t * kI + i;
    val[i] = pos;
    key[i] = 0xffffffffu;
    if (pos < B) {
      const std::int32_t u = map[pos];
      key[i] = static_cast<std::uint32_t>(u);
      if (map_value_bad(u, U TBE_MUTANT_FORWARD(m)) && bad == kLceMapOk)
        bad = static_cast<unsigned long long>(pos);
    }
  }
  // already in order on the sort's bits? (thread t's last key against thread t + 1's first)
  const std::uint32_t bits = key_bits >= 32 ? 0xffffffffu : (1u << key_bits) - 1u;
  bool in_order = true;
#pragma unroll
  for (int i = 0; i + 1 < kI; ++i) in_order = in_order && (key[i] & bits) <= (key[i + 1] & bits);
  sm.a.key[t] = key[0];
  bad = OneCtaMin(sm.red.min).Reduce(bad, [](unsigned long long x, unsigned long long y) { return x < y ? x : y; });
  if (t == 0) {
    *map_error = bad;
    if (g.epilogue_counts != nullptr) g.epilogue_counts[0] = g.epilogue_counts[1] = 0;
  }
  __syncthreads();  // the first keys
  if (t + 1 < kT) in_order = in_order && (key[kI - 1] & bits) <= (sm.a.key[t + 1] & bits);
  if (!__syncthreads_and(in_order)) OneCtaSort(sm.sort).Sort(key, val, 0, key_bits);
  __syncthreads();  // the sort's storage is reused below
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    const std::int32_t pos = t * kI + i;
    sm.a.key[pos] = key[i];
    if (pos < B) g.cand_sorted[pos] = val[i];
  }
  __syncthreads();
  std::int32_t head[kI], run[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    const std::int32_t pos = t * kI + i;
    head[i] = pos < B && (pos == 0 || key[i] != sm.a.key[pos - 1]) ? 1 : 0;
  }
  std::int32_t runs = 0;
  OneCtaScan(sm.red.scan).ExclusiveSum(head, run, runs);  // its barriers: every head was read
  std::int32_t* run_user = reinterpret_cast<std::int32_t*>(sm.a.key);
#pragma unroll
  for (int i = 0; i < kI; ++i)
    if (head[i]) {
      sm.a.start[run[i]] = t * kI + i;
      run_user[run[i]] = static_cast<std::int32_t>(key[i]);
      g.run_user[run[i]] = static_cast<std::int32_t>(key[i]);
    }
  __syncthreads();  // run starts and users complete
  std::int32_t count[kI], blocks[kI], end[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    const std::int32_t r = t * kI + i;
    const std::int32_t start = r < runs ? sm.a.start[r] : B;
    count[i] = r < runs ? (r + 1 < runs ? sm.a.start[r + 1] : B) - start : 0;
    blocks[i] = run_blocks(count[i], n_seed, block_rows);
    sm.a.count[r] = count[i];
    if (r < B) {
      g.run_count[r] = count[i];
      g.run_start[r] = start;
    }
  }
  std::int32_t total = 0;
  __syncthreads();  // the scan storage is reused
  OneCtaScan(sm.red.scan).InclusiveSum(blocks, end, total);
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    const std::int32_t r = t * kI + i;
    sm.a.work_end[r] = end[i];
    if (r < B) g.work_end[r] = end[i];
  }
  if (t == 0) *g.num_runs = runs;
  __syncthreads();  // work_end, counts, starts and users in shared memory
  const std::int32_t items = work_list_end(total TBE_MUTANT_FORWARD(m));
  for (std::int32_t w = t; w < g.work_slots; w += kT)
    g.items[w] = w < items ? work_item_at(w, sm.a.work_end, B, run_user, sm.a.start, sm.a.count,
                                          n_seed, block_rows)
                           : AttentionWorkItem{};
}

}  // namespace

std::size_t attention_grouping_temp_bytes(std::int64_t B, std::int64_t U) {
  const int n = static_cast<int>(B);
  std::size_t sort = 0, rle = 0, excl = 0, incl = 0;
  cuda_check(cub::DeviceRadixSort::SortPairs(nullptr, sort, static_cast<const std::uint32_t*>(nullptr),
                                             static_cast<std::uint32_t*>(nullptr),
                                             static_cast<const std::int32_t*>(nullptr),
                                             static_cast<std::int32_t*>(nullptr), n, 0, key_bits(U)),
             "ikbo attention: sort temp size");
  cuda_check(cub::DeviceRunLengthEncode::Encode(nullptr, rle, static_cast<const std::uint32_t*>(nullptr),
                                                static_cast<std::uint32_t*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr), n),
             "ikbo attention: run-length encode temp size");
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, excl, static_cast<const std::int32_t*>(nullptr),
                                           static_cast<std::int32_t*>(nullptr), n),
             "ikbo attention: scan temp size");
  cuda_check(cub::DeviceScan::InclusiveSum(nullptr, incl, static_cast<const std::int32_t*>(nullptr),
                                           static_cast<std::int32_t*>(nullptr), n),
             "ikbo attention: scan temp size");
  std::size_t m = sort;
  for (std::size_t x : {rle, excl, incl}) m = x > m ? x : m;
  return m;
}

void launch_attention_grouping(const std::int32_t* cand_to_user, std::int64_t B, std::int64_t U,
                               std::int64_t n_seed, int block_rows, const AttentionGrouping& g,
                               unsigned long long* map_error, cudaStream_t stream) {
  const int n = static_cast<int>(B);
  if (g.one_cta) {  // AttentionOp: B <= kMaxCandidates
    cuda_check(cudaFuncSetAttribute(grouping_one_cta_kernel,  // 64 KB of dynamic shared memory
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(sizeof(OneCtaShared))),
               "ikbo attention: grouping shared memory size");
    grouping_one_cta_kernel<<<1, OneCta::kThreads, sizeof(OneCtaShared), stream>>>(
        cand_to_user, n, U, n_seed, block_rows, key_bits(U), g, map_error TBE_MUTANT_ARG);
    check_launch("ikbo attention: grouping (one CTA)");
    return;
  }
  cuda_check(cudaMemsetAsync(map_error, 0xff, sizeof(unsigned long long), stream),
             "ikbo attention: reset map flag");
  if (g.epilogue_counts != nullptr)
    cuda_check(cudaMemsetAsync(g.epilogue_counts, 0, 2 * sizeof(unsigned long long), stream),
               "ikbo attention: reset epilogue counters");
  launch_lce_map_check(cand_to_user, B, U, map_error, stream);
  std::size_t temp = g.temp_bytes;
  iota_kernel<<<blocks_for(B), kThreads, 0, stream>>>(g.cand_iota, n);
  check_launch("ikbo attention: iota");
  cuda_check(cub::DeviceRadixSort::SortPairs(g.temp, temp,
                                             reinterpret_cast<const std::uint32_t*>(cand_to_user),
                                             g.keys_sorted, g.cand_iota, g.cand_sorted, n, 0,
                                             key_bits(U), stream),
             "ikbo attention: sort candidates by user");
  temp = g.temp_bytes;
  cuda_check(cub::DeviceRunLengthEncode::Encode(g.temp, temp, g.keys_sorted,
                                                reinterpret_cast<std::uint32_t*>(g.run_user),
                                                g.run_count, g.num_runs, n, stream),
             "ikbo attention: runs of users");
  run_blocks_kernel<<<blocks_for(B), kThreads, 0, stream>>>(g.run_count, g.work_blocks, g.num_runs,
                                                            n, n_seed, block_rows);
  check_launch("ikbo attention: row blocks per run");
  temp = g.temp_bytes;
  cuda_check(cub::DeviceScan::ExclusiveSum(g.temp, temp, g.run_count, g.run_start, n, stream),
             "ikbo attention: run starts");
  temp = g.temp_bytes;
  cuda_check(cub::DeviceScan::InclusiveSum(g.temp, temp, g.work_blocks, g.work_end, n, stream),
             "ikbo attention: work list ends");
  work_items_kernel<<<blocks_for(g.work_slots), kThreads, 0, stream>>>(
      g.items, g.work_slots, g.work_end, g.run_user, g.run_start, g.run_count, n, n_seed,
      block_rows TBE_MUTANT_ARG);
  check_launch("ikbo attention: work items");
}

void launch_attention_forward(DType storage, const AttentionArgs& a, cudaStream_t stream) {
  if (a.B <= 0) return;
  if (a.wgmma) {
    if (storage == DType::BF16) return attention_wgmma::launch_fwd_wgmma_bf16(a, stream);
    return attention_wgmma::launch_fwd_wgmma_f16(a, stream);  // kAttentionStorageTypes: F16, BF16
  }
  dispatch::dispatch_dtype<dispatch::kAttentionStorageTypes>(
      storage, "attention.policy.storage", [&](auto st) {
        attention::launch_fwd_typed<dispatch::storage_t<decltype(st)::value>>(a, stream);
      });
}

}  // namespace tbe::cuda::detail
