#include "ikbo_lce_harness.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include <cuda_runtime_api.h>

#include "tbe/cuda/device_buffer.h"
#include "tbe/errors.h"
#include "tbe/host_case.h"

namespace tbe::test {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw DeviceError(std::string(what) + ": " + cudaGetErrorString(e));
}

cudaStream_t lce_test_stream() {
  static cudaStream_t s = [] {
    cudaStream_t t = nullptr;
    check(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), "cudaStreamCreate");
    return t;
  }();
  return s;
}

std::int64_t nonneg(std::int64_t x) { return x < 0 ? 0 : x; }

/// Host copy of a [rows, K] weight in rows of `ld` elements, extra columns NaN.
std::vector<std::byte> padded_weight(const void* w, DType st, std::int64_t rows, std::int64_t K,
                                     std::int64_t ld) {
  const std::size_t es = dtype_size(st);
  std::vector<std::byte> out(static_cast<std::size_t>(rows * ld) * es);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < ld; ++k)
      store_from_double(st, out.data(), r * ld + k,
                        k < K ? load_as_double(st, w, r * K + k)
                              : std::numeric_limits<double>::quiet_NaN());
  return out;
}

}  // namespace

std::string to_string(const LceOutcome& o) {
  std::ostringstream s;
  if (o.kind == LceOutcome::Kind::Ok) {
    s << "ok (" << o.output.size() << " bytes; paths";
    for (const auto& p : o.paths) s << " " << p;
    s << ")";
  } else {
    s << "InvalidArgument[" << o.argument << "]: " << o.what;
  }
  return s.str();
}

LceOutcome run_lce_reference(const ikbo::LceProblem& p) {
  LceOutcome o;
  try {
    throw_if_error(ikbo::validate(p));
    o.output.assign(static_cast<std::size_t>(p.B * p.M * p.N) * dtype_size(p.policy.storage),
                    std::byte{0xff});
    ikbo::lce_reference(p, o.output.data());
  } catch (const InvalidArgument& e) {
    o.kind = LceOutcome::Kind::InvalidArgument;
    o.argument = e.argument();
    o.what = e.what();
    o.output.clear();
  }
  return o;
}

LceOutcome run_lce_gpu(const ikbo::LceProblem& p, cuda::LceStage stage, const LceWeights& weights) {
  LceOutcome o;
  const DType st = p.policy.storage;
  const std::size_t es = dtype_size(st);
  const std::int64_t B = nonneg(p.B), U = nonneg(p.U), M = nonneg(p.M), N = nonneg(p.N),
                     K_c = nonneg(p.K_c), K_u = nonneg(p.K_u);
  auto upload = [&](const void* host, std::int64_t elems) {
    return host != nullptr ? cuda::DeviceBuffer(host, static_cast<std::size_t>(elems) * es)
                           : cuda::DeviceBuffer();
  };
  ikbo::LceProblem dp = p;
  cuda::LceLayout layout;
  cuda::DeviceBuffer w_c, w_u;
  if (weights.pad_to_c > 0 && p.w_c != nullptr) {
    const auto h = padded_weight(p.w_c, st, M, K_c, weights.pad_to_c);
    w_c = cuda::DeviceBuffer(h.data(), h.size());
    layout.w_c_ld = weights.pad_to_c;
  } else {
    w_c = upload(p.w_c, M * K_c);
  }
  if (weights.pad_to_u > 0 && p.w_u != nullptr) {
    const auto h = padded_weight(p.w_u, st, M, K_u, weights.pad_to_u);
    w_u = cuda::DeviceBuffer(h.data(), h.size());
    layout.w_u_ld = weights.pad_to_u;
  } else {
    w_u = upload(p.w_u, M * K_u);
  }
  cuda::DeviceBuffer e_c = upload(p.e_c, B * K_c * N), e_u = upload(p.e_u, U * K_u * N);
  cuda::DeviceBuffer map = p.cand_to_user != nullptr
                               ? cuda::DeviceBuffer(p.cand_to_user, static_cast<std::size_t>(B) * 4)
                               : cuda::DeviceBuffer();
  // Non-null device pointers where the host had non-null ones (empty tensors included).
  static cuda::DeviceBuffer dummy(256);
  auto dev = [&](const void* host, const cuda::DeviceBuffer& d) -> const void* {
    return host == nullptr ? nullptr : (d.get() != nullptr ? d.get() : dummy.get());
  };
  dp.w_c = dev(p.w_c, w_c);
  dp.w_u = dev(p.w_u, w_u);
  dp.e_c = dev(p.e_c, e_c);
  dp.e_u = dev(p.e_u, e_u);
  dp.cand_to_user = static_cast<const std::int32_t*>(dev(p.cand_to_user, map));

  cuda::DeviceBuffer out;
  std::size_t out_bytes = 0;
  auto download = [&]() {
    std::vector<std::byte> all(out_bytes + kLceSentinelBytes);
    check(cudaMemcpy(all.data(), out.get(), all.size(), cudaMemcpyDeviceToHost), "download");
    for (std::size_t i = out_bytes; i < all.size(); ++i)
      if (all[i] != std::byte{0xa5}) o.sentinels_intact = false;
    all.resize(out_bytes);
    return all;
  };
  try {
    cuda::LceOp op(dp, stage, layout);
    o.paths = op.paths();
    out_bytes = static_cast<std::size_t>(B * M * N) * es;
    out = cuda::DeviceBuffer(out_bytes + kLceSentinelBytes);
    check(cudaMemset(out.get(), 0xff, out_bytes), "poison");
    check(cudaMemset(static_cast<char*>(out.get()) + out_bytes, 0xa5, kLceSentinelBytes), "sentinel");
    cuda::DeviceBuffer ws(op.workspace_bytes());
    op.run(out.get(), ws.get(), lce_test_stream());
    op.finish();
    o.output = download();
  } catch (const InvalidArgument& e) {
    o.kind = LceOutcome::Kind::InvalidArgument;
    o.argument = e.argument();
    o.what = e.what();
    if (out.get() != nullptr) {
      for (std::byte b : download())
        if (b != std::byte{0xff}) o.poison_intact = false;
    }
  }
  return o;
}

std::int64_t count_element_differences(const LceOutcome& a, const LceOutcome& b, DType storage) {
  if (a.output.size() != b.output.size()) return -1;
  const std::size_t es = dtype_size(storage);
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.output.size(); i += es)
    n += std::memcmp(a.output.data() + i, b.output.data() + i, es) != 0;
  return n;
}

}  // namespace tbe::test
