// Bounds check / repair family (docs/semantics.md "Bounds check").
// Offsets repair = the max-scan form of FBGEMM's sequential rule:
//   o'[0] = clamp(o[0], 0, N),  o'[k+1] = min(max(o[k+1], o'[k]), N)   after o[T·B] := N.
// Since min(·, N) distributes over max, o' = inclusive max-scan of x with
//   x[0] = clamp(o[0], 0, N), x[k] = min(o[k], N) (0 < k < T·B), x[T·B] = N,
// so a prepare kernel writes x and cub::DeviceScan::InclusiveScan (max) finishes it in place:
// deterministic and equal to the sequential answer. Bag k was repaired iff
// (k == 0 && o'[0] != o[0]) || o'[k+1] != o[k+1] (k + 1 < T·B); the last offset counts once.
#include <cub/device/device_scan.cuh>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/common.cuh"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {
namespace {

constexpr int kBlock = tuning::BoundsCheck::kBlockThreads;
constexpr const char* kIndexArgument = "lookups.index_dtype";

struct MaxOp {
  template <class T>
  __host__ __device__ __forceinline__ T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
};

unsigned blocks_for(std::int64_t n, std::int64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

template <class Idx>
__global__ void offsets_prepare(const Idx* __restrict__ o, std::int64_t num_offsets,
                                std::int64_t N, Idx* __restrict__ x, DeviceCounters* counters) {
  const std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= num_offsets) return;
  const std::int64_t last = num_offsets - 1;
  const std::int64_t v = o[k];
  std::int64_t r;
  if (k == last) {
    r = N;
    if (v != N) atomicAdd(&counters->bad_last_offset, 1ull);
  } else if (k == 0) {
    r = v < 0 ? 0 : (v > N ? N : v);
  } else {
    r = v > N ? N : v;
  }
  x[k] = static_cast<Idx>(r);
}

template <class Idx>
__global__ void count_bad_bags(const Idx* __restrict__ o, const Idx* __restrict__ r,
                               std::int64_t num_bags, DeviceCounters* counters TBE_MUTANT_PARAM(m)) {
  const std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= num_bags) return;
  // The mutant misses bag 0 when only its start was repaired (docs/mutation.md).
  const bool bad = TBE_MUTANT_SWAP(m, kBoundsFirstBagUncounted,
                                   (k + 1 < num_bags && o[k + 1] != r[k + 1]),
                                   bag_repaired(o, r, k, num_bags));
  if (bad) atomicAdd(&counters->bad_bags, 1ull);
}

// One warp per bag of the repaired offsets (out == nullptr: count only).
template <class Idx>
__global__ void repair_indices_warp_per_bag(const Idx* __restrict__ indices,
                                            const Idx* __restrict__ o, const Idx* __restrict__ r,
                                            Idx* __restrict__ out, const FeatureMeta* features,
                                            const std::int64_t* feature_first_bag,
                                            std::int32_t num_features, std::int64_t num_bags,
                                            bool count_bags, DeviceCounters* counters TBE_MUTANT_PARAM(m)) {
  const std::int64_t k = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (k >= num_bags) return;
  if (count_bags && lane == 0) {
    if (bag_repaired(o, r, k, num_bags)) atomicAdd(&counters->bad_bags, 1ull);
  }
  const std::int64_t f = last_le(feature_first_bag, num_features + 1, k);
  const std::int64_t E = features[f].rows;
  const std::int64_t s = r[k], e = r[k + 1];
  unsigned long long bad_here = 0;
  for (std::int64_t p = s + lane; p < e; p += 32) {
    const std::int64_t i = indices[p];
    const bool bad = i < 0 || i >= E;
    bad_here += bad;
    if (out != nullptr)
      out[p] = bad ? Idx(TBE_MUTANT_SWAP(m, kBoundsSeparateRepairToLastRow, E - 1, 0)) : static_cast<Idx>(i);
  }
  for (int d = 16; d > 0; d >>= 1) bad_here += __shfl_down_sync(0xffffffffu, bad_here, d);
  if (lane == 0 && bad_here != 0) atomicAdd(&counters->bad_indices, bad_here);
}

// FATAL: one warp per k in [0, num_bags]; k == num_bags checks the last offset only.
template <class Idx>
__global__ void fatal_check_warp_per_bag(const Idx* __restrict__ indices,
                                         const Idx* __restrict__ o, std::int64_t N,
                                         const FeatureMeta* features,
                                         const std::int64_t* feature_first_bag,
                                         std::int32_t num_features, std::int64_t num_bags,
                                         DeviceCounters* counters TBE_MUTANT_PARAM(m)) {
  const std::int64_t k = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (k > num_bags) return;
  if (k == num_bags) {
    if (lane == 0 && static_cast<std::int64_t>(o[k]) != N)
      atomicMin(&counters->fatal_key, static_cast<unsigned long long>(num_bags));
    return;
  }
  const std::int64_t s = o[k], e = o[k + 1];
  if (s < 0 || s > e || e > N) {
    if (lane == 0) atomicMin(&counters->fatal_key, static_cast<unsigned long long>(k));
    return;
  }
  const std::int64_t f = last_le(feature_first_bag, num_features + 1, k);
  const std::int64_t E = features[f].rows;
  for (std::int64_t p = s + lane; p < e; p += 32) {
    const std::int64_t i = indices[p];
    if (i < 0 || TBE_MUTANT_SWAP(m, kBoundsFatalIndexOffByOne, i > E, i >= E)) {
      atomicMin(&counters->fatal_key, kFatalIndexBase + static_cast<unsigned long long>(p));
      break;  // later positions of this lane cannot be lower
    }
  }
}

template <class Idx>
__global__ void fatal_locate(const Idx* __restrict__ indices, const Idx* __restrict__ o,
                             std::int64_t num_bags, std::int64_t p, DeviceCounters* counters) {
  counters->locate_bag = last_le(o, num_bags + 1, p);
  counters->locate_value = static_cast<std::int64_t>(indices[p]);
}

template <class Idx>
std::size_t scan_temp_bytes_t(std::int64_t n) {
  std::size_t bytes = 0;
  cuda_check(cub::DeviceScan::InclusiveScan(nullptr, bytes, static_cast<Idx*>(nullptr),
                                            static_cast<Idx*>(nullptr), MaxOp{}, n),
             "cub::DeviceScan::InclusiveScan (size query)");
  return bytes;
}

template <class Idx>
void offsets_repair_t(const void* offsets, std::int64_t num_offsets, std::int64_t N,
                      void* repaired, void* temp, std::size_t temp_bytes,
                      DeviceCounters* counters, cudaStream_t stream) {
  Idx* x = static_cast<Idx*>(repaired);
  offsets_prepare<Idx><<<blocks_for(num_offsets, kBlock), kBlock, 0, stream>>>(
      static_cast<const Idx*>(offsets), num_offsets, N, x, counters);
  check_launch("offsets_prepare");
  cuda_check(cub::DeviceScan::InclusiveScan(temp, temp_bytes, x, x, MaxOp{}, num_offsets, stream),
             "cub::DeviceScan::InclusiveScan (offsets max-scan)");
}

}  // namespace

std::size_t offsets_scan_temp_bytes(DType index, std::int64_t n) {
  return dispatch::dispatch_index(index, kIndexArgument, [&](auto idx) {
    return scan_temp_bytes_t<dispatch::storage_t<decltype(idx)::value>>(n);
  });
}

void launch_offsets_repair(DType index, const void* offsets, std::int64_t num_offsets,
                           std::int64_t num_indices, void* repaired, void* scan_temp,
                           std::size_t scan_temp_bytes, DeviceCounters* counters,
                           cudaStream_t stream) {
  dispatch::dispatch_index(index, kIndexArgument, [&](auto idx) {
    offsets_repair_t<dispatch::storage_t<decltype(idx)::value>>(
        offsets, num_offsets, num_indices, repaired, scan_temp, scan_temp_bytes, counters, stream);
  });
}

void launch_count_bad_bags(DType index, const void* offsets, const void* repaired,
                           std::int64_t num_bags, DeviceCounters* counters, cudaStream_t stream) {
  if (num_bags <= 0) return;
  dispatch::dispatch_index(index, kIndexArgument, [&](auto idx) {
    using Idx = dispatch::storage_t<decltype(idx)::value>;
    count_bad_bags<<<blocks_for(num_bags, kBlock), kBlock, 0, stream>>>(
        static_cast<const Idx*>(offsets), static_cast<const Idx*>(repaired), num_bags, counters TBE_MUTANT_ARG);
  });
  check_launch("count_bad_bags");
}

void launch_repair_indices(DType index, const void* indices, const void* offsets,
                           const void* repaired_offsets, void* repaired_indices,
                           const FeatureMeta* features, const std::int64_t* feature_first_bag,
                           std::int32_t num_features, std::int64_t num_bags, bool count_bags,
                           DeviceCounters* counters, cudaStream_t stream) {
  if (num_bags <= 0) return;
  const unsigned blocks = blocks_for(num_bags, kBlock / tuning::kWarpThreads);
  dispatch::dispatch_index(index, kIndexArgument, [&](auto idx) {
    using Idx = dispatch::storage_t<decltype(idx)::value>;
    repair_indices_warp_per_bag<<<blocks, kBlock, 0, stream>>>(
        static_cast<const Idx*>(indices), static_cast<const Idx*>(offsets),
        static_cast<const Idx*>(repaired_offsets), static_cast<Idx*>(repaired_indices), features,
        feature_first_bag, num_features, num_bags, count_bags, counters TBE_MUTANT_ARG);
  });
  check_launch("repair_indices_warp_per_bag");
}

void launch_fatal_check(DType index, const void* indices, const void* offsets,
                        std::int64_t num_indices, const FeatureMeta* features,
                        const std::int64_t* feature_first_bag, std::int32_t num_features,
                        std::int64_t num_bags, DeviceCounters* counters, cudaStream_t stream) {
  const unsigned blocks = blocks_for(num_bags + 1, kBlock / tuning::kWarpThreads);
  dispatch::dispatch_index(index, kIndexArgument, [&](auto idx) {
    using Idx = dispatch::storage_t<decltype(idx)::value>;
    fatal_check_warp_per_bag<<<blocks, kBlock, 0, stream>>>(
        static_cast<const Idx*>(indices), static_cast<const Idx*>(offsets), num_indices, features,
        feature_first_bag, num_features, num_bags, counters TBE_MUTANT_ARG);
  });
  check_launch("fatal_check_warp_per_bag");
}

void launch_fatal_locate(DType index, const void* indices, const void* offsets,
                         std::int64_t num_bags, std::int64_t position, DeviceCounters* counters,
                         cudaStream_t stream) {
  dispatch::dispatch_index(index, kIndexArgument, [&](auto idx) {
    using Idx = dispatch::storage_t<decltype(idx)::value>;
    fatal_locate<<<1, 1, 0, stream>>>(static_cast<const Idx*>(indices),
                                      static_cast<const Idx*>(offsets), num_bags, position,
                                      counters);
  });
  check_launch("fatal_locate");
}

}  // namespace tbe::cuda::detail
