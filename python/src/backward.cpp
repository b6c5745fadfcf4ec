// BackwardProblem, OptimizerConfig and the backward operators: backward_reference,
// backward_reference_fp64, check_backward, stochastic_rounding_test (tbe/backward.h,
// tbe/oracle/backward_oracle.h).
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbe/backward_case.h"
#include "tbe/oracle/backward_oracle.h"

namespace tbe::python {
namespace {

template <class T>
py::object vec_array(const std::vector<T>& v) {
  return make_array({static_cast<std::int64_t>(v.size())}, std::span<const T>(v));
}

/// A backward result held by Python: the whole weights buffer, momentum, dL/dw and the stats.
struct BackwardResult {
  py::object weights, momentum, per_sample_weight_grad;
  BackwardStats stats;
};

std::shared_ptr<PyBackwardProblem> make_backward_problem(py::object forward, py::handle grad_output,
                                                         py::handle momentum,
                                                         const OptimizerConfig& optimizer,
                                                         std::uint64_t sr_seed,
                                                         std::uint64_t sr_offset) {
  if (!py::isinstance<PyForwardProblem>(forward))
    throw py::type_error("forward: " + std::string(py::str(py::type::of(forward).attr("__name__"))) +
                         " is not a tbe_verify.ForwardProblem");
  auto p = std::make_shared<PyBackwardProblem>();
  p->forward = forward.cast<std::shared_ptr<PyForwardProblem>>();
  p->forward_object = forward;
  p->grad_output = HostTensor::borrow(grad_output, "grad_output");
  p->momentum = borrow_optional(momentum, "momentum");
  p->options.optimizer = optimizer;
  p->options.sr_seed = sr_seed;
  p->options.sr_offset = sr_offset;
  p->check();
  return p;
}

}  // namespace

void check_weights_after(const PyBackwardProblem& p, const HostTensor& w) {
  w.expect_dtype(p.forward->weights.dtype(), "the weights of the forward problem");
  w.expect_numel(p.forward->weights.numel(), "the whole weights buffer of the forward problem");
}

void check_momentum_after(const PyBackwardProblem& p, const HostTensor& m) {
  m.expect_dtype(DType::F32, "the rowwise Adagrad momentum");
  m.expect_numel(total_rows(p.forward->view().tables), "one momentum per row (sum_t E_t)");
}

void check_per_sample_weight_grad(const PyBackwardProblem& p, const HostTensor& g) {
  g.expect_dtype(DType::F32, "the per-sample-weight gradient");
  g.expect_numel(p.forward->indices.numel(), "one gradient per index (N)");
}

BackwardProblem PyBackwardProblem::view() const {
  BackwardProblem p;
  p.forward = forward->view();
  p.grad_output = grad_output.data();
  p.momentum = momentum ? static_cast<const float*>(momentum->data()) : nullptr;
  p.options = options;
  return p;
}

void PyBackwardProblem::check() const {
  grad_output.expect_dtype(forward->options.policy.output, "policy.output (the forward output)");
  if (momentum) momentum->expect_dtype(DType::F32, "the rowwise Adagrad momentum");
  const BackwardProblem p = view();
  throw_if_error(validate(p));
  grad_output.expect_numel(make_output_layout(p.forward).numel,
                           "the forward output (shape " + shape_text(forward->output_shape()) + ")");
  if (momentum)
    momentum->expect_numel(total_rows(p.forward.tables), "one momentum per row (sum_t E_t)");
}

void bind_backward(py::module_& m) {
  py::enum_<OptimizerKind>(m, "OptimizerKind",
                           "EXACT_SGD ('sgd') or EXACT_ROWWISE_ADAGRAD ('rowwise_adagrad').")
      .value("EXACT_SGD", OptimizerKind::ExactSgd)
      .value("EXACT_ROWWISE_ADAGRAD", OptimizerKind::ExactRowwiseAdagrad)
      .def("__str__", [](OptimizerKind k) { return to_string(k); }, py::prepend());
  py::enum_<WeightDecayMode>(m, "WeightDecayMode",
                             "Rowwise Adagrad weight decay: NONE, L2, DECOUPLED ('decoupled').")
      .value("NONE", WeightDecayMode::None)
      .value("L2", WeightDecayMode::L2)
      .value("DECOUPLED", WeightDecayMode::Decoupled)
      .def("__str__", [](WeightDecayMode w) { return to_string(w); }, py::prepend());
  m.def("parse_optimizer", [](const std::string& n) { return parse_optimizer(n); }, py::arg("name"));
  m.def("parse_weight_decay_mode", [](const std::string& n) { return parse_weight_decay_mode(n); },
        py::arg("name"));

  py::class_<OptimizerConfig>(
      m, "OptimizerConfig",
      "Hyper-parameters of the fused exact optimizer (tbe::OptimizerConfig, docs/backward.md). "
      "Values are used rounded once to FP32, as FBGEMM passes them. Validated with the "
      "BackwardProblem: learning_rate finite > 0; eps finite > 0 (Adagrad); weight_decay >= 0; "
      "weight_decay_mode 'none' for sgd; max_norm >= 0 (0 = off); max_gradient >= 0 (0 = off, "
      "else grad_output is clamped to [-max_gradient, max_gradient]).")
      .def(py::init([](py::handle kind, double learning_rate, double eps, double weight_decay,
                       py::handle weight_decay_mode, double max_norm, double max_gradient) {
             OptimizerConfig o;
             o.kind = enum_arg<OptimizerKind>(kind, "kind", parse_optimizer);
             o.learning_rate = learning_rate;
             o.eps = eps;
             o.weight_decay = weight_decay;
             o.weight_decay_mode = enum_arg<WeightDecayMode>(weight_decay_mode, "weight_decay_mode",
                                                             parse_weight_decay_mode);
             o.max_norm = max_norm;
             o.max_gradient = max_gradient;
             return o;
           }),
           py::kw_only(), py::arg("kind") = "sgd", py::arg("learning_rate") = 0.01,
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0,
           py::arg("weight_decay_mode") = "none", py::arg("max_norm") = 0.0,
           py::arg("max_gradient") = 0.0)
      .def_readonly("kind", &OptimizerConfig::kind)
      .def_readonly("learning_rate", &OptimizerConfig::learning_rate)
      .def_readonly("eps", &OptimizerConfig::eps)
      .def_readonly("weight_decay", &OptimizerConfig::weight_decay)
      .def_readonly("weight_decay_mode", &OptimizerConfig::weight_decay_mode)
      .def_readonly("max_norm", &OptimizerConfig::max_norm)
      .def_readonly("max_gradient", &OptimizerConfig::max_gradient);

  py::class_<PyBackwardProblem, std::shared_ptr<PyBackwardProblem>>(
      m, "BackwardProblem",
      R"doc(One backward + exact optimizer call (tbe::BackwardProblem, docs/backward.md).

forward      the ForwardProblem whose output gradient is given; its weights are the weights
             BEFORE the update, its bounds check runs first (FATAL: BoundsCheckError)
grad_output  dL/d(output): the forward output's element count, dtype policy.output
momentum     rowwise Adagrad state before the update, float32 [sum_t E_t] (None for sgd)
optimizer    an OptimizerConfig
sr_seed, sr_offset  the Philox stream of stochastic rounding (policy.write_back 'sr')
Checked here: element types, the C++ validate(), then grad_output and momentum sizes.)doc")
      .def(py::init(&make_backward_problem), py::arg("forward"), py::arg("grad_output"),
           py::kw_only(), py::arg("momentum") = py::none(),
           py::arg("optimizer") = OptimizerConfig{}, py::arg("sr_seed") = 0,
           py::arg("sr_offset") = 0)
      .def_readonly("forward", &PyBackwardProblem::forward_object)
      .def_property_readonly("grad_output",
                             [](const PyBackwardProblem& p) { return p.grad_output.source(); })
      .def_property_readonly("momentum",
                             [](const PyBackwardProblem& p) -> py::object {
                               return p.momentum ? p.momentum->source() : py::none();
                             })
      .def_property_readonly("optimizer",
                             [](const PyBackwardProblem& p) { return p.options.optimizer; })
      .def_property_readonly("sr_seed", [](const PyBackwardProblem& p) { return p.options.sr_seed; })
      .def_property_readonly("sr_offset",
                             [](const PyBackwardProblem& p) { return p.options.sr_offset; });

  py::class_<BackwardStats>(m, "BackwardStats", "What a backward call reports.")
      .def_readonly("warnings", &BackwardStats::warnings, "bounds-check warnings")
      .def_readonly("runs", &BackwardStats::runs, "unique (table, row) pairs updated")
      .def_readonly("lookups", &BackwardStats::lookups, "lookups inside a bag")
      .def_readonly("paths", &BackwardStats::paths);
  py::class_<BackwardResult>(m, "BackwardResult",
                             "New arrays: weights (the whole buffer after the update, shape and "
                             "dtype of the forward weights; untouched rows copied), momentum "
                             "(float32 [sum_t E_t] or None), per_sample_weight_grad (float32 [N] "
                             "for weighted problems, else None), stats.")
      .def_readonly("weights", &BackwardResult::weights)
      .def_readonly("momentum", &BackwardResult::momentum)
      .def_readonly("per_sample_weight_grad", &BackwardResult::per_sample_weight_grad)
      .def_readonly("stats", &BackwardResult::stats);

  m.def(
      "backward_reference",
      [](const PyBackwardProblem& p) {
        const PyForwardProblem& f = *p.forward;
        BackwardResult r;
        BackwardOutputs out;
        r.weights = make_array(f.weights.dtype(), f.weights.shape(), f.weights.data());
        py::buffer_info wi = py::reinterpret_borrow<py::buffer>(r.weights).request(true);
        out.weights = wi.ptr;
        if (p.momentum) {
          r.momentum = make_array(DType::F32, p.momentum->shape(), p.momentum->data());
          out.momentum = static_cast<float*>(py::reinterpret_borrow<py::buffer>(r.momentum).request(true).ptr);
        } else {
          r.momentum = py::none();
        }
        if (f.per_sample_weights) {
          void* g = nullptr;
          r.per_sample_weight_grad = new_array(DType::F32, {f.indices.numel()}, &g);
          out.per_sample_weight_grad = static_cast<float*>(g);
        } else {
          r.per_sample_weight_grad = py::none();
        }
        const BackwardProblem view = p.view();
        py::gil_scoped_release nogil;
        r.stats = backward_reference(view, out);
        return r;
      },
      py::arg("problem"),
      "The CPU reference backward fused with the optimizer (tbe::backward_reference): FP64 row "
      "gradients, the exact update, rows stored per policy.write_back (RNE or stochastic "
      "rounding), momentum rounded to FP32. The inputs are not modified: returns a "
      "BackwardResult of new arrays.");

  py::class_<BackwardReference>(m, "BackwardReference",
                                "The FP64 backward of one call (tbe::BackwardReference); per run "
                                "k (one unique (table, row)), column d is at run_col_offset[k] + d.")
      .def_property_readonly("linear_ids", [](const BackwardReference& r) { return vec_array(r.transpose.linear_ids); })
      .def_property_readonly("run_lengths", [](const BackwardReference& r) { return vec_array(r.transpose.run_lengths); })
      .def_property_readonly("run_offsets", [](const BackwardReference& r) { return vec_array(r.transpose.run_offsets); })
      .def_property_readonly("sorted_positions", [](const BackwardReference& r) { return vec_array(r.transpose.sorted_positions); })
      .def_property_readonly("position_bag", [](const BackwardReference& r) { return vec_array(r.transpose.position_bag); })
      .def_property_readonly("run_table", [](const BackwardReference& r) { return vec_array(r.run_table); })
      .def_property_readonly("run_row", [](const BackwardReference& r) { return vec_array(r.run_row); })
      .def_property_readonly("run_col_offset", [](const BackwardReference& r) { return vec_array(r.run_col_offset); })
      .def_property_readonly("row_grad", [](const BackwardReference& r) { return vec_array(r.row_grad); },
                             "G_r after clipping, FP64 [sum_k D_k]")
      .def_property_readonly("momentum", [](const BackwardReference& r) { return vec_array(r.momentum); },
                             "new momentum before its FP32 store [R] (Adagrad)")
      .def_property_readonly("updated", [](const BackwardReference& r) { return vec_array(r.updated); },
                             "new rows after max_norm, before storage rounding [sum_k D_k]")
      .def_property_readonly("per_sample_weight_grad",
                             [](const BackwardReference& r) { return vec_array(r.per_sample_weight_grad); },
                             "dL/dw_p [N] (weighted problems; else empty)")
      .def_readonly("repair", &BackwardReference::repair);
  m.def(
      "backward_reference_fp64",
      [](const PyBackwardProblem& p) {
        const BackwardProblem view = p.view();
        py::gil_scoped_release nogil;
        return backward_reference_fp64(view);
      },
      py::arg("problem"), "The FP64 backward (transpose, row gradients, updates) as arrays.");

  m.def(
      "check_backward",
      [](const PyBackwardProblem& p, py::handle weights, py::handle momentum,
         py::handle per_sample_weight_grad) {
        HostTensor w = HostTensor::borrow(weights, "weights");
        check_weights_after(p, w);
        std::optional<HostTensor> mom = borrow_optional(momentum, "momentum");
        if (mom) check_momentum_after(p, *mom);
        std::optional<HostTensor> g = borrow_optional(per_sample_weight_grad, "per_sample_weight_grad");
        if (g) check_per_sample_weight_grad(p, *g);
        oracle::BackwardResultView result;
        result.weights = w.data();
        result.momentum = mom ? static_cast<const float*>(mom->data()) : nullptr;
        result.per_sample_weight_grad = g ? static_cast<const float*>(g->data()) : nullptr;
        const BackwardProblem view = p.view();
        py::gil_scoped_release nogil;
        return oracle::check_backward(view, result);
      },
      py::arg("problem"), py::arg("weights"), py::kw_only(), py::arg("momentum") = py::none(),
      py::arg("per_sample_weight_grad") = py::none(),
      "Judges a backward result: `weights` is the whole weights buffer after the call (dtype and "
      "size of the forward weights), `momentum` the whole float32 [sum_t E_t] state (required "
      "for rowwise Adagrad), `per_sample_weight_grad` float32 [N] or None (not judged). The "
      "oracle encloses G_r, momentum and stored rows (SR: RD/RU of the exact update) and checks "
      "untouched rows bitwise. Returns a BackwardCheckReport.");
  m.def(
      "stochastic_rounding_test",
      [](const PyBackwardProblem& p, py::handle weights, double z_limit) {
        HostTensor w = HostTensor::borrow(weights, "weights");
        check_weights_after(p, w);
        const BackwardProblem view = p.view();
        py::gil_scoped_release nogil;
        const oracle::BackwardEnclosures enc = oracle::compute_backward_enclosures(view);
        return oracle::stochastic_rounding_test(view, enc, w.data(), z_limit);
      },
      py::arg("problem"), py::arg("weights"), py::kw_only(), py::arg("z_limit") = 5.0,
      "The aggregate z-test of stochastic rounding over every stored element whose exact update "
      "is not representable (docs/oracle.md 'B.7'): a kernel that rounds to nearest fails it on "
      "skewed fractions.");
}

}  // namespace tbe::python
