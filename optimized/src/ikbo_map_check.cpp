// throw_if_map_error (src/ikbo_map_check.h).
#include "src/ikbo_map_check.h"

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/ikbo_lce_launch.h"
#include "tbe/cuda/check.h"
#include "tbe/errors.h"
#include "tbe/ikbo.h"

namespace tbe::cuda::detail {

void throw_if_map_error(const unsigned long long* d_map_error, const std::int32_t* d_cand_to_user,
                        std::int64_t B, std::int64_t U, const char* op) {
  unsigned long long bad = kLceMapOk;
  cuda_check(cudaMemcpy(&bad, d_map_error, sizeof bad, cudaMemcpyDeviceToHost),
             (std::string(op) + ": read map flag").c_str());
  if (bad == kLceMapOk) return;
  // Same message as the reference: validate_map on the downloaded map names the first offender.
  std::vector<std::int32_t> map(static_cast<std::size_t>(B));
  cuda_check(cudaMemcpy(map.data(), d_cand_to_user, map.size() * sizeof(std::int32_t),
                        cudaMemcpyDeviceToHost),
             (std::string(op) + ": download cand_to_user").c_str());
  const Status s = ikbo::validate_map(map, U);
  if (!s.ok()) throw InvalidArgument(s);
  throw InvalidArgument("cand_to_user", "cand_to_user[" + std::to_string(bad) +
                                            "]: outside [0, U=" + std::to_string(U) +
                                            ") during run() (the map changed since)");
}

}  // namespace tbe::cuda::detail
