// Case folders (docs/case-files.md): the forward classes (CaseFile, RecordedOutputs), the shared
// Expectation, and read_case / write_case / read_case_operator over every operator
// (tbe/io/any_case_file.h). The other operators' classes: case_file_backward.cpp,
// case_file_ikbo.cpp.
#include <pybind11/stl.h>

#include <cstring>
#include <variant>

#include "case_file.h"

namespace tbe::python {

py::object module_class(const char* name) { return py::module_::import("tbe_verify").attr(name); }

std::vector<std::byte> bytes_of(const HostTensor& t) {
  std::vector<std::byte> b(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  if (!b.empty()) std::memcpy(b.data(), t.data(), b.size());
  return b;
}

std::vector<float> floats_of(const HostTensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.data(), v.size() * sizeof(float));
  return v;
}

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

}  // namespace

py::object forward_problem_of(ForwardCase& f) {
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
  return module_class("ForwardProblem")(make_array(f.weights_dtype, {n}, f.weights.data()),
                              index_array(f.index_dtype, f.indices),
                              index_array(f.index_dtype, f.offsets), **kw);
}

namespace {

py::object to_python(io::CaseFile& c) {
  PyCaseFile r;
  r.name = c.name;
  r.provenance = c.provenance;
  r.seed = c.seed;
  r.problem = forward_problem_of(c.problem);
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
  return py::cast(std::move(r));
}

io::CaseFile to_io(const PyCaseFile& c) {
  const auto& fp = problem_as<PyForwardProblem>(c.problem, "ForwardProblem");
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
      rec.output = bytes_of(t);
    }
    out.recorded = std::move(rec);
  }
  out.expect = c.expect;
  return out;
}

// The other operators' converters (case_file.h) next to the forward ones above.
using python::to_io;
using python::to_python;

py::object read_any_case(const std::string& dir) {
  io::AnyCaseFile c;
  {
    py::gil_scoped_release nogil;
    c = io::read_any_case(dir);
  }
  return std::visit([](auto& x) { return to_python(x); }, c);
}

/// `case` as the io case of its operator (the Python case classes, in CaseOperator order).
io::AnyCaseFile any_case_of(const py::object& c) {
  if (py::isinstance<PyCaseFile>(c)) return to_io(c.cast<const PyCaseFile&>());
  if (py::isinstance<PyBackwardCaseFile>(c)) return to_io(c.cast<const PyBackwardCaseFile&>());
  if (py::isinstance<PyLceCaseFile>(c)) return to_io(c.cast<const PyLceCaseFile&>());
  if (py::isinstance<PyAttentionCaseFile>(c)) return to_io(c.cast<const PyAttentionCaseFile&>());
  throw py::type_error("case: " + std::string(py::str(py::type::of(c).attr("__name__"))) +
                       " is not a tbe_verify.CaseFile, BackwardCaseFile, LceCaseFile or "
                       "AttentionCaseFile");
}

void write_any_case(const std::string& dir, const py::object& c) {
  const io::AnyCaseFile out = any_case_of(c);
  py::gil_scoped_release nogil;
  io::write_case(dir, out);
}

}  // namespace

void bind_case_file(py::module_& m) {
  m.attr("CASE_OPERATORS") =
      py::make_tuple(io::to_string(io::CaseOperator::Forward), io::to_string(io::CaseOperator::Backward),
                     io::to_string(io::CaseOperator::IkboLce),
                     io::to_string(io::CaseOperator::IkboAttention));

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
                         "A forward case folder (operator 'forward', docs/case-files.md): name, provenance, seed, "
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

  bind_backward_case_file(m);
  bind_ikbo_case_files(m);

  m.def("read_case_operator",
        [](const std::string& dir) { return io::to_string(io::read_case_operator(dir)); },
        py::arg("dir"),
        "The operator of the case folder `dir` (one of CASE_OPERATORS), from case.json's "
        "format, version and operator keys only. Raises InvalidArgument naming the file and the "
        "key (no folder, no case.json, wrong format or version, unknown operator).");
  m.def("read_case", &read_any_case, py::arg("dir"),
        "Reads and validates a case folder of any operator in CASE_OPERATORS (case.json + .npy "
        "tensors; untrusted input: schema, shapes and dtypes are checked; InvalidArgument names "
        "the file, the key and the value). Returns the class of its operator: CaseFile "
        "('forward'), BackwardCaseFile ('backward'), LceCaseFile ('ikbo-lce'), "
        "AttentionCaseFile ('ikbo-attention'), whose problem holds new NumPy arrays and goes "
        "straight into check_forward / check_backward / check_lce / check_attention with the "
        "recorded outputs. A folder without a known operator is read as a forward case (which "
        "names the key 'operator').");
  m.def("write_case", &write_any_case, py::arg("dir"), py::arg("case"),
        "Writes `case` (CaseFile, BackwardCaseFile, LceCaseFile or AttentionCaseFile) as a case "
        "folder `dir` (created; fixed tensor names the case does not use are removed). TBE "
        "tables are repacked at the prefix offsets of E*D (recorded backward weights too), "
        "indices and offsets keep the problem's index dtype, IKBO tensors their exact shapes. "
        "Recorded arrays are checked against the problem first (dtype: TypeError; element "
        "count: InvalidArgument).");
}

}  // namespace tbe::python
