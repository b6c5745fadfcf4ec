// C04: a table with E·D >= 2^31 elements (E = 2^24 + 1, D = 128, FP32: 8.6 GB) read with int32
// indices, plus a second table after it. Filled on the device (no host copy of 8.6 GB); run
// through the device-level ForwardOp. Skips (with a message) if the device lacks the memory.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include "large_memory.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"

using namespace tbe;

namespace {

// Row r of table 0 is r mod 1000; row r of table 1 is 5000 + r.
__global__ void fill_huge(float* w, std::int64_t rows0, std::int64_t total_rows, int D) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total_rows * D; i += stride) {
    const std::int64_t r = i / D;
    w[i] = r < rows0 ? static_cast<float>(r % 1000) : static_cast<float>(5000 + (r - rows0));
  }
}

}  // namespace

TEST_CASE("C04 huge table: 64-bit element addressing with int32 indices", "[gpu][cases][large]") {
  constexpr std::int64_t E0 = (1ll << 24) + 1, E1 = 4;
  constexpr std::int32_t D = 128;
  const std::size_t bytes = static_cast<std::size_t>(E0 + E1) * D * sizeof(float);
  tbe::test::require_device_memory(bytes + (512ull << 20), "C04");
  cuda::DeviceBuffer weights(bytes);
  fill_huge<<<4096, 256>>>(weights.as<float>(), E0, E0 + E1, D);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  const std::vector<std::int64_t> rows = {E0, E1};
  const std::vector<std::int32_t> dims = {D, D};
  const std::vector<std::int64_t> table_offsets = {0, E0 * D};
  const std::vector<std::int32_t> ftm = {0, 1};
  for (DType idx : {DType::I32, DType::I64})
    for (BoundsCheckMode mode : {BoundsCheckMode::Warning, BoundsCheckMode::Fatal, BoundsCheckMode::None})
      for (bool fused : {true, false}) {
        const std::vector<std::int64_t> ind64 = {E0 - 1, 0}, off64 = {0, 1, 2};
        const std::vector<std::int32_t> ind32 = {static_cast<std::int32_t>(E0 - 1), 0}, off32 = {0, 1, 2};
        const bool i32 = idx == DType::I32;
        cuda::DeviceBuffer d_idx(i32 ? static_cast<const void*>(ind32.data()) : ind64.data(), 2 * dtype_size(idx));
        cuda::DeviceBuffer d_off(i32 ? static_cast<const void*>(off32.data()) : off64.data(), 3 * dtype_size(idx));
        ForwardProblem p;
        p.tables.dtype = DType::F32;
        p.tables.weights = weights.get();
        p.tables.rows = rows;
        p.tables.dims = dims;
        p.tables.table_offsets = table_offsets;
        p.tables.feature_table_map = ftm;
        p.lookups.index_dtype = idx;
        p.lookups.indices = d_idx.get();
        p.lookups.num_indices = 2;
        p.lookups.offsets = d_off.get();
        p.lookups.num_offsets = 3;
        p.lookups.batch_size = 1;
        p.options.bounds_check = mode;
        p.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
        ForwardStrategy s;
        s.fused_bounds_check = fused;
        cuda::ForwardOp op(p, s);
        REQUIRE(op.layout().numel == 2 * D);
        cuda::DeviceBuffer out(2 * D * sizeof(float)), ws(op.workspace_bytes());
        REQUIRE(cudaMemset(out.get(), 0xff, out.bytes()) == cudaSuccess);
        op.run(out.get(), ws.get(), nullptr);
        const ForwardStats st = op.finish();
        std::vector<float> h(2 * D);
        REQUIRE(cudaMemcpy(h.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
        INFO("index " << to_string(idx) << " mode " << to_string(mode) << " fused " << fused);
        CHECK(st.warnings == 0);
        int bad = 0;
        for (int d = 0; d < D; ++d) bad += (h[d] != 216.0f) + (h[D + d] != 5000.0f);
        CHECK(bad == 0);
      }
}
