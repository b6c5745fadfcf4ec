#include "src/bounds_describe.h"

#include "dispatch/dispatch.h"
#include "tbe/cuda/check.h"

namespace tbe::cuda::detail {

BoundsViolation describe_fatal(unsigned long long key, DType index_dtype, const void* indices,
                               const void* offsets, std::int64_t num_bags, std::int64_t N,
                               const OutputLayout& layout,
                               const std::vector<std::int64_t>& feature_rows,
                               DeviceCounters* counters, cudaStream_t stream) {
  auto read_offset = [&](std::int64_t k) {
    return dispatch::dispatch_index(index_dtype, "lookups.index_dtype", [&](auto idx) {
      using Idx = dispatch::storage_t<decltype(idx)::value>;
      Idx x = 0;
      cuda_check(cudaMemcpy(&x, static_cast<const Idx*>(offsets) + k, sizeof(Idx),
                            cudaMemcpyDeviceToHost), "read offset");
      return static_cast<std::int64_t>(x);
    });
  };
  BoundsViolation v;
  if (key < static_cast<unsigned long long>(num_bags)) {
    const auto k = static_cast<std::int64_t>(key);
    const std::int64_t s = read_offset(k), e = read_offset(k + 1);
    const std::int64_t f = layout.feature_of_bag(k);
    v.kind = BoundsViolation::Kind::Bag;
    v.feature = f;
    v.sample = k - layout.feature_bag_offset[f];
    v.position = k;
    v.value = (s < 0 || s > e) ? s : e;
    v.limit = N;
  } else if (key == static_cast<unsigned long long>(num_bags)) {
    v.kind = BoundsViolation::Kind::LastOffset;
    v.position = num_bags;
    v.value = read_offset(num_bags);
    v.limit = N;
  } else {
    const auto p = static_cast<std::int64_t>(key - kFatalIndexBase);
    launch_fatal_locate(index_dtype, indices, offsets, num_bags, p, counters, stream);
    DeviceCounters c{};
    cuda_check(cudaMemcpyAsync(&c, counters, sizeof c, cudaMemcpyDeviceToHost, stream),
               "read locate");
    cuda_check(cudaStreamSynchronize(stream), "locate offender");
    const std::int64_t f = layout.feature_of_bag(c.locate_bag);
    v.kind = BoundsViolation::Kind::Index;
    v.feature = f;
    v.sample = c.locate_bag - layout.feature_bag_offset[f];
    v.position = p;
    v.value = c.locate_value;
    v.limit = feature_rows[f];
  }
  return v;
}

}  // namespace tbe::cuda::detail
