// Vocabulary (tbe/types.h), precision policies (tbe/precision.h) and their names.
#include <pybind11/operators.h>

#include "bindings.h"
#include "tbe/precision.h"

namespace tbe::python {
namespace {

RoundingMode parse_rounding(const std::string& s, const char* what) {
  if (s == to_string(RoundingMode::Nearest)) return RoundingMode::Nearest;
  if (s == to_string(RoundingMode::Stochastic)) return RoundingMode::Stochastic;
  throw InvalidArgument(what, std::string(what) + ": unknown rounding mode '" + s +
                                  "' (known: rne, sr)");
}

/// A read/write enum attribute whose setter also takes the project name.
template <class Class, class E, class Parse>
void enum_property(py::class_<Class>& c, const char* name, E Class::*field, Parse parse,
                   const char* doc) {
  c.def_property(
      name, [field](const Class& o) { return o.*field; },
      [field, name, parse](Class& o, py::handle v) { o.*field = enum_arg<E>(v, name, parse); },
      doc);
}

}  // namespace

DType dtype_arg(py::handle h, const char* what) { return enum_arg<DType>(h, what, parse_dtype); }
PoolingMode pooling_arg(py::handle h, const char* what) {
  return enum_arg<PoolingMode>(h, what, parse_pooling);
}
BoundsCheckMode bounds_check_arg(py::handle h, const char* what) {
  return enum_arg<BoundsCheckMode>(h, what, parse_bounds_check);
}
RoundingMode rounding_arg(py::handle h, const char* what) {
  return enum_arg<RoundingMode>(h, what, parse_rounding);
}
PolicyKind policy_kind_arg(py::handle h, const char* what) {
  return enum_arg<PolicyKind>(h, what, parse_policy_kind);
}

void bind_types(py::module_& m) {
  py::enum_<DType>(m, "DType", "Element type (tbe/types.h); str() gives the project name.")
      .value("F16", DType::F16).value("BF16", DType::BF16).value("F32", DType::F32)
      .value("F64", DType::F64).value("I32", DType::I32).value("I64", DType::I64)
      .def("__str__", [](DType t) { return to_string(t); }, py::prepend());
  py::enum_<PoolingMode>(m, "PoolingMode", "SUM / MEAN / NONE (FBGEMM PoolingMode).")
      .value("SUM", PoolingMode::Sum).value("MEAN", PoolingMode::Mean)
      .value("NONE", PoolingMode::None)
      .def("__str__", [](PoolingMode p) { return to_string(p); }, py::prepend());
  py::enum_<BoundsCheckMode>(m, "BoundsCheckMode",
                             "FATAL / WARNING / IGNORE / NONE (docs/semantics.md 'Bounds check').")
      .value("FATAL", BoundsCheckMode::Fatal).value("WARNING", BoundsCheckMode::Warning)
      .value("IGNORE", BoundsCheckMode::Ignore).value("NONE", BoundsCheckMode::None)
      .def("__str__", [](BoundsCheckMode b) { return to_string(b); }, py::prepend());
  py::enum_<RoundingMode>(m, "RoundingMode", "Write-back rounding: NEAREST ('rne') or "
                                             "STOCHASTIC ('sr').")
      .value("NEAREST", RoundingMode::Nearest).value("STOCHASTIC", RoundingMode::Stochastic)
      .def("__str__", [](RoundingMode r) { return to_string(r); }, py::prepend());
  py::enum_<PolicyKind>(m, "PolicyKind",
                        "SEED_DEFAULT ('seed-default': FP16/BF16 -> FP32 accumulation, FP32 -> "
                        "FP64) or FBGEMM_CUDA ('fbgemm-cuda': FP32 for all).")
      .value("SEED_DEFAULT", PolicyKind::SeedDefault).value("FBGEMM_CUDA", PolicyKind::FbgemmCuda)
      .def("__str__", [](PolicyKind k) { return to_string(k); }, py::prepend());

  m.attr("DTYPE_NAMES") = py::make_tuple("fp16", "bf16", "fp32", "fp64", "int32", "int64");
  m.attr("POLICY_KINDS") = py::make_tuple(to_string(PolicyKind::SeedDefault),
                                          to_string(PolicyKind::FbgemmCuda));
  m.def("parse_dtype", [](const std::string& s) { return parse_dtype(s); }, py::arg("name"),
        "DType of a name ('fp16', 'bf16', 'fp32', 'fp64', 'int32', 'int64'); InvalidArgument "
        "otherwise.");
  m.def("parse_pooling", [](const std::string& s) { return parse_pooling(s); }, py::arg("name"));
  m.def("parse_bounds_check", [](const std::string& s) { return parse_bounds_check(s); },
        py::arg("name"));
  m.def("parse_policy_kind", [](const std::string& s) { return parse_policy_kind(s); },
        py::arg("name"), "PolicyKind of 'seed-default' / 'fbgemm-cuda'; InvalidArgument otherwise.");

  py::class_<PrecisionPolicy> pol(
      m, "PrecisionPolicy",
      "Storage, output and accumulation types of one TBE call (tbe/precision.h). Build one with "
      "make_policy(); the fields may be set by hand, e.g. a deliberately narrow accumulation "
      "for a sharpness experiment.");
  pol.def(py::init([](py::handle kind, py::handle weights, py::handle output,
                      py::handle accumulation, py::handle optimizer_state, py::handle write_back) {
            PrecisionPolicy p;
            p.kind = policy_kind_arg(kind, "kind");
            p.weights = dtype_arg(weights, "weights");
            p.output = dtype_arg(output, "output");
            p.accumulation = dtype_arg(accumulation, "accumulation");
            p.optimizer_state = dtype_arg(optimizer_state, "optimizer_state");
            p.write_back = rounding_arg(write_back, "write_back");
            return p;
          }),
          py::kw_only(), py::arg("kind") = "seed-default", py::arg("weights") = "fp32",
          py::arg("output") = "fp32", py::arg("accumulation") = "fp64",
          py::arg("optimizer_state") = "fp32", py::arg("write_back") = "rne");
  enum_property(pol, "kind", &PrecisionPolicy::kind, parse_policy_kind, "PolicyKind");
  enum_property(pol, "weights", &PrecisionPolicy::weights, parse_dtype, "storage type of rows");
  enum_property(pol, "output", &PrecisionPolicy::output, parse_dtype, "forward output type");
  enum_property(pol, "accumulation", &PrecisionPolicy::accumulation, parse_dtype,
                "type every reduction accumulates in");
  enum_property(pol, "optimizer_state", &PrecisionPolicy::optimizer_state, parse_dtype,
                "optimizer state type (fp32)");
  enum_property(pol, "write_back", &PrecisionPolicy::write_back, parse_rounding,
                "rounding of updated rows ('rne' or 'sr')");
  pol.def(py::self == py::self)
      .def("__str__", [](const PrecisionPolicy& p) { return to_string(p); })
      .def("__repr__", [](const PrecisionPolicy& p) { return "<PrecisionPolicy " + to_string(p) + ">"; });

  m.def(
      "make_policy",
      [](py::handle kind, py::handle weights, py::handle output, py::handle write_back) {
        return make_policy(policy_kind_arg(kind, "kind"), dtype_arg(weights, "weights"),
                           dtype_arg(output, "output"), rounding_arg(write_back, "write_back"));
      },
      py::arg("kind"), py::arg("weights"), py::arg("output"), py::arg("write_back") = "rne",
      "The policy of `kind` ('seed-default' or 'fbgemm-cuda') for the weight and output types "
      "(fp32 / fp16 / bf16): seed-default accumulates FP32 weights in FP64 and 16-bit weights in "
      "FP32; fbgemm-cuda accumulates everything in FP32. InvalidArgument for other types.");
  m.def("round_to", [](py::handle t, double x) { return round_to(dtype_arg(t, "dtype"), x); },
        py::arg("dtype"), py::arg("x"),
        "x rounded once (round to nearest even) to `dtype`, as a float.");
}

}  // namespace tbe::python
