// The Python problem objects of tbe_verify (owning references to the caller's arrays plus the
// metadata of one call) and the per-area binding entry points that module.cpp calls.
//
// Every problem object is checked when it is built, in this order: each array's type, element
// type, contiguity and rank (tensor.h), the C++ validate() of the problem (tbe/problem.h,
// tbe/backward.h, tbe/ikbo.h), then the array sizes that the validated metadata implies (e.g.
// every table inside `weights`). No element is read before all three passed.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tbe/backward.h"
#include "tbe/ikbo.h"
#include "tbe/problem.h"
#include "tensor.h"

namespace tbe::python {

namespace py = pybind11;

/// One TBE forward call (Python class ForwardProblem): tbe::ForwardProblem over borrowed arrays.
struct PyForwardProblem {
  HostTensor weights, indices, offsets;
  std::optional<HostTensor> per_sample_weights;
  std::vector<std::int64_t> rows, table_offsets;
  std::vector<std::int32_t> dims, feature_table_map, vbe_batch_sizes;
  std::int32_t vbe_ranks = 0;
  std::int64_t batch_size = 0;
  ForwardOptions options;

  /// Non-owning view (valid while this object lives).
  ForwardProblem view() const;
  /// Shape of the forward output: pooled [B, Σ_f D_f], NONE [N, D], VBE [numel] (1-D).
  std::vector<std::int64_t> output_shape() const;
  /// validate(view()) plus the array sizes validate cannot see (tables inside `weights`,
  /// per_sample_weights of length N). Throws InvalidArgument.
  void check() const;
};

/// One backward + optimizer call (Python class BackwardProblem).
struct PyBackwardProblem {
  std::shared_ptr<const PyForwardProblem> forward;
  py::object forward_object;  ///< the Python ForwardProblem, returned by the `forward` attribute
  HostTensor grad_output;
  std::optional<HostTensor> momentum;
  BackwardOptions options;

  BackwardProblem view() const;
  /// validate(view()) plus grad_output / momentum sizes. Throws InvalidArgument / TypeError.
  void check() const;
};

/// One IKBO linear-compression call (Python class LceProblem).
struct PyLceProblem {
  HostTensor w_c, w_u, e_c, e_u, cand_to_user;
  std::vector<std::int32_t> cand_to_user_copy;  ///< int64 maps are narrowed here (checked)
  ikbo::LceProblem problem;                     ///< scalars from the shapes, pointers into the arrays
};

/// One IKBO cross-attention call (Python class AttentionProblem).
struct PyAttentionProblem {
  HostTensor q, k, v, cand_to_user;
  std::vector<std::int32_t> cand_to_user_copy;
  std::vector<std::int64_t> k_offsets;
  ikbo::AttentionProblem problem;
};

/// The arrays of a backward result, checked against `p` before any element is read (check_backward,
/// write_case): the whole weights buffer after the call (dtype and element count of the forward
/// weights), the momentum (float32, sum_t E_t), the per-sample-weight gradient (float32, N).
/// Throw py::type_error (dtype) / InvalidArgument (element count) naming the array.
void check_weights_after(const PyBackwardProblem& p, const HostTensor& weights);
void check_momentum_after(const PyBackwardProblem& p, const HostTensor& momentum);
void check_per_sample_weight_grad(const PyBackwardProblem& p, const HostTensor& grad);

/// Shared by the IKBO problems: cand_to_user as an int32 pointer (int64 arrays are copied into
/// `copy` with a range check).
const std::int32_t* cand_to_user_data(const HostTensor& t, std::vector<std::int32_t>& copy);

/// An IKBO output checked against its problem before any element is read (check_lce /
/// check_attention, write_case): dtype policy.storage (py::type_error), B·M·N resp. B·n_seed·H·Dh
/// elements in any shape (InvalidArgument), both naming the array.
void check_lce_output(const ikbo::LceProblem& q, const HostTensor& out);
void check_attention_output(const ikbo::AttentionProblem& a, const HostTensor& out);

// Binding entry points (one per source file), called in this order by module.cpp.
void bind_errors(py::module_& m);
void bind_types(py::module_& m);
void bind_reports(py::module_& m);
void bind_forward(py::module_& m);
void bind_backward(py::module_& m);
void bind_ikbo(py::module_& m);
void bind_case_file(py::module_& m);

/// An enum argument given as the bound enum value (e.g. tbe_verify.DType.F16) or as its project
/// name ("fp16"), parsed by `parse(name, what)` (which throws InvalidArgument naming `what`).
template <class E, class Parse>
E enum_arg(py::handle h, const char* what, Parse parse) {
  if (py::isinstance<E>(h)) return h.cast<E>();
  if (py::isinstance<py::str>(h)) return parse(h.cast<std::string>(), what);
  throw py::type_error(std::string(what) + ": " +
                       std::string(py::str(py::type::of(h).attr("__name__"))) +
                       " is neither a name (str) nor a tbe_verify." +
                       std::string(py::str(py::type::of<E>().attr("__name__"))));
}

/// Enum arguments: the enum value itself or its project name ("fp16", "sum", "warning", ...).
DType dtype_arg(py::handle h, const char* what);
PoolingMode pooling_arg(py::handle h, const char* what);
BoundsCheckMode bounds_check_arg(py::handle h, const char* what);
RoundingMode rounding_arg(py::handle h, const char* what);
PolicyKind policy_kind_arg(py::handle h, const char* what);

}  // namespace tbe::python
