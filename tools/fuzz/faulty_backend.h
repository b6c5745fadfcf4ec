// A backend with a planted bug (tbe-fuzz --backend cpu-faulty): the CPU reference, except that in
// a pooled call with a bag of at least 256 lookups output element 0 is off by one. It tests the
// campaign's failure path, the shrinker and the case writer without a GPU.
#pragma once

#include <memory>
#include <string>

#include "tbe/backend.h"

namespace tbe::fuzz {

/// The reference backend with the planted bug above (forward only; repair and backward are the
/// reference's).
class FaultyBackend final : public Backend {
 public:
  std::string name() const override { return "cpu-reference-with-planted-bug"; }
  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& strategy) override;
  RepairResult repair(const ForwardProblem& p) override { return inner_->repair(p); }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    return inner_->backward(p, out, s);
  }

 private:
  std::unique_ptr<Backend> inner_ = make_reference_backend();
};

}  // namespace tbe::fuzz
