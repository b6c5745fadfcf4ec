// The case folders of tbe_verify (docs/case-files.md): one Python class per operator, converted
// to and from the io/ cases (tbe/io/any_case_file.h). case_file.cpp binds the forward classes and
// read_case / write_case over every operator; case_file_backward.cpp and case_file_ikbo.cpp bind
// the classes of the other operators.
//
// A read case's problem is built through the Python constructor of its class (ForwardProblem,
// BackwardProblem, LceProblem, AttentionProblem), so every check of that class runs on the
// folder's data too; its tensors are new NumPy arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "tbe/io/any_case_file.h"

namespace tbe::python {

/// The class `name` of the tbe_verify module (to build problems through their constructors).
py::object module_class(const char* name);
/// The elements of `t` as raw bytes (the io cases hold tensors so).
std::vector<std::byte> bytes_of(const HostTensor& t);
/// The elements of a float32 tensor as floats (checked by the caller).
std::vector<float> floats_of(const HostTensor& t);
/// case.problem as the C++ object of the Python class `cls`; py::type_error naming both otherwise.
template <class T>
const T& problem_as(const py::object& problem, const char* cls) {
  if (!py::isinstance<T>(problem))
    throw py::type_error("case.problem: " +
                         std::string(py::str(py::type::of(problem).attr("__name__"))) +
                         " is not a tbe_verify." + cls);
  return problem.cast<const T&>();
}
/// A Python ForwardProblem holding new arrays of the forward case `f` (1-D weights [Σ E·D]).
py::object forward_problem_of(ForwardCase& f);

/// BackwardRecordedOutputs with the outputs as Python arrays (None: not recorded).
struct PyBackwardRecorded {
  std::string implementation;
  py::object weights = py::none(), momentum = py::none(), per_sample_weight_grad = py::none();
  std::optional<std::int64_t> warnings;
  std::optional<std::string> error;
};
/// BackwardCaseFile with a Python BackwardProblem.
struct PyBackwardCaseFile {
  std::string name, provenance;
  std::uint64_t seed = 0;
  py::object problem;
  std::optional<io::BackwardStrategyRecord> strategy;
  std::optional<PyBackwardRecorded> recorded;
  std::optional<io::Expectation> expect;
};
py::object to_python(io::BackwardCaseFile& c);
io::BackwardCaseFile to_io(const PyBackwardCaseFile& c);
void bind_backward_case_file(py::module_& m);

/// IkboRecordedOutput with the output as a Python array (None: not recorded).
struct PyIkboRecorded {
  std::string implementation;
  py::object output = py::none();
  std::optional<std::string> error;
};
/// LceCaseFile / AttentionCaseFile with a Python LceProblem / AttentionProblem.
template <class Problem>
struct PyIkboCaseFile {
  std::string name, provenance;
  std::uint64_t seed = 0;
  py::object problem;
  ikbo::MapKind map = ikbo::MapKind::Unsorted;
  std::optional<PyIkboRecorded> recorded;
  std::optional<io::Expectation> expect;
};
using PyLceCaseFile = PyIkboCaseFile<PyLceProblem>;
using PyAttentionCaseFile = PyIkboCaseFile<PyAttentionProblem>;
py::object to_python(io::LceCaseFile& c);
py::object to_python(io::AttentionCaseFile& c);
io::LceCaseFile to_io(const PyLceCaseFile& c);
io::AttentionCaseFile to_io(const PyAttentionCaseFile& c);
void bind_ikbo_case_files(py::module_& m);

}  // namespace tbe::python
