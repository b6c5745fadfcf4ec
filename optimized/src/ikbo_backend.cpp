// tbe::ikbo::IkboBackend on host tensors: LCE through the device-level LceOp, attention through the
// CPU reference (delegated, named in name()).
#include "tbe/cuda/ikbo_backend.h"

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "tbe/cuda/backend.h"
#include "tbe/cuda/check.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/errors.h"

namespace tbe::cuda {

namespace {

class CudaIkboBackend final : public ikbo::IkboBackend {
 public:
  explicit CudaIkboBackend(LceStage stage)
      : stage_(stage), attention_(ikbo::make_reference_ikbo_backend()) {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    name_ = std::string("cuda:") + prop.name + " (lce: " + to_string(stage) +
            "; attention: " + attention_->name() + ")";
  }
  std::string name() const override { return name_; }

  void lce(const ikbo::LceProblem& p, void* out) override {
    paths_.clear();
    // before any upload: problem, host map, CUDA limits (then LceOp checks nothing again)
    throw_if_error(LceOp::can_implement(p, p.cand_to_user));
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
    LceOp op(dp, kValidated, stage_);
    const std::size_t out_bytes = static_cast<std::size_t>(p.B * p.M * p.N) * es;
    DeviceBuffer d_out(out_bytes), ws(op.workspace_bytes());
    op.run(d_out.get(), ws.get(), nullptr);
    op.finish();  // throws before anything is downloaded
    if (out_bytes > 0)
      cuda_check(cudaMemcpy(out, d_out.get(), out_bytes, cudaMemcpyDeviceToHost), "download lce");
    paths_ = op.paths();
  }

  void attention(const ikbo::AttentionProblem& p, void* out) override {
    paths_.clear();  // the CPU reference has no path counters
    attention_->attention(p, out);
  }
  std::vector<std::string> last_paths() const override { return paths_; }

 private:
  LceStage stage_;
  std::unique_ptr<ikbo::IkboBackend> attention_;
  std::string name_;
  std::vector<std::string> paths_;  // of the last successful call
};

}  // namespace

std::unique_ptr<ikbo::IkboBackend> make_cuda_ikbo_backend(LceStage stage) {
  if (device_count() <= 0) throw DeviceError("make_cuda_ikbo_backend: no CUDA device is visible");
  return std::make_unique<CudaIkboBackend>(stage);
}

}  // namespace tbe::cuda
