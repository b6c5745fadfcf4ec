// Catch2 v2 runner for GPU test executables: with no visible CUDA device it prints why and exits
// with 77 (ctest SKIP_RETURN_CODE), so a GPU test is never reported as passed without a GPU.
// Listing tests (used by catch_discover_tests at build time) works without a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include <cuda_runtime_api.h>

int main(int argc, char* argv[]) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--list", 6) == 0) listing = true;
  if (!listing) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      std::printf("SKIPPED: no CUDA device visible (%s)\n",
                  e == cudaSuccess ? "device count 0" : cudaGetErrorString(e));
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
