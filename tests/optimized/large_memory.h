// The [large] GPU tests' device-memory check, before they allocate.
#pragma once

#include <cstddef>

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

namespace tbe::test {

/// Fails the running test unless the device has at least `need` bytes free (`what` names the
/// test). A test that could not run is never reported as passed (Catch2 v2 has no per-test skip):
/// run the [large] tests on a device with the memory, or leave them out with `~[large]`.
inline void require_device_memory(std::size_t need, const char* what) {
  std::size_t free_b = 0, total_b = 0;
  REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
  if (free_b < need)
    FAIL(what << " needs " << (need >> 20) << " MiB of free device memory, " << (free_b >> 20)
              << " MiB are free: run it on a device with the memory, or leave the [large] tests out "
                 "(~[large])");
}

}  // namespace tbe::test
