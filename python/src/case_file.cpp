// Case folders (tbe/io/case_file.h, docs/case-files.md): read_case / write_case of forward cases,
// with the outputs an implementation recorded and the expected verdict.
//
// Hook for the other operators: io/ reads and writes forward case folders only ("operator":
// "forward"). When io/ gains backward / IKBO case folders, bind their readers and writers here
// next to these, with CaseFile.problem holding a BackwardProblem / LceProblem / AttentionProblem
// built through the Python constructors (so every check of those classes runs), and add the
// operator's name to CASE_OPERATORS.
#include <pybind11/stl.h>

#include <cstring>

#include "bindings.h"
#include "tbe/io/case_file.h"

namespace tbe::python {
namespace {

/// RecordedOutputs with the output as a Python array.
struct PyRecorded {
  std::string implementation;
  DType output_dtype = DType::F32;
  py::object output = py::none();
  std::optional<std::int64_t> warnings;
  std::optional<std::string> error;
};

/// CaseFile with a Python ForwardProblem.
struct PyCaseFile {
  std::string name, provenance;
  std::uint64_t seed = 0;
  py::object problem;
  std::optional<PyRecorded> recorded;
  std::optional<io::Expectation> expect;
};

/// An index array of the case's index dtype from the int64 masters.
py::object index_array(DType t, const std::vector<std::int64_t>& v) {
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(v.size())};
  if (t == DType::I64) return make_array(shape, std::span<const std::int64_t>(v));
  std::vector<std::int32_t> narrow(v.begin(), v.end());  // read_case checked that they fit
  return make_array(shape, std::span<const std::int32_t>(narrow));
}

py::object forward_problem_of(io::CaseFile& c) {
  ForwardCase& f = c.problem;
  f.view();  // throws InvalidArgument if an int32 case holds an index that does not fit
  const std::int64_t n = static_cast<std::int64_t>(f.weights.size() / dtype_size(f.weights_dtype));
  py::dict kw;
  kw["rows"] = f.rows;
  kw["dims"] = f.dims;
  kw["table_offsets"] = f.table_offsets;
  kw["feature_table_map"] = f.feature_table_map;
  if (f.vbe_batch_sizes.empty()) {
    kw["batch_size"] = f.batch_size;
  } else {
    kw["vbe_batch_sizes"] = f.vbe_batch_sizes;
    kw["vbe_ranks"] = f.vbe_ranks;
  }
  if (!f.per_sample_weights.empty())
    kw["per_sample_weights"] =
        make_array({static_cast<std::int64_t>(f.per_sample_weights.size())},
                   std::span<const float>(f.per_sample_weights));
  kw["pooling"] = f.options.pooling;
  kw["bounds_check"] = f.options.bounds_check;
  kw["policy"] = f.options.policy;
  return py::module_::import("tbe_verify")
      .attr("ForwardProblem")(make_array(f.weights_dtype, {n}, f.weights.data()),
                              index_array(f.index_dtype, f.indices),
                              index_array(f.index_dtype, f.offsets), **kw);
}

PyCaseFile read_case_file(const std::string& dir) {
  io::CaseFile c;
  {
    py::gil_scoped_release nogil;
    c = io::read_case(dir);
  }
  PyCaseFile r;
  r.name = c.name;
  r.provenance = c.provenance;
  r.seed = c.seed;
  r.problem = forward_problem_of(c);
  if (c.recorded) {
    PyRecorded rec;
    rec.implementation = c.recorded->implementation;
    rec.output_dtype = c.recorded->output_dtype;
    rec.warnings = c.recorded->warnings;
    rec.error = c.recorded->error;
    if (!c.recorded->output.empty()) {
      const auto n = static_cast<std::int64_t>(c.recorded->output.size() /
                                               dtype_size(rec.output_dtype));
      rec.output = make_array(rec.output_dtype, {n}, c.recorded->output.data());
    }
    r.recorded = std::move(rec);
  }
  r.expect = c.expect;
  return r;
}

void write_case_file(const std::string& dir, const PyCaseFile& c) {
  if (!py::isinstance<PyForwardProblem>(c.problem))
    throw py::type_error("case.problem: " +
                         std::string(py::str(py::type::of(c.problem).attr("__name__"))) +
                         " is not a tbe_verify.ForwardProblem (forward case folders only)");
  const auto& fp = c.problem.cast<const PyForwardProblem&>();
  const ForwardProblem view = fp.view();
  io::CaseFile out;
  out.name = c.name;
  out.provenance = c.provenance;
  out.seed = c.seed;
  out.problem = io::copy_case(view);
  if (c.recorded) {
    io::RecordedOutputs rec;
    rec.implementation = c.recorded->implementation;
    rec.output_dtype = c.recorded->output_dtype;
    rec.warnings = c.recorded->warnings;
    rec.error = c.recorded->error;
    if (!c.recorded->output.is_none()) {
      HostTensor t = HostTensor::borrow(c.recorded->output, "recorded.output");
      t.expect_dtype(rec.output_dtype, "recorded.output_dtype");
      t.expect_numel(make_output_layout(view).numel, "the forward output (shape " +
                                                         shape_text(fp.output_shape()) + ")");
      rec.output.resize(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
      if (!rec.output.empty()) std::memcpy(rec.output.data(), t.data(), rec.output.size());
    }
    out.recorded = std::move(rec);
  }
  out.expect = c.expect;
  py::gil_scoped_release nogil;
  io::write_case(dir, out);
}

}  // namespace

void bind_case_file(py::module_& m) {
  m.attr("CASE_OPERATORS") = py::make_tuple("forward");

  py::class_<io::Expectation>(m, "Expectation",
                              "What the suite expects when judging the recorded outputs: "
                              "verdict 'pass' or 'fail'; rule names the rule of "
                              "docs/semantics.md that differs (required for 'fail').")
      .def(py::init([](std::string verdict, std::string rule) {
             return io::Expectation{std::move(verdict), std::move(rule)};
           }),
           py::kw_only(), py::arg("verdict") = "pass", py::arg("rule") = "")
      .def_readwrite("verdict", &io::Expectation::verdict)
      .def_readwrite("rule", &io::Expectation::rule);

  py::class_<PyRecorded>(m, "RecordedOutputs",
                         "Outputs an implementation produced for a case: implementation (text), "
                         "output (an array of the output's element count, or None), "
                         "output_dtype (default: the output array's dtype), warnings (its "
                         "bounds-check warning count, if it reports one), error "
                         "('bounds_check', 'invalid_argument', 'device_error' or None).")
      .def(py::init([](std::string implementation, py::object output, py::handle output_dtype,
                       std::optional<std::int64_t> warnings, std::optional<std::string> error) {
             PyRecorded r;
             r.implementation = std::move(implementation);
             if (!output_dtype.is_none()) {
               r.output_dtype = dtype_arg(output_dtype, "output_dtype");
             } else if (!output.is_none()) {
               r.output_dtype = HostTensor::borrow(output, "output").dtype();
             }
             r.output = std::move(output);
             r.warnings = warnings;
             r.error = std::move(error);
             return r;
           }),
           py::kw_only(), py::arg("implementation") = "", py::arg("output") = py::none(),
           py::arg("output_dtype") = py::none(), py::arg("warnings") = py::none(),
           py::arg("error") = py::none())
      .def_readwrite("implementation", &PyRecorded::implementation)
      .def_readwrite("output_dtype", &PyRecorded::output_dtype)
      .def_readwrite("output", &PyRecorded::output)
      .def_readwrite("warnings", &PyRecorded::warnings)
      .def_readwrite("error", &PyRecorded::error);

  py::class_<PyCaseFile>(m, "CaseFile",
                         "A forward case folder (docs/case-files.md): name, provenance, seed, "
                         "problem (a ForwardProblem), recorded (RecordedOutputs or None), expect "
                         "(Expectation or None).")
      .def(py::init([](py::object problem, std::string name, std::string provenance,
                       std::uint64_t seed, std::optional<PyRecorded> recorded,
                       std::optional<io::Expectation> expect) {
             return PyCaseFile{std::move(name), std::move(provenance), seed, std::move(problem),
                               std::move(recorded), std::move(expect)};
           }),
           py::arg("problem"), py::kw_only(), py::arg("name") = "", py::arg("provenance") = "",
           py::arg("seed") = 0, py::arg("recorded") = py::none(), py::arg("expect") = py::none())
      .def_property_readonly("operator", [](const PyCaseFile&) { return "forward"; })
      .def_readwrite("name", &PyCaseFile::name)
      .def_readwrite("provenance", &PyCaseFile::provenance)
      .def_readwrite("seed", &PyCaseFile::seed)
      .def_readwrite("problem", &PyCaseFile::problem)
      .def_readwrite("recorded", &PyCaseFile::recorded)
      .def_readwrite("expect", &PyCaseFile::expect);

  m.def("read_case", &read_case_file, py::arg("dir"),
        "Reads and validates a case folder (case.json + .npy tensors; untrusted input: schema, "
        "shapes and dtypes are checked, errors name the file, the key and the value). Returns a "
        "CaseFile whose problem holds new NumPy arrays. Forward case folders only "
        "(CASE_OPERATORS).");
  m.def("write_case", &write_case_file, py::arg("dir"), py::arg("case"),
        "Writes `case` as a case folder `dir` (created): tables repacked at the prefix offsets "
        "of E*D, indices and offsets in the problem's index dtype, the recorded output if any.");
}

}  // namespace tbe::python
