// GPU test of case C20 (IKBO attention, 64-bit offsets): the last user's K/V starts past 2^32
// elements (dense, 17 GB of device memory) or past 2^31 elements (jagged, 8.6 GB); its candidates
// must get bitwise the output of a one-user problem holding that user's K/V. Tagged [large]: run
// with `test_optimized "[large]"` on a device with the memory (it fails, saying what it needs, otherwise).
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "ikbo_attention_harness.h"
#include "large_memory.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/ikbo_attention.h"
#include "tbe/ikbo_workloads.h"

using namespace tbe;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) FAIL(what << ": " << cudaGetErrorString(e));
}

/// out of AttentionOp on device pointers (bytes of policy.storage).
std::vector<std::byte> run_device(const ikbo::AttentionProblem& p) {
  cuda::AttentionOp op(p);
  const std::size_t bytes = static_cast<std::size_t>(ikbo::attention_output_numel(p)) * 2;
  cuda::DeviceBuffer out(bytes), ws(op.workspace_bytes());
  op.run(out.get(), ws.get(), nullptr);
  op.finish();
  std::vector<std::byte> host(bytes);
  check(cudaMemcpy(host.data(), out.get(), bytes, cudaMemcpyDeviceToHost), "download out");
  return host;
}

/// Runs `keys_before` keys of other users followed by the one user's `S` keys (from `small`, a
/// one-user case) and compares with the one-user run. jagged: U = 2 with k_offsets [0,
/// keys_before, keys_before + S]; dense: U = keys_before / S + 1 users of S keys.
void compare_far_user(std::int64_t keys_before, bool jagged) {
  constexpr std::int64_t S = 512, H = 2, Dh = 128, B = 4, n_seed = 16;
  const std::int64_t HD = H * Dh;
  const ikbo::IkboPolicy pol{DType::BF16, DType::F32, ikbo::LceRounding::RoundOnce};
  ikbo::AttentionShape sh;
  sh.B = B;
  sh.U = 1;
  sh.n_seed = n_seed;
  sh.H = H;
  sh.Dh = Dh;
  sh.S = S;
  const ikbo::AttentionCase small = ikbo::make_attention_case(sh, pol, ikbo::MapKind::OneUser, 20);
  const std::size_t user_bytes = static_cast<std::size_t>(S * HD) * 2;
  const std::size_t far_bytes = static_cast<std::size_t>((keys_before + S) * HD) * 2;
  tbe::test::require_device_memory(2 * far_bytes + (std::size_t{1} << 30), "C20");
  const std::vector<std::byte> want = tbe::test::run_attention_gpu(small.view()).output;
  REQUIRE(want.size() == static_cast<std::size_t>(B * n_seed * HD) * 2);

  cuda::DeviceBuffer k(far_bytes), v(far_bytes), q(small.q.data(), small.q.size());
  check(cudaMemset(k.get(), 0, far_bytes), "memset k");
  check(cudaMemset(v.get(), 0, far_bytes), "memset v");
  const std::size_t at = static_cast<std::size_t>(keys_before * HD) * 2;
  check(cudaMemcpy(static_cast<char*>(k.get()) + at, small.k.data(), user_bytes, cudaMemcpyHostToDevice), "upload k");
  check(cudaMemcpy(static_cast<char*>(v.get()) + at, small.v.data(), user_bytes, cudaMemcpyHostToDevice), "upload v");
  const std::int64_t U = jagged ? 2 : keys_before / S + 1;
  std::vector<std::int32_t> map(B, static_cast<std::int32_t>(U - 1));
  cuda::DeviceBuffer d_map(map.data(), map.size() * sizeof(std::int32_t));
  const std::vector<std::int64_t> offsets = {0, keys_before, keys_before + S};
  ikbo::AttentionProblem p;
  p.B = B;
  p.U = U;
  p.n_seed = n_seed;
  p.H = H;
  p.Dh = Dh;
  p.S = jagged ? 0 : S;
  if (jagged) p.k_offsets = offsets;
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.cand_to_user = static_cast<const std::int32_t*>(d_map.get());
  p.policy = pol;
  REQUIRE(run_device(p) == want);
}

}  // namespace

TEST_CASE("ikbo attention C20: dense, the last user's K/V past 2^32 elements", "[gpu][ikbo][attention][large]") {
  // U = 32769 users of 512 keys: the last starts at key 2^24, element 2^24 · 256 = 2^32
  compare_far_user(std::int64_t{32768} * 512, false);
}

TEST_CASE("ikbo attention C20: jagged, k_offsets past 2^31 elements", "[gpu][ikbo][attention][large]") {
  // user 1 starts at key 2^23 + 3: element (2^23 + 3) · 256 > 2^31
  compare_far_user((std::int64_t{1} << 23) + 3, true);
}
