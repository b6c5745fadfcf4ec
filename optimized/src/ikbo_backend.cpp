// tbe::ikbo::IkboBackend on host tensors: LCE through the device-level LceOp, attention through
// the device-level AttentionOp.
#include "tbe/cuda/ikbo_backend.h"

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "tbe/cuda/backend.h"
#include "tbe/cuda/check.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/errors.h"

namespace tbe::cuda {

std::string to_string(MapCheck m) { return m == MapCheck::Host ? "host" : "device"; }

namespace {

class CudaIkboBackend final : public ikbo::IkboBackend {
 public:
  explicit CudaIkboBackend(const CudaIkboOptions& o) : o_(o) {
    if (o.lce.chunk_candidates < 0)  // LceOp's limit, reported before any call
      throw InvalidArgument("options.lce.chunk_candidates",
                            "options.lce.chunk_candidates: " +
                                std::to_string(o.lce.chunk_candidates) + " must be >= 0");
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    name_ = std::string("cuda:") + prop.name + " (lce: " + to_string(o.stage) +
            (o.lce.chunk_candidates > 0
                 ? ", " + std::to_string(o.lce.chunk_candidates) + " candidates per chunk"
                 : std::string()) +
            "; attention: " + to_string(resolve_attention_kernel(o.attention.kernel)) +
            (o.attention.grouping != AttentionGroupingBuild::Auto
                 ? std::string(", grouping ") + to_string(o.attention.grouping)
                 : std::string()) +
            (o.attention.epilogue != AttentionEpilogue::Auto
                 ? std::string(", epilogue ") + to_string(o.attention.epilogue)
                 : std::string()) +
            (o.map_check == MapCheck::Device ? "; map check on device" : "") + ")";
  }
  std::string name() const override { return name_; }
  std::vector<std::string> last_paths() const override { return paths_; }
  Status lce_limits(const ikbo::LceProblem& p) const override { return lce_checks(p); }
  Status attention_limits(const ikbo::AttentionProblem& p) const override {
    return attention_checks(p);
  }

  void lce(const ikbo::LceProblem& p, void* out) override {
    paths_.clear();
    // before any upload, in the reference's order (lce_reference): the problem, a null `out`,
    // then the host map (MapCheck::Host) and the CUDA limits; LceOp checks nothing again (the
    // device map pass runs in either mode)
    check_output(p, out);
    throw_if_error(lce_checks(p));
    const std::int64_t n = p.B > 0 ? ikbo::lce_output_numel(p) : 0;
    const std::size_t es = dtype_size(p.policy.storage);
    DeviceBuffer w_c(p.w_c, static_cast<std::size_t>(p.M * p.K_c) * es);
    DeviceBuffer w_u(p.w_u, static_cast<std::size_t>(p.M * p.K_u) * es);
    DeviceBuffer e_c(p.e_c, static_cast<std::size_t>(p.B * p.K_c * p.N) * es);
    DeviceBuffer e_u(p.e_u, static_cast<std::size_t>(p.U * p.K_u * p.N) * es);
    DeviceBuffer map(p.cand_to_user, static_cast<std::size_t>(p.B) * sizeof(std::int32_t));
    DeviceBuffer placeholder(256);  // non-null pointers for empty tensors
    auto dev = [&](const DeviceBuffer& d) { return d.get() != nullptr ? d.get() : placeholder.get(); };
    ikbo::LceProblem dp = p;
    dp.w_c = dev(w_c);
    dp.w_u = p.w_u != nullptr ? dev(w_u) : nullptr;
    dp.e_c = dev(e_c);
    dp.e_u = p.e_u != nullptr ? dev(e_u) : nullptr;
    dp.cand_to_user = static_cast<const std::int32_t*>(dev(map));
    LceOp op(dp, kValidated, o_.stage, LceLayout{}, o_.lce);
    const std::size_t out_bytes = static_cast<std::size_t>(n) * es;
    const DeviceBuffer d_out = DeviceBuffer::poisoned(out_bytes, nullptr);
    const DeviceBuffer ws = DeviceBuffer::poisoned(op.workspace_bytes(), nullptr);
    op.run(d_out.get(), ws.get(), nullptr);
    op.finish();  // throws before anything is downloaded
    if (out_bytes > 0)
      cuda_check(cudaMemcpy(out, d_out.get(), out_bytes, cudaMemcpyDeviceToHost), "download lce");
    paths_ = op.paths();
  }

  void attention(const ikbo::AttentionProblem& p, void* out) override {
    paths_.clear();
    // before any upload, in the reference's order (attention_reference): the problem, a null
    // `out`, then the host map (MapCheck::Host) and the CUDA limits; AttentionOp checks nothing
    // again (the device map pass runs in either mode)
    check_output(p, out);
    throw_if_error(attention_checks(p));
    const std::int64_t n = ikbo::attention_output_numel(p);
    const std::size_t es = dtype_size(p.policy.storage);
    const std::size_t kv_bytes = static_cast<std::size_t>(p.total_keys() * p.H * p.Dh) * es;
    DeviceBuffer q(p.q, static_cast<std::size_t>(n) * es);
    DeviceBuffer k(p.k, kv_bytes), v(p.v, kv_bytes);
    DeviceBuffer map(p.cand_to_user, static_cast<std::size_t>(p.B) * sizeof(std::int32_t));
    DeviceBuffer placeholder(256);  // non-null pointers for empty tensors
    auto dev = [&](const DeviceBuffer& d) { return d.get() != nullptr ? d.get() : placeholder.get(); };
    ikbo::AttentionProblem dp = p;  // k_offsets stays the host span (AttentionOp uploads it)
    dp.q = dev(q);
    dp.k = dev(k);
    dp.v = dev(v);
    dp.cand_to_user = static_cast<const std::int32_t*>(dev(map));
    AttentionOp op(dp, kValidated, o_.attention);
    const DeviceBuffer d_out = DeviceBuffer::poisoned(static_cast<std::size_t>(n) * es, nullptr);
    const DeviceBuffer ws = DeviceBuffer::poisoned(op.workspace_bytes(), nullptr);
    op.run(d_out.get(), ws.get(), nullptr);
    op.finish();  // throws before anything is downloaded
    if (n > 0)
      cuda_check(cudaMemcpy(out, d_out.get(), static_cast<std::size_t>(n) * es,
                            cudaMemcpyDeviceToHost),
                 "download attention");
    paths_ = op.paths();
  }

 private:
  /// A null `out` as the reference reports it: after validate(p), before the map and the CUDA
  /// limits. validate(p) runs here only for a null `out`; lce_checks / attention_checks run it
  /// for every call.
  template <class Problem>
  static void check_output(const Problem& p, const void* out) {
    if (out != nullptr) return;
    throw_if_error(ikbo::validate(p));
    throw_if_error(ikbo::validate_output(p, out));
  }
  Status lce_checks(const ikbo::LceProblem& p) const {
    return o_.map_check == MapCheck::Host
               ? LceOp::can_implement(p, p.cand_to_user, LceLayout{}, o_.lce)
               : LceOp::can_implement(p, LceLayout{}, o_.lce);
  }
  Status attention_checks(const ikbo::AttentionProblem& p) const {
    return o_.map_check == MapCheck::Host
               ? AttentionOp::can_implement(p, p.cand_to_user, o_.attention)
               : AttentionOp::can_implement(p, o_.attention);
  }

  CudaIkboOptions o_;
  std::string name_;
  std::vector<std::string> paths_;  ///< the last successful call's op paths
};

}  // namespace

std::unique_ptr<ikbo::IkboBackend> make_cuda_ikbo_backend(const CudaIkboOptions& options) {
  if (device_count() <= 0) throw DeviceError("make_cuda_ikbo_backend: no CUDA device is visible");
  return std::make_unique<CudaIkboBackend>(options);
}

}  // namespace tbe::cuda
