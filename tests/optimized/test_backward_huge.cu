// Backward with more than 2^31 rows in total (table 0: E = 2^31 + 8 rows, D = 1, FP32: 8.6 GB,
// filled on the device): 64-bit sort keys ("bwd.sort.key64"), int64 indices beyond int32, exact
// SGD with small-integer gradients (exact values), the short and both long-run paths, in place.
// Skips (with a message) if the device lacks the memory.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include "large_memory.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/device_buffer.h"

using namespace tbe;

namespace {

__global__ void fill_mod1000(float* w, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    w[i] = static_cast<float>(i % 1000);
}

float read(const cuda::DeviceBuffer& b, std::int64_t i) {
  float v = 0;
  REQUIRE(cudaMemcpy(&v, b.as<float>() + i, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

}  // namespace

TEST_CASE("backward over more than 2^31 rows uses 64-bit keys", "[gpu][backward][large]") {
  constexpr std::int64_t E0 = (1ll << 31) + 8, E1 = 4;
  const std::int64_t n = E0 + E1;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  tbe::test::require_device_memory(bytes + (1ull << 30), "backward over more than 2^31 rows");
  cuda::DeviceBuffer weights(bytes);
  // feature 0 -> table 0, feature 1 -> table 1; B = 2
  // bags: (0,0) = [E0-1, E0-1], (0,1) = [0], (1,0) = [2], (1,1) = [2, 3]
  const std::vector<std::int64_t> indices = {E0 - 1, E0 - 1, 0, 2, 2, 3}, offsets = {0, 2, 3, 4, 6};
  const std::vector<float> grad = {1, 2, 3, 4};  // [B, D0 + D1]: (b, f) = grad[2b + f]
  cuda::DeviceBuffer d_idx(indices.data(), indices.size() * 8), d_off(offsets.data(), offsets.size() * 8),
      d_grad(grad.data(), grad.size() * 4);
  const std::vector<std::int64_t> rows = {E0, E1}, table_offsets = {0, E0};
  const std::vector<std::int32_t> dims = {1, 1}, ftm = {0, 1};
  BackwardProblem p;
  p.forward.tables.dtype = DType::F32;
  p.forward.tables.weights = weights.get();
  p.forward.tables.rows = rows;
  p.forward.tables.dims = dims;
  p.forward.tables.table_offsets = table_offsets;
  p.forward.tables.feature_table_map = ftm;
  p.forward.lookups.index_dtype = DType::I64;
  p.forward.lookups.indices = d_idx.get();
  p.forward.lookups.num_indices = 6;
  p.forward.lookups.offsets = d_off.get();
  p.forward.lookups.num_offsets = 5;
  p.forward.lookups.batch_size = 2;
  p.forward.options.bounds_check = BoundsCheckMode::Warning;
  p.forward.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  p.grad_output = d_grad.get();
  p.options.optimizer.kind = OptimizerKind::ExactSgd;
  p.options.optimizer.learning_rate = 0.5;
  for (int variant = 0; variant < 3; ++variant) {
    BackwardStrategy s;
    if (variant > 0) {
      s.long_run_threshold = 2;  // rows E0-1 (SL 2) and table 1 row 2 (SL 2) take a long path
      s.chunk_size = 32;
      s.long_runs = variant == 1 ? BackwardStrategy::LongRuns::Fused : BackwardStrategy::LongRuns::Chunked;
    }
    fill_mod1000<<<4096, 256>>>(weights.as<float>(), n);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    cuda::BackwardOp op(p, s);
    cuda::DeviceBuffer ws(op.workspace_bytes());
    BackwardOutputs out;
    out.weights = weights.get();  // in place
    op.run(out, ws.get(), nullptr);
    const BackwardStats st = op.finish();
    INFO("variant " << variant);
    CHECK(std::find(st.paths.begin(), st.paths.end(), "bwd.sort.key64") != st.paths.end());
    CHECK(st.runs == 4);
    CHECK(st.lookups == 6);
    CHECK(st.counters.short_runs == (variant == 0 ? 4 : 2));
    CHECK(read(weights, E0 - 1) == static_cast<float>((E0 - 1) % 1000) - 0.5f * 2);  // G = 2·1
    CHECK(read(weights, 0) == -1.5f);                                              // G = 3
    CHECK(read(weights, E0 + 2) == static_cast<float>((E0 + 2) % 1000) - 0.5f * 6);  // G = 2 + 4
    CHECK(read(weights, E0 + 3) == static_cast<float>((E0 + 3) % 1000) - 0.5f * 4);  // G = 4
    CHECK(read(weights, E0 - 2) == static_cast<float>((E0 - 2) % 1000));  // untouched
    CHECK(read(weights, 1) == 1.0f);
    CHECK(read(weights, E0) == static_cast<float>(E0 % 1000));
  }
}
