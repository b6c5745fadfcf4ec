// IKBO attention: the device grouping of candidates by user (CUB radix sort, run-length encoding,
// scans; kernels/ikbo_attention_launch.h) and the storage-type dispatch of the forward kernel.
#include <bit>
#include <cstdint>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/ikbo_attention_fwd.cuh"
#include "kernels/ikbo_attention_launch.h"
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

/// work_blocks[r] = ceil(run_count[r]·n_seed / block_rows) for r < num_runs; 0 (and run_count 0)
/// for the slots past the runs.
__global__ void run_blocks_kernel(std::int32_t* run_count, std::int32_t* work_blocks,
                                  const std::int32_t* num_runs, std::int32_t slots,
                                  std::int64_t n_seed, int block_rows) {
  const std::int32_t r = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= slots) return;
  if (r < *num_runs) {
    const std::int64_t rows = static_cast<std::int64_t>(run_count[r]) * n_seed;
    work_blocks[r] = static_cast<std::int32_t>((rows + block_rows - 1) / block_rows);
  } else {
    run_count[r] = 0;
    work_blocks[r] = 0;
  }
}

/// items[w] for every slot w < slots: the block of the run r with work_end[r − 1] <= w <
/// work_end[r] (binary search; work_end is non-decreasing), rows 0 past the last run's end.
__global__ void work_items_kernel(AttentionWorkItem* items, std::int32_t slots,
                                  const std::int32_t* work_end, const std::int32_t* run_user,
                                  const std::int32_t* run_start, const std::int32_t* run_count,
                                  std::int32_t runs, std::int64_t n_seed,
                                  int block_rows TBE_MUTANT_PARAM(m)) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots) return;
  const auto w = static_cast<std::int32_t>(i);
  AttentionWorkItem it;
  if (w < TBE_MUTANT_SWAP(m, kAttnWorkItemLastDropped, work_end[runs - 1] - 1, work_end[runs - 1])) {
    std::int32_t lo = 0, hi = runs - 1;
    while (lo < hi) {
      const std::int32_t mid = lo + ((hi - lo) >> 1);
      if (work_end[mid] > w) hi = mid; else lo = mid + 1;
    }
    const std::int32_t blk = w - (lo == 0 ? 0 : work_end[lo - 1]);
    const std::int64_t run_rows = static_cast<std::int64_t>(run_count[lo]) * n_seed;
    it.user = run_user[lo];
    it.cand0 = run_start[lo];
    it.row0 = blk * block_rows;
    it.rows = static_cast<std::int32_t>(
        run_rows - it.row0 < block_rows ? run_rows - it.row0 : block_rows);
  }
  items[w] = it;
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
                               cudaStream_t stream) {
  const int n = static_cast<int>(B);
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
