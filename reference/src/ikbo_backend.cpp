// The CPU reference IKBO backend ("cpu-reference"): lce_reference / attention_reference behind
// the IkboBackend interface (ikbo.h). Both validate before writing anything.
#include "tbe/ikbo.h"

namespace tbe::ikbo {

namespace {

class ReferenceIkboBackend final : public IkboBackend {
 public:
  std::string name() const override { return "cpu-reference"; }
  void lce(const LceProblem& p, void* out) override { lce_reference(p, out); }
  void attention(const AttentionProblem& p, void* out) override { attention_reference(p, out); }
};

}  // namespace

std::unique_ptr<IkboBackend> make_reference_ikbo_backend() {
  return std::make_unique<ReferenceIkboBackend>();
}

}  // namespace tbe::ikbo
