// Backends with planted bugs (tbe-fuzz --backend cpu-faulty): the CPU reference, except for one
// bug per operator. They test the campaign's failure path, the shrinkers and the case writers
// without a GPU.
#pragma once

#include <memory>
#include <string>

#include "tbe/backend.h"
#include "tbe/ikbo.h"

namespace tbe::fuzz {

/// The reference backend with two planted bugs:
///  - forward: in a pooled call with a bag of at least 256 lookups, output element 0 is off by
///    one;
///  - backward: every run with SL >= 256 (a row looked up at least 256 times, counted on the
///    reference transpose after the bounds-check repair) stores element 0 of its row as
///    v + 1 + |v| instead of v.
/// repair is the reference's.
class FaultyBackend final : public Backend {
 public:
  std::string name() const override { return "cpu-reference-with-planted-bug"; }
  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& strategy) override;
  RepairResult repair(const ForwardProblem& p) override { return inner_->repair(p); }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override;

 private:
  std::unique_ptr<Backend> inner_ = make_reference_backend();
};

/// The reference IKBO backend with two planted bugs:
///  - lce: when K_c is not a multiple of 8 (the padded tail of the GPU layouts) and B >= 2, the
///    last output element v is stored as v + 1 + |v|;
///  - attention: when some user with candidates has more than 64 keys (a second key block), the
///    first output element of its first candidate is stored as v + 1 + |v|.
class FaultyIkboBackend final : public ikbo::IkboBackend {
 public:
  std::string name() const override { return "cpu-reference-with-planted-bug"; }
  void lce(const ikbo::LceProblem& p, void* out) override;
  void attention(const ikbo::AttentionProblem& p, void* out) override;

 private:
  std::unique_ptr<ikbo::IkboBackend> inner_ = ikbo::make_reference_ikbo_backend();
};

}  // namespace tbe::fuzz
