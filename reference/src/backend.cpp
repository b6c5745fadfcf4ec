// The CPU reference backend ("cpu-reference"): the FP64 reference behind the Backend interface.
#include "tbe/backend.h"

#include <mutex>

namespace tbe {

TrainingStepStats Backend::training_step(const BackwardProblem& p, void* output,
                                         const BackwardOutputs& out, const BackwardStrategy& s) {
  TrainingStepStats st;
  st.forward = forward(p.forward, output);
  st.backward = backward(p, out, s);
  return st;
}

namespace {

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "cpu-reference"; }
  // The strategy only chooses among equivalent GPU kernels; the reference has one path.
  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& /*strategy*/) override {
    return forward_reference(p, output);
  }
  RepairResult repair(const ForwardProblem& p) override { return tbe::repair(p); }
  // The strategy is validated (both backends reject the same values) but has no effect here.
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& strategy) override {
    throw_if_error(validate(p, strategy));
    const std::lock_guard<std::mutex> lock(workspace_mutex_);
    return backward_reference(p, out, workspace_);
  }

 private:
  // Reused by every backward call of this backend (allocated and first-touched once).
  BackwardWorkspace workspace_;
  std::mutex workspace_mutex_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace tbe
