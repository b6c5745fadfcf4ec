// A Backend whose calls run one at a time: for callers that judge several problems on host
// threads at once (tbe-verify's backward rows, tbe-fuzz) while the backend under test (a GPU) is
// driven by one call at a time.
#pragma once

#include <mutex>
#include <string>

#include "tbe/backend.h"

namespace tbe {

/// Forwards every call to `inner` under `mutex` (shared by all wrappers of the same backend, so
/// calls through different wrappers are serialised too). `inner` and `mutex` must outlive it.
/// The results and errors are `inner`'s, unchanged.
class SerializedBackend final : public Backend {
 public:
  SerializedBackend(Backend& inner, std::mutex& mutex) : inner_(inner), mutex_(mutex) {}
  std::string name() const override { return inner_.name(); }
  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& strategy = {}) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return inner_.forward(p, output, strategy);
  }
  RepairResult repair(const ForwardProblem& p) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return inner_.repair(p);
  }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s = {}) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return inner_.backward(p, out, s);
  }
  /// One lock for the whole step: the forward's saved state reaches its own backward.
  TrainingStepStats training_step(const BackwardProblem& p, void* output,
                                  const BackwardOutputs& out,
                                  const BackwardStrategy& s = {}) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    return inner_.training_step(p, output, out, s);
  }

 private:
  Backend& inner_;
  std::mutex& mutex_;
};

}  // namespace tbe
