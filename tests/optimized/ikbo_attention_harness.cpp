#include "ikbo_attention_harness.h"

#include <algorithm>
#include <sstream>

#include <cuda_runtime_api.h>

#include "tbe/cuda/device_buffer.h"
#include "tbe/errors.h"

namespace tbe::test {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw DeviceError(std::string(what) + ": " + cudaGetErrorString(e));
}

cudaStream_t attention_test_stream() {
  static cudaStream_t s = [] {
    cudaStream_t t = nullptr;
    check(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), "cudaStreamCreate");
    return t;
  }();
  return s;
}

std::int64_t nonneg(std::int64_t x) { return x < 0 ? 0 : x; }

}  // namespace

std::string to_string(const AttentionOutcome& o) {
  std::ostringstream s;
  if (o.kind == AttentionOutcome::Kind::Ok) {
    s << "ok (" << o.output.size() << " bytes; paths";
    for (const auto& p : o.paths) s << " " << p;
    s << ")";
  } else {
    s << "InvalidArgument[" << o.argument << "]: " << o.what;
  }
  if (!o.sentinels_intact) s << " SENTINELS OVERWRITTEN";
  if (!o.poison_intact) s << " OUTPUT WRITTEN ON ERROR";
  return s.str();
}

AttentionOutcome run_attention_gpu(const ikbo::AttentionProblem& p,
                                   const cuda::AttentionTuning& tuning, bool misalign_q) {
  AttentionOutcome o;
  const std::size_t es = dtype_size(p.policy.storage);
  // sizes from the shape as given (clamped: invalid shapes must be rejected before any use)
  const std::int64_t HD = nonneg(p.H) * nonneg(p.Dh);
  const std::int64_t keys =
      p.jagged() ? nonneg(p.k_offsets.back()) : nonneg(p.U) * nonneg(p.S);
  const std::size_t q_bytes = static_cast<std::size_t>(nonneg(p.B) * nonneg(p.n_seed) * HD) * es;
  const std::size_t kv_bytes = static_cast<std::size_t>(keys * HD) * es;
  const std::size_t out_bytes = q_bytes;
  const std::size_t shift = misalign_q ? 2 : 0;
  cuda::DeviceBuffer q(q_bytes + 256), k(std::max<std::size_t>(kv_bytes, 256)),
      v(std::max<std::size_t>(kv_bytes, 256));
  if (q_bytes > 0 && p.q != nullptr)
    check(cudaMemcpy(static_cast<char*>(q.get()) + shift, p.q, q_bytes, cudaMemcpyHostToDevice),
          "upload q");
  if (kv_bytes > 0 && p.k != nullptr)
    check(cudaMemcpy(k.get(), p.k, kv_bytes, cudaMemcpyHostToDevice), "upload k");
  if (kv_bytes > 0 && p.v != nullptr)
    check(cudaMemcpy(v.get(), p.v, kv_bytes, cudaMemcpyHostToDevice), "upload v");
  cuda::DeviceBuffer map(p.cand_to_user, static_cast<std::size_t>(nonneg(p.B)) * 4);
  cuda::DeviceBuffer placeholder(256);
  ikbo::AttentionProblem dp = p;
  dp.q = p.q != nullptr ? static_cast<const char*>(q.get()) + shift : nullptr;
  dp.k = p.k != nullptr ? k.get() : nullptr;
  dp.v = p.v != nullptr ? v.get() : nullptr;
  dp.cand_to_user = p.cand_to_user != nullptr
                        ? static_cast<const std::int32_t*>(map.get() ? map.get() : placeholder.get())
                        : nullptr;
  cuda::DeviceBuffer out(out_bytes + kAttentionSentinelBytes);
  check(cudaMemset(out.get(), 0xff, out_bytes + kAttentionSentinelBytes), "poison out");
  try {
    cuda::AttentionOp op(dp, tuning);
    cuda::DeviceBuffer ws(op.workspace_bytes());
    op.run(out.get(), ws.get(), attention_test_stream());
    op.finish();
    o.paths = op.paths();
    o.epilogue = op.epilogue_blocks();
  } catch (const InvalidArgument& e) {
    o.kind = AttentionOutcome::Kind::InvalidArgument;
    o.argument = e.argument();
    o.what = e.what();
  }
  check(cudaDeviceSynchronize(), "attention test sync");
  std::vector<std::byte> all(out_bytes + kAttentionSentinelBytes);
  check(cudaMemcpy(all.data(), out.get(), all.size(), cudaMemcpyDeviceToHost), "download out");
  o.sentinels_intact = std::all_of(all.begin() + static_cast<std::ptrdiff_t>(out_bytes), all.end(),
                                   [](std::byte b) { return b == std::byte{0xff}; });
  if (o.kind == AttentionOutcome::Kind::Ok) {
    all.resize(out_bytes);
    o.output = std::move(all);
  } else {
    o.poison_intact = std::all_of(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(out_bytes),
                                  [](std::byte b) { return b == std::byte{0xff}; });
  }
  return o;
}

}  // namespace tbe::test
