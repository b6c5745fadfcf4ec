// tbe::Backend on host tensors over the device-level ForwardOp / BackwardOp: can_implement on the
// host, once (nothing is uploaded for an invalid call; the operators are then built with
// kValidated and do not check again), upload, run, download the output only on success.
// Workspaces, outputs and the saved-counts buffer are DeviceBuffer::poisoned (0xFF bytes).
#include "tbe/cuda/backend.h"

#include <algorithm>
#include <string>

#include <cuda_runtime_api.h>

#include "tbe/cuda/backward.h"
#include "tbe/cuda/check.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"
#include "tbe/errors.h"

namespace tbe::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::size_t device_free_bytes() {
  if (device_count() <= 0) return 0;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free_bytes;
}

namespace {

/// The host problem's data copied to the device, and the same problem pointing at the copies.
/// Elements of the weights buffer: max over tables of table_offset + E·D.
std::int64_t weight_elements(const ForwardProblem& p) {
  std::int64_t n = 0;
  for (std::int64_t t = 0; t < p.tables.num_tables(); ++t)
    n = std::max(n, p.tables.table_offsets[t] + p.tables.rows[t] * p.tables.dims[t]);
  return n;
}

struct DeviceProblem {
  DeviceBuffer weights, indices, offsets, psw;
  ForwardProblem problem;

  explicit DeviceProblem(const ForwardProblem& p) {
    const std::int64_t weight_elems = weight_elements(p);
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
    throw_if_error(ForwardOp::can_implement(p));  // before any upload
    DeviceProblem dp(p);
    ForwardOp op(dp.problem, kValidated, strategy);
    return run_forward(op, p.options.policy.output, output);
  }

  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& strategy) override {
    throw_if_error(BackwardOp::can_implement(p, strategy, out));  // before any upload
    DeviceProblem dp(p.forward);
    return backward_on(p, dp, out, strategy, nullptr, 0);
  }

  // The forward saves the small-table histogram counts (when a feature takes the path) and the
  // backward reuses them: one upload of the lookups, the forward's ForwardOp::save_small_table_counts
  // and the backward's use_small_table_counts with this step's batch id.
  TrainingStepStats training_step(const BackwardProblem& p, void* output,
                                  const BackwardOutputs& out,
                                  const BackwardStrategy& strategy) override {
    throw_if_error(ForwardOp::can_implement(p.forward));  // before any upload
    throw_if_error(BackwardOp::can_implement(p, strategy, out));
    DeviceProblem dp(p.forward);
    TrainingStepStats st;
    ForwardOp fwd(dp.problem, kValidated);
    const std::size_t counts_bytes = fwd.small_table_counts_bytes();
    const DeviceBuffer d_counts = DeviceBuffer::poisoned(counts_bytes, nullptr);
    SmallTableCounts counts;
    const std::uint64_t batch = ++batches_;
    if (counts_bytes > 0) {
      counts.data = d_counts.get();
      counts.bytes = counts_bytes;
      fwd.save_small_table_counts(&counts, batch);
    }
    st.forward = run_forward(fwd, p.forward.options.policy.output, output);
    st.backward = backward_on(p, dp, out, strategy, counts_bytes > 0 ? &counts : nullptr, batch);
    return st;
  }

  RepairResult repair(const ForwardProblem& p) override {
    throw_if_error(ForwardOp::can_implement(p));
    DeviceProblem dp(p);
    ForwardOp op(dp.problem, kValidated);
    const DeviceBuffer d_ws = DeviceBuffer::poisoned(op.workspace_bytes(), nullptr);
    return op.repair(d_ws.get(), nullptr);
  }

 private:
  // Runs an operator built on the device copy: output to the host only on success.
  static ForwardStats run_forward(ForwardOp& op, DType output_dtype, void* output) {
    const std::int64_t numel = op.layout().numel;
    const std::size_t out_bytes = numel * dtype_size(output_dtype);
    const DeviceBuffer d_out = DeviceBuffer::poisoned(out_bytes, nullptr);
    const DeviceBuffer d_ws = DeviceBuffer::poisoned(op.workspace_bytes(), nullptr);
    op.run(d_out.get(), d_ws.get(), nullptr);
    ForwardStats stats = op.finish();  // throws BoundsCheckError before anything is downloaded
    if (out_bytes > 0)
      cuda_check(cudaMemcpy(output, d_out.get(), out_bytes, cudaMemcpyDeviceToHost),
                 "download output");
    return stats;
  }

  // The backward of `p` on its uploaded lookups `dp` (validated), with the forward's saved
  // small-table counts of batch `batch` when `counts` is not null.
  static BackwardStats backward_on(const BackwardProblem& p, DeviceProblem& dp,
                                   const BackwardOutputs& out, const BackwardStrategy& strategy,
                                   const SmallTableCounts* counts, std::uint64_t batch) {
    const ForwardProblem& f = p.forward;
    const std::size_t w_bytes = weight_elements(f) * dtype_size(f.tables.dtype);
    std::int64_t K = 0;
    for (std::int64_t t = 0; t < f.tables.num_tables(); ++t) K += f.tables.rows[t];
    const std::size_t m_bytes = static_cast<std::size_t>(K) * sizeof(float);
    const std::size_t g_bytes =
        make_output_layout(f).numel * dtype_size(f.options.policy.output);
    DeviceBuffer d_grad(p.grad_output, g_bytes);
    // Outputs: in place when they alias the inputs; else the caller's current contents, so the
    // rows backward does not touch come back unchanged.
    const bool w_alias = out.weights == f.tables.weights;
    DeviceBuffer d_wout = w_alias ? DeviceBuffer() : DeviceBuffer(out.weights, w_bytes);
    DeviceBuffer d_min, d_mout, d_psw;
    if (p.momentum != nullptr) d_min = DeviceBuffer(p.momentum, m_bytes);
    const bool m_alias = out.momentum != nullptr && out.momentum == p.momentum;
    if (out.momentum != nullptr && !m_alias) d_mout = DeviceBuffer(out.momentum, m_bytes);
    if (out.per_sample_weight_grad != nullptr)
      d_psw = DeviceBuffer::poisoned(static_cast<std::size_t>(f.lookups.num_indices) * sizeof(float), nullptr);
    BackwardProblem dbp = p;
    dbp.forward = dp.problem;
    dbp.grad_output = g_bytes > 0 ? d_grad.get() : p.grad_output;
    dbp.momentum = p.momentum != nullptr ? d_min.as<const float>() : nullptr;
    BackwardOutputs dout;
    dout.weights = w_alias ? dp.weights.get() : d_wout.get();
    if (dout.weights == nullptr) dout.weights = out.weights;  // no elements: never dereferenced
    dout.momentum = out.momentum == nullptr ? nullptr : (m_alias ? d_min.as<float>() : d_mout.as<float>());
    dout.per_sample_weight_grad = out.per_sample_weight_grad == nullptr ? nullptr : d_psw.as<float>();
    // The device copies are valid where the host arguments were (only empty buffers become null).
    BackwardOp op(dbp, kValidated, strategy);
    if (counts != nullptr) op.use_small_table_counts(counts, batch);
    const DeviceBuffer d_ws = DeviceBuffer::poisoned(op.workspace_bytes(), nullptr);
    op.run(kValidated, dout, d_ws.get(), nullptr);
    BackwardStats stats = op.finish();  // throws before anything is downloaded
    if (w_bytes > 0)
      cuda_check(cudaMemcpy(out.weights, dout.weights, w_bytes, cudaMemcpyDeviceToHost),
                 "download weights");
    if (out.momentum != nullptr && m_bytes > 0)
      cuda_check(cudaMemcpy(out.momentum, dout.momentum, m_bytes, cudaMemcpyDeviceToHost),
                 "download momentum");
    if (out.per_sample_weight_grad != nullptr && f.lookups.num_indices > 0)
      cuda_check(cudaMemcpy(out.per_sample_weight_grad, dout.per_sample_weight_grad,
                            f.lookups.num_indices * sizeof(float), cudaMemcpyDeviceToHost),
                 "download per-sample-weight gradients");
    return stats;
  }

  std::string name_;
  std::uint64_t batches_ = 0;  ///< training steps so far (each step's small-table batch id)
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  if (device_count() <= 0) throw DeviceError("make_cuda_backend: no CUDA device is visible");
  return std::make_unique<CudaBackend>();
}

}  // namespace tbe::cuda
