// The exceptions of tbe_verify and the translation of the C++ errors (tbe/errors.h):
//   tbe_verify.Error (Exception)                  any tbe::Error
//   tbe_verify.InvalidArgument (Error, ValueError) tbe::InvalidArgument; `.argument` names it
//   tbe_verify.BoundsCheckError (Error, IndexError) tbe::BoundsCheckError (FATAL bounds check);
//                                                  `.violation` is the BoundsViolation
// Wrong Python types and element types raise the built-in TypeError.
#include "bindings.h"
#include "tbe/errors.h"

namespace tbe::python {
namespace {

// Created once per process and never released (the usual C-extension pattern for module-level
// exception types: they must outlive every translator call).
PyObject* g_error = nullptr;
PyObject* g_invalid_argument = nullptr;
PyObject* g_bounds_check_error = nullptr;

PyObject* new_exception(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("tbe_verify.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;
}

void raise_with(PyObject* type, const char* message, const char* attr, py::object value) {
  py::object err = py::reinterpret_borrow<py::object>(type)(message);
  err.attr(attr) = std::move(value);
  PyErr_SetObject(type, err.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
  g_error = new_exception(m, "Error", PyExc_Exception, "Base class of the errors of tbe_verify.");
  py::tuple invalid_bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_invalid_argument = new_exception(
      m, "InvalidArgument", invalid_bases.ptr(),
      "A bad argument (shape, size, limit, name). The message names the argument, the value and "
      "the limit; `.argument` holds the argument's name, e.g. 'offsets' or 'tables.dims[0]'.");
  py::tuple bounds_bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_IndexError));
  g_bounds_check_error = new_exception(
      m, "BoundsCheckError", bounds_bases.ptr(),
      "Raised by bounds_check='fatal' for the first bad bag, last offset or index "
      "(docs/semantics.md 'Bounds check'); nothing was computed. `.violation` is a "
      "BoundsViolation.");

  py::class_<BoundsViolation> v(m, "BoundsViolation",
                                "The first offender of a FATAL bounds check (tbe/errors.h).");
  py::enum_<BoundsViolation::Kind>(v, "Kind")
      .value("BAG", BoundsViolation::Kind::Bag)
      .value("LAST_OFFSET", BoundsViolation::Kind::LastOffset)
      .value("INDEX", BoundsViolation::Kind::Index);
  v.def_readonly("kind", &BoundsViolation::kind)
      .def_readonly("feature", &BoundsViolation::feature, "feature f of the bag (-1: last offset)")
      .def_readonly("sample", &BoundsViolation::sample, "sample b inside feature f")
      .def_readonly("position", &BoundsViolation::position,
                    "position in offsets (bag, last offset) or in indices (index)")
      .def_readonly("value", &BoundsViolation::value, "the offending offset or index")
      .def_readonly("limit", &BoundsViolation::limit, "E_t (index) or N = len(indices) (bag)")
      .def("__str__", [](const BoundsViolation& b) { return to_string(b); })
      .def("__repr__", [](const BoundsViolation& b) { return "<BoundsViolation " + to_string(b) + ">"; });

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      raise_with(g_invalid_argument, e.what(), "argument", py::str(e.argument()));
    } catch (const BoundsCheckError& e) {
      raise_with(g_bounds_check_error, e.what(), "violation", py::cast(e.violation()));
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

}  // namespace tbe::python
