// The tbe_verify Python module: the FP64 reference operators, the enclosure oracle and the case
// files of this project for tests written in Python (python/README.md).
#include "bindings.h"

PYBIND11_MODULE(tbe_verify, m) {
  m.doc() =
      "tbe_verify: judge Table Batched Embedding and IKBO kernels against the FP64 reference "
      "with per-element error enclosures (docs/oracle.md) instead of a fixed atol/rtol.\n\n"
      "Problems: ForwardProblem, BackwardProblem, LceProblem, AttentionProblem (NumPy arrays or "
      "CPU torch tensors, borrowed without copies). Reference operators: forward_reference, "
      "forward_reference_fp64, repair, backward_reference, backward_reference_fp64, "
      "lce_reference, lce_reference_fp64, attention_reference, attention_reference_fp64. "
      "Judges: check_forward, check_backward, check_lce, check_attention. Case folders of every "
      "operator (forward, backward, ikbo-lce, ikbo-attention): read_case, write_case. CPU only.";
  tbe::python::bind_errors(m);
  tbe::python::bind_types(m);
  tbe::python::bind_reports(m);
  tbe::python::bind_forward(m);
  tbe::python::bind_backward(m);
  tbe::python::bind_ikbo(m);
  tbe::python::bind_case_file(m);
}
