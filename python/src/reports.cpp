// The oracle's verdicts (tbe/oracle/forward_oracle.h, backward_oracle.h): ElementCoord,
// ElementVerdict, CheckReport, BackwardCheckReport, StochasticRoundingTest. Read-only objects.
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbe/oracle/backward_oracle.h"
#include "tbe/oracle/report_json.h"

namespace tbe::python {

using oracle::BackwardCheckReport;
using oracle::CheckReport;
using oracle::ElementCoord;
using oracle::ElementVerdict;
using oracle::StochasticRoundingTest;

void bind_reports(py::module_& m) {
  py::class_<ElementCoord> coord(
      m, "ElementCoord",
      "Coordinates of one output element (docs/oracle.md): TBE pooled (feature, sample, column; "
      "rank under VBE; row = output row, -1 under VBE), TBE NONE (row = lookup position, "
      "lookup_row True), backward weights/momentum (table_row True: feature = table, row = row "
      "of that table, column -1 for a momentum), IKBO LCE (sample = candidate b, row = m, "
      "column = n), IKBO attention (row = query row, sample = candidate, head, column = d). "
      "-1 = not applicable; flat = index in the flat output.");
  py::enum_<ElementCoord::Space>(coord, "Space")
      .value("TBE", ElementCoord::Space::Tbe)
      .value("IKBO_LCE", ElementCoord::Space::IkboLce)
      .value("IKBO_ATTENTION", ElementCoord::Space::IkboAttention);
  coord.def_readonly("feature", &ElementCoord::feature)
      .def_readonly("sample", &ElementCoord::sample)
      .def_readonly("rank", &ElementCoord::rank)
      .def_readonly("row", &ElementCoord::row)
      .def_readonly("column", &ElementCoord::column)
      .def_readonly("flat", &ElementCoord::flat)
      .def_readonly("head", &ElementCoord::head)
      .def_readonly("lookup_row", &ElementCoord::lookup_row)
      .def_readonly("table_row", &ElementCoord::table_row)
      .def_readonly("space", &ElementCoord::space)
      .def("to_json", [](const ElementCoord& c) { return nlohmann::json(c).dump(); });

  py::class_<ElementVerdict>(m, "ElementVerdict",
                             "The judgement of one element: its enclosure [lo, hi], the value, "
                             "the FP64 reference and the position in radii (|position| <= 1 is "
                             "inside).")
      .def_readonly("where", &ElementVerdict::where)
      .def_property_readonly("lo", [](const ElementVerdict& v) { return v.enclosure.lo; })
      .def_property_readonly("hi", [](const ElementVerdict& v) { return v.enclosure.hi; })
      .def_readonly("value", &ElementVerdict::value, "the candidate's stored value as a float")
      .def_readonly("reference", &ElementVerdict::reference,
                    "the FP64 reference value before output rounding")
      .def_readonly("position", &ElementVerdict::position,
                    "(value - mid) / radius; +-inf for a point interval missed or a NaN value")
      .def_readonly("inside", &ElementVerdict::inside)
      .def("to_json", [](const ElementVerdict& v) { return nlohmann::json(v).dump(); });

  py::class_<CheckReport>(m, "CheckReport",
                          "The result of judging one output tensor. bool(report) is "
                          "report.passed; str(report) is the one-line summary of the C++ tools.")
      .def_readonly("check", &CheckReport::check, "e.g. 'forward', 'weights', 'ikbo-lce'")
      .def_readonly("policy", &CheckReport::policy)
      .def_readonly("elements", &CheckReport::elements)
      .def_readonly("failures", &CheckReport::failures, "elements outside their enclosure")
      .def_readonly("worst", &CheckReport::worst, "ElementVerdict of the largest |position|")
      .def_property_readonly("passed", &CheckReport::passed)
      .def("__bool__", &CheckReport::passed)
      .def("summary", &CheckReport::summary)
      .def("__str__", &CheckReport::summary)
      .def("__repr__", [](const CheckReport& r) { return "<CheckReport " + r.summary() + ">"; })
      .def("to_json", [](const CheckReport& r) { return nlohmann::json(r).dump(); },
           "The report as the JSON text tbe-verify writes (non-finite numbers as strings).");

  py::class_<BackwardCheckReport>(m, "BackwardCheckReport",
                                  "One CheckReport per checked tensor of a backward call "
                                  "('weights', 'weights.untouched', 'momentum', ...).")
      .def_readonly("reports", &BackwardCheckReport::reports)
      .def_property_readonly("passed", &BackwardCheckReport::passed)
      .def_property_readonly("failures", &BackwardCheckReport::failures)
      .def("__bool__", &BackwardCheckReport::passed)
      .def("__getitem__",
           [](const BackwardCheckReport& r, const std::string& check) {
             for (const CheckReport& c : r.reports)
               if (c.check == check) return c;
             std::string names;
             for (const CheckReport& c : r.reports) names += (names.empty() ? "" : ", ") + c.check;
             throw py::key_error("no report '" + check + "' (reports: " + names + ")");
           },
           py::arg("check"), "The report named `check`, e.g. report['momentum'].")
      .def("summary", &BackwardCheckReport::summary)
      .def("__str__", &BackwardCheckReport::summary);

  py::class_<StochasticRoundingTest>(m, "StochasticRoundingTest",
                                     "Aggregate z-test of stochastic rounding (docs/oracle.md "
                                     "'B.7 Stochastic rounding'): passes iff |z| <= z_limit.")
      .def_readonly("samples", &StochasticRoundingTest::samples)
      .def_readonly("excluded", &StochasticRoundingTest::excluded)
      .def_readonly("mean_error_ulps", &StochasticRoundingTest::mean_error_ulps)
      .def_readonly("variance", &StochasticRoundingTest::variance)
      .def_readonly("bias_bound", &StochasticRoundingTest::bias_bound)
      .def_readonly("z", &StochasticRoundingTest::z)
      .def_readonly("z_limit", &StochasticRoundingTest::z_limit)
      .def_property_readonly("passed", &StochasticRoundingTest::passed)
      .def("__bool__", &StochasticRoundingTest::passed)
      .def("__str__", &StochasticRoundingTest::summary);
}

}  // namespace tbe::python
