// tbe::Backend on host tensors over the device-level ForwardOp: validate on the host (nothing is
// uploaded for an invalid call), upload, run, download the output only on success.
#include "tbe/cuda/backend.h"

#include <algorithm>
#include <string>

#include <cuda_runtime_api.h>

#include "src/cuda_check.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"
#include "tbe/errors.h"

namespace tbe::cuda {

using detail::cuda_check;

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

namespace {

/// The host problem's data copied to the device, and the same problem pointing at the copies.
struct DeviceProblem {
  DeviceBuffer weights, indices, offsets, psw;
  ForwardProblem problem;

  explicit DeviceProblem(const ForwardProblem& p) {
    std::int64_t weight_elems = 0;
    for (std::int64_t t = 0; t < p.tables.num_tables(); ++t)
      weight_elems = std::max(weight_elems, p.tables.table_offsets[t] +
                                                p.tables.rows[t] * p.tables.dims[t]);
    const std::size_t isz = dtype_size(p.lookups.index_dtype);
    weights = DeviceBuffer(p.tables.weights, weight_elems * dtype_size(p.tables.dtype));
    indices = DeviceBuffer(p.lookups.indices, p.lookups.num_indices * isz);
    offsets = DeviceBuffer(p.lookups.offsets, p.lookups.num_offsets * isz);
    if (p.lookups.per_sample_weights != nullptr)
      psw = DeviceBuffer(p.lookups.per_sample_weights, p.lookups.num_indices * sizeof(float));
    problem = p;
    problem.tables.weights = weights.get();
    problem.lookups.indices = indices.get();
    problem.lookups.offsets = offsets.get();
    problem.lookups.per_sample_weights =
        p.lookups.per_sample_weights != nullptr ? static_cast<const float*>(psw.get()) : nullptr;
  }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    name_ = std::string("cuda:") + prop.name;
  }
  std::string name() const override { return name_; }

  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& strategy) override {
    throw_if_error(validate(p));  // before any upload
    DeviceProblem dp(p);
    ForwardOp op(dp.problem, strategy);
    const std::int64_t numel = op.layout().numel;
    const std::size_t out_bytes = numel * dtype_size(p.options.policy.output);
    DeviceBuffer d_out(out_bytes), d_ws(op.workspace_bytes());
    op.run(d_out.get(), d_ws.get(), nullptr);
    ForwardStats stats = op.finish();  // throws BoundsCheckError before anything is downloaded
    if (out_bytes > 0)
      cuda_check(cudaMemcpy(output, d_out.get(), out_bytes, cudaMemcpyDeviceToHost),
                 "download output");
    return stats;
  }

  RepairResult repair(const ForwardProblem& p) override {
    throw_if_error(validate(p));
    DeviceProblem dp(p);
    ForwardOp op(dp.problem);
    DeviceBuffer d_ws(op.workspace_bytes());
    return op.repair(d_ws.get(), nullptr);
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  if (device_count() <= 0) throw DeviceError("make_cuda_backend: no CUDA device is visible");
  return std::make_unique<CudaBackend>();
}

}  // namespace tbe::cuda
