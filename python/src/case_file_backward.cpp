// Backward case folders (operator "backward", tbe/io/backward_case_file.h, docs/case-files.md
// "Backward"): BackwardCaseFile, BackwardRecordedOutputs, BackwardStrategy, LongRuns.
#include <pybind11/stl.h>

#include "case_file.h"

namespace tbe::python {
namespace {

using namespace pybind11::literals;

py::object float_array(const std::vector<float>& v) {
  return make_array({static_cast<std::int64_t>(v.size())}, std::span<const float>(v));
}

py::object byte_array(DType t, const std::vector<std::byte>& bytes) {
  return make_array(t, {static_cast<std::int64_t>(bytes.size() / dtype_size(t))}, bytes.data());
}

}  // namespace

py::object to_python(io::BackwardCaseFile& c) {
  BackwardCase& b = c.problem;
  const bool adagrad = b.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad;
  py::object forward = forward_problem_of(b.forward);
  py::object problem = module_class("BackwardProblem")(
      forward, byte_array(b.forward.options.policy.output, b.grad_output),
      "momentum"_a = adagrad ? float_array(b.momentum) : py::none(),
      "optimizer"_a = b.options.optimizer, "sr_seed"_a = b.options.sr_seed,
      "sr_offset"_a = b.options.sr_offset);
  PyBackwardCaseFile r{c.name, c.provenance, c.seed, problem, c.strategy, std::nullopt, c.expect};
  if (c.recorded) {
    const io::BackwardRecordedOutputs& in = *c.recorded;
    PyBackwardRecorded rec;
    rec.implementation = in.implementation;
    if (in.weights) rec.weights = byte_array(b.forward.weights_dtype, *in.weights);
    if (in.momentum) rec.momentum = float_array(*in.momentum);
    if (in.per_sample_weight_grad) rec.per_sample_weight_grad = float_array(*in.per_sample_weight_grad);
    rec.warnings = in.warnings;
    rec.error = in.error;
    r.recorded = std::move(rec);
  }
  return py::cast(std::move(r));
}

io::BackwardCaseFile to_io(const PyBackwardCaseFile& c) {
  const auto& p = problem_as<PyBackwardProblem>(c.problem, "BackwardProblem");
  const BackwardProblem view = p.view();
  io::BackwardCaseFile out;
  out.name = c.name;
  out.provenance = c.provenance;
  out.seed = c.seed;
  out.problem.forward = io::copy_case(view.forward);
  out.problem.grad_output = bytes_of(p.grad_output);
  if (p.momentum) out.problem.momentum = floats_of(*p.momentum);
  out.problem.options = p.options;
  if (c.strategy) throw_if_error(validate(view, c.strategy->strategy));
  out.strategy = c.strategy;
  if (c.recorded) {
    const PyBackwardRecorded& in = *c.recorded;
    io::BackwardRecordedOutputs rec;
    rec.implementation = in.implementation;
    if (!in.weights.is_none()) {
      HostTensor w = HostTensor::borrow(in.weights, "recorded.weights");
      check_weights_after(p, w);
      // The tables of the updated buffer, repacked like the input weights (copy_case).
      ForwardProblem updated = view.forward;
      updated.tables.weights = w.data();
      rec.weights = io::copy_case(updated).weights;
    }
    if (!in.momentum.is_none()) {
      HostTensor m = HostTensor::borrow(in.momentum, "recorded.momentum");
      check_momentum_after(p, m);
      rec.momentum = floats_of(m);
    }
    if (!in.per_sample_weight_grad.is_none()) {
      HostTensor g = HostTensor::borrow(in.per_sample_weight_grad, "recorded.per_sample_weight_grad");
      check_per_sample_weight_grad(p, g);
      rec.per_sample_weight_grad = floats_of(g);
    }
    rec.warnings = in.warnings;
    rec.error = in.error;
    out.recorded = std::move(rec);
  }
  out.expect = c.expect;
  return out;
}

void bind_backward_case_file(py::module_& m) {
  using LongRuns = BackwardStrategy::LongRuns;
  py::enum_<LongRuns>(m, "LongRuns",
                      "How the GPU backward handles runs of SL >= long_run_threshold "
                      "(tbe::BackwardStrategy::LongRuns): CHUNKED (chunk partial sums, then an "
                      "apply kernel) or FUSED (the last chunk applies, one launch).")
      .value("CHUNKED", LongRuns::Chunked)
      .value("FUSED", LongRuns::Fused);

  py::class_<io::BackwardStrategyRecord>(
      m, "BackwardStrategy",
      "The GPU strategy a backward case was run or found with (case.json 'strategy'; "
      "tbe::BackwardStrategy plus `hoisted`, the transpose run in a TransposeOp first). "
      "Provenance only: strategies are semantics-neutral (docs/backward.md 'Work routing'), "
      "judging ignores it. Checked by write_case: long_run_threshold in [1, 2^20], chunk_size "
      "in [32, 4096] and a multiple of 32.")
      .def(py::init([](std::int32_t long_run_threshold, std::int32_t chunk_size,
                       LongRuns long_runs, bool deterministic, bool hoisted) {
             return io::BackwardStrategyRecord{
                 BackwardStrategy{long_run_threshold, chunk_size, long_runs, deterministic}, hoisted};
           }),
           py::kw_only(), py::arg("long_run_threshold") = 256, py::arg("chunk_size") = 256,
           py::arg("long_runs") = LongRuns::Fused, py::arg("deterministic") = true,
           py::arg("hoisted") = false)
      .def_property_readonly("long_run_threshold",
                             [](const io::BackwardStrategyRecord& s) { return s.strategy.long_run_threshold; })
      .def_property_readonly("chunk_size",
                             [](const io::BackwardStrategyRecord& s) { return s.strategy.chunk_size; })
      .def_property_readonly("long_runs",
                             [](const io::BackwardStrategyRecord& s) { return s.strategy.long_runs; })
      .def_property_readonly("deterministic",
                             [](const io::BackwardStrategyRecord& s) { return s.strategy.deterministic; })
      .def_readonly("hoisted", &io::BackwardStrategyRecord::hoisted);

  py::class_<PyBackwardRecorded>(
      m, "BackwardRecordedOutputs",
      "What an implementation produced for a backward case, every output optional (None: not "
      "recorded; judge what is there): weights (the whole weights buffer after the update, the "
      "forward weights' dtype and element count [sum_t E_t*D_t], any shape), momentum (float32 "
      "[sum_t E_t], rowwise Adagrad only), per_sample_weight_grad (float32 [N], weighted cases "
      "only), warnings (its bounds-check warning count, if reported), error ('bounds_check', "
      "'invalid_argument', 'device_error' or None; excludes every output). Read back, the "
      "arrays are 1-D.")
      .def(py::init([](std::string implementation, py::object weights, py::object momentum,
                       py::object per_sample_weight_grad, std::optional<std::int64_t> warnings,
                       std::optional<std::string> error) {
             return PyBackwardRecorded{std::move(implementation), std::move(weights),
                                       std::move(momentum), std::move(per_sample_weight_grad),
                                       warnings, std::move(error)};
           }),
           py::kw_only(), py::arg("implementation") = "", py::arg("weights") = py::none(),
           py::arg("momentum") = py::none(), py::arg("per_sample_weight_grad") = py::none(),
           py::arg("warnings") = py::none(), py::arg("error") = py::none())
      .def_readwrite("implementation", &PyBackwardRecorded::implementation)
      .def_readwrite("weights", &PyBackwardRecorded::weights)
      .def_readwrite("momentum", &PyBackwardRecorded::momentum)
      .def_readwrite("per_sample_weight_grad", &PyBackwardRecorded::per_sample_weight_grad)
      .def_readwrite("warnings", &PyBackwardRecorded::warnings)
      .def_readwrite("error", &PyBackwardRecorded::error);

  py::class_<PyBackwardCaseFile>(
      m, "BackwardCaseFile",
      "A backward case folder (operator 'backward', docs/case-files.md 'Backward'): name, "
      "provenance, seed, problem (a BackwardProblem: its forward holds the weights BEFORE the "
      "update), strategy (BackwardStrategy or None), recorded (BackwardRecordedOutputs or None), "
      "expect (Expectation or None). Judge a read case with check_backward(case.problem, "
      "case.recorded.weights, momentum=case.recorded.momentum, "
      "per_sample_weight_grad=case.recorded.per_sample_weight_grad).")
      .def(py::init([](py::object problem, std::string name, std::string provenance,
                       std::uint64_t seed, std::optional<io::BackwardStrategyRecord> strategy,
                       std::optional<PyBackwardRecorded> recorded,
                       std::optional<io::Expectation> expect) {
             return PyBackwardCaseFile{std::move(name), std::move(provenance), seed,
                                       std::move(problem), strategy, std::move(recorded),
                                       std::move(expect)};
           }),
           py::arg("problem"), py::kw_only(), py::arg("name") = "", py::arg("provenance") = "",
           py::arg("seed") = 0, py::arg("strategy") = py::none(), py::arg("recorded") = py::none(),
           py::arg("expect") = py::none())
      .def_property_readonly("operator", [](const PyBackwardCaseFile&) {
        return io::to_string(io::CaseOperator::Backward);
      })
      .def_readwrite("name", &PyBackwardCaseFile::name)
      .def_readwrite("provenance", &PyBackwardCaseFile::provenance)
      .def_readwrite("seed", &PyBackwardCaseFile::seed)
      .def_readwrite("problem", &PyBackwardCaseFile::problem)
      .def_readwrite("strategy", &PyBackwardCaseFile::strategy)
      .def_readwrite("recorded", &PyBackwardCaseFile::recorded)
      .def_readwrite("expect", &PyBackwardCaseFile::expect);
}

}  // namespace tbe::python
