// ForwardProblem and the forward operators: forward_reference, forward_reference_fp64, repair,
// find_first_violation, forward_enclosures, check_forward (tbe/forward.h, tbe/bounds_check.h,
// tbe/oracle/forward_oracle.h).
#include <pybind11/stl.h>

#include <limits>

#include "bindings.h"
#include "tbe/bounds_check.h"
#include "tbe/forward.h"
#include "tbe/oracle/forward_oracle.h"

namespace tbe::python {
namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

oracle::EnclosureOptions enclosure_options(const std::string& bound, double false_alarm) {
  oracle::EnclosureOptions o;
  if (bound == "worst-case") {
    o.bound = oracle::EnclosureOptions::Bound::WorstCase;
  } else if (bound == "probabilistic") {
    o.bound = oracle::EnclosureOptions::Bound::Probabilistic;
  } else {
    throw InvalidArgument("bound", "bound: unknown enclosure bound '" + bound +
                                       "' (known: worst-case, probabilistic)");
  }
  if (!(false_alarm > 0.0 && false_alarm < 1.0))
    throw InvalidArgument("false_alarm_probability",
                          "false_alarm_probability: " + std::to_string(false_alarm) +
                              " is outside (0, 1)");
  o.false_alarm_probability = false_alarm;
  return o;
}

PrecisionPolicy policy_arg(py::handle policy, py::handle output_dtype, DType weights) {
  if (py::isinstance<PrecisionPolicy>(policy)) {
    PrecisionPolicy p = policy.cast<PrecisionPolicy>();
    if (!output_dtype.is_none() && dtype_arg(output_dtype, "output_dtype") != p.output)
      throw InvalidArgument("output_dtype", "output_dtype: " +
                                                to_string(dtype_arg(output_dtype, "output_dtype")) +
                                                " != policy.output " + to_string(p.output) +
                                                " (give one of the two)");
    return p;
  }
  if (!py::isinstance<py::str>(policy) && !py::isinstance<PolicyKind>(policy))
    throw py::type_error("policy: " + std::string(py::str(py::type::of(policy).attr("__name__"))) +
                         " is neither a tbe_verify.PrecisionPolicy nor a policy kind "
                         "('seed-default', 'fbgemm-cuda')");
  const DType out = output_dtype.is_none() ? DType::F32 : dtype_arg(output_dtype, "output_dtype");
  return make_policy(policy_kind_arg(policy, "policy"), weights, out);
}

std::shared_ptr<PyForwardProblem> make_forward_problem(
    py::handle weights, py::handle indices, py::handle offsets, py::handle rows, py::handle dims,
    py::handle table_offsets, py::handle feature_table_map, py::handle batch_size,
    py::handle per_sample_weights, py::handle vbe_batch_sizes, py::handle vbe_ranks,
    py::handle pooling, py::handle bounds_check, py::handle policy, py::handle output_dtype) {
  auto p = std::make_shared<PyForwardProblem>();
  p->weights = HostTensor::borrow(weights, "weights");
  p->indices = HostTensor::borrow(indices, "indices");
  p->offsets = HostTensor::borrow(offsets, "offsets");
  p->per_sample_weights = borrow_optional(per_sample_weights, "per_sample_weights");

  const DType wt = p->weights.dtype();
  if (wt != DType::F32 && wt != DType::F16 && wt != DType::BF16)
    throw py::type_error("weights: dtype " + to_string(wt) +
                         " but tables.dtype needs fp32, fp16 or bf16 (bf16 as uint16 bits)");
  const DType it = p->indices.dtype();
  if (it != DType::I32 && it != DType::I64)
    throw py::type_error("indices: dtype " + to_string(it) + " but lookups need int32 or int64");
  p->offsets.expect_dtype(it, "lookups.index_dtype (the dtype of indices)");
  p->indices.expect_ndim(1);
  p->offsets.expect_ndim(1);
  if (p->per_sample_weights) {
    p->per_sample_weights->expect_dtype(DType::F32, "lookups.per_sample_weights");
    p->per_sample_weights->expect_ndim(1);
  }

  // Tables: one [E, D] table, or a flat buffer described by rows / dims.
  if (rows.is_none() && dims.is_none()) {
    if (p->weights.ndim() != 2)
      throw InvalidArgument("weights", "weights: shape " + p->weights.shape_string() +
                                           " without rows/dims: pass one table as a 2-D [E, D] "
                                           "array, or a flat buffer with rows= and dims=");
    p->rows = {p->weights.shape()[0]};
    const std::int64_t D = p->weights.shape()[1];
    if (D > std::numeric_limits<std::int32_t>::max())
      throw InvalidArgument("weights", "weights: D = " + s(D) + " does not fit int32");
    p->dims = {static_cast<std::int32_t>(D)};
  } else {
    if (rows.is_none() || dims.is_none())
      throw InvalidArgument(rows.is_none() ? "rows" : "dims",
                            "rows and dims: give both (a flat weights buffer) or neither "
                            "(one [E, D] table)");
    p->rows = int64_list(rows, "rows");
    p->dims = int32_list(dims, "dims");
  }
  if (table_offsets.is_none()) {
    std::int64_t off = 0;
    for (std::size_t t = 0; t < p->rows.size() && t < p->dims.size(); ++t) {
      p->table_offsets.push_back(off);
      // Overflow is reported by validate() (E·D checks) before any use; keep the prefix finite.
      const std::int64_t E = p->rows[t], D = p->dims[t];
      if (E > 0 && D > 0 && E <= std::numeric_limits<std::int64_t>::max() / D &&
          off <= std::numeric_limits<std::int64_t>::max() - E * D)
        off += E * D;
    }
  } else {
    p->table_offsets = int64_list(table_offsets, "table_offsets");
  }
  if (feature_table_map.is_none()) {
    for (std::size_t t = 0; t < p->rows.size(); ++t)
      p->feature_table_map.push_back(static_cast<std::int32_t>(t));
  } else {
    p->feature_table_map = int32_list(feature_table_map, "feature_table_map");
  }

  // Lookups: B inferred from len(offsets) = T·B + 1 unless given; VBE batch sizes [T·R].
  const std::int64_t T = static_cast<std::int64_t>(p->feature_table_map.size());
  if (!vbe_batch_sizes.is_none()) {
    p->vbe_batch_sizes = int32_list(vbe_batch_sizes, "vbe_batch_sizes");
    if (vbe_ranks.is_none())
      throw InvalidArgument("vbe_ranks", "vbe_ranks: needed with vbe_batch_sizes (R, the "
                                         "number of ranks; vbe_batch_sizes is [T·R])");
    const std::int64_t R = int_arg(vbe_ranks, "vbe_ranks");
    if (R < 0 || R > std::numeric_limits<std::int32_t>::max())
      throw InvalidArgument("vbe_ranks", "vbe_ranks: R = " + s(R) + " is outside [0, 2^31)");
    p->vbe_ranks = static_cast<std::int32_t>(R);
    if (!batch_size.is_none())
      throw InvalidArgument("batch_size", "batch_size: not used under VBE (vbe_batch_sizes "
                                          "gives every feature's batch sizes)");
  } else {
    if (!vbe_ranks.is_none())
      throw InvalidArgument("vbe_ranks", "vbe_ranks: given without vbe_batch_sizes");
    if (!batch_size.is_none()) {
      p->batch_size = int_arg(batch_size, "batch_size");
    } else if (T > 0) {
      const std::int64_t bags = p->offsets.numel() - 1;
      if (bags < 0 || bags % T != 0)
        throw InvalidArgument("offsets", "offsets: length " + s(p->offsets.numel()) +
                                             " is not T·B + 1 for T = " + s(T) +
                                             " features (pass batch_size to name B)");
      p->batch_size = bags / T;
    }
  }
  p->options.pooling = pooling_arg(pooling, "pooling");
  p->options.bounds_check = bounds_check_arg(bounds_check, "bounds_check");
  p->options.policy = policy_arg(policy, output_dtype, wt);
  p->check();
  return p;
}

py::object fp64_array(const std::vector<std::int64_t>& shape, const std::vector<double>& v) {
  return make_array(shape, std::span<const double>(v));
}

}  // namespace

ForwardProblem PyForwardProblem::view() const {
  ForwardProblem p;
  p.tables.dtype = weights.dtype();
  p.tables.weights = weights.data();
  p.tables.rows = rows;
  p.tables.dims = dims;
  p.tables.table_offsets = table_offsets;
  p.tables.feature_table_map = feature_table_map;
  p.lookups.index_dtype = indices.dtype();
  p.lookups.indices = indices.data();
  p.lookups.num_indices = indices.numel();
  p.lookups.offsets = offsets.data();
  p.lookups.num_offsets = offsets.numel();
  p.lookups.per_sample_weights =
      per_sample_weights ? static_cast<const float*>(per_sample_weights->data()) : nullptr;
  p.lookups.batch_size = batch_size;
  p.lookups.vbe_batch_sizes = vbe_batch_sizes;
  p.lookups.vbe_ranks = vbe_ranks;
  p.options = options;
  return p;
}

void PyForwardProblem::check() const {
  const ForwardProblem p = view();
  throw_if_error(validate(p));
  const std::int64_t have = weights.numel();
  for (std::size_t t = 0; t < rows.size(); ++t) {
    const std::int64_t first = table_offsets[t], end = first + rows[t] * dims[t];  // validated
    if (end > have)
      throw InvalidArgument("weights", "weights: table " + s(static_cast<std::int64_t>(t)) +
                                           " (E=" + s(rows[t]) + ", D=" + s(dims[t]) +
                                           ") spans elements [" + s(first) + ", " + s(end) +
                                           ") but weights has " + s(have) + " elements");
  }
  if (per_sample_weights)
    per_sample_weights->expect_numel(indices.numel(), "one weight per index (N = len(indices))");
}

std::vector<std::int64_t> PyForwardProblem::output_shape() const {
  const ForwardProblem p = view();
  const OutputLayout L = make_output_layout(p);
  if (options.pooling == PoolingMode::None) return {indices.numel(), L.total_dim};
  if (p.lookups.is_vbe()) return {L.numel};
  return {batch_size, L.total_dim};
}

void bind_forward(py::module_& m) {
  py::class_<PyForwardProblem, std::shared_ptr<PyForwardProblem>> fp(
      m, "ForwardProblem",
      R"doc(One TBE forward call (tbe::ForwardProblem, docs/semantics.md "Inputs").

Arrays are borrowed, not copied (NumPy arrays, CPU torch tensors; C-contiguous):
  weights   one table [E, D], or all tables flat [sum_t E_t*D_t] with rows= and dims=;
            fp32 / fp16 / bf16 (uint16 raw bits or a torch bfloat16 tensor)
  indices   [N] int32 or int64
  offsets   [T*B + 1] (VBE: [sum(vbe_batch_sizes) + 1]), the dtype of indices; feature-major:
            bag (f, b) = indices[offsets[f*B + b] : offsets[f*B + b + 1]]
  per_sample_weights  [N] float32 or None
Metadata (sequences of ints or 1-D integer arrays):
  rows [num_tables] E_t, dims [num_tables] D_t (1..2048), table_offsets [num_tables] element
  offset of table t in weights (default: exclusive prefix of E_t*D_t), feature_table_map [T]
  (default: one feature per table), batch_size B (default (len(offsets) - 1) / T),
  vbe_batch_sizes [T*R] feature-major with vbe_ranks R (VBE; batch_size then not given).
Options: pooling 'sum' | 'mean' | 'none'; bounds_check 'fatal' | 'warning' | 'ignore' | 'none';
policy: a PrecisionPolicy, or a kind 'seed-default' | 'fbgemm-cuda' made for the weights dtype
and output_dtype (default 'fp32').

Checked here, before any element is read: array types, element types, ranks, then the C++
validate() (InvalidArgument naming argument, value and limit), then that every table lies inside
weights and per_sample_weights has N elements.)doc");
  fp.def(py::init(&make_forward_problem), py::arg("weights"), py::arg("indices"),
         py::arg("offsets"), py::kw_only(), py::arg("rows") = py::none(),
         py::arg("dims") = py::none(), py::arg("table_offsets") = py::none(),
         py::arg("feature_table_map") = py::none(), py::arg("batch_size") = py::none(),
         py::arg("per_sample_weights") = py::none(), py::arg("vbe_batch_sizes") = py::none(),
         py::arg("vbe_ranks") = py::none(), py::arg("pooling") = "sum",
         py::arg("bounds_check") = "warning", py::arg("policy") = "seed-default",
         py::arg("output_dtype") = py::none())
      .def_property_readonly("weights", [](const PyForwardProblem& p) { return p.weights.source(); })
      .def_property_readonly("indices", [](const PyForwardProblem& p) { return p.indices.source(); })
      .def_property_readonly("offsets", [](const PyForwardProblem& p) { return p.offsets.source(); })
      .def_property_readonly("per_sample_weights",
                             [](const PyForwardProblem& p) -> py::object {
                               return p.per_sample_weights ? p.per_sample_weights->source()
                                                           : py::none();
                             })
      .def_readonly("rows", &PyForwardProblem::rows)
      .def_readonly("dims", &PyForwardProblem::dims)
      .def_readonly("table_offsets", &PyForwardProblem::table_offsets)
      .def_readonly("feature_table_map", &PyForwardProblem::feature_table_map)
      .def_readonly("batch_size", &PyForwardProblem::batch_size)
      .def_readonly("vbe_batch_sizes", &PyForwardProblem::vbe_batch_sizes)
      .def_readonly("vbe_ranks", &PyForwardProblem::vbe_ranks)
      .def_property_readonly("pooling", [](const PyForwardProblem& p) { return p.options.pooling; })
      .def_property_readonly("bounds_check",
                             [](const PyForwardProblem& p) { return p.options.bounds_check; })
      .def_property_readonly("policy", [](const PyForwardProblem& p) { return p.options.policy; })
      .def_property_readonly("weights_dtype", [](const PyForwardProblem& p) { return p.weights.dtype(); })
      .def_property_readonly("index_dtype", [](const PyForwardProblem& p) { return p.indices.dtype(); })
      .def_property_readonly("num_features",
                             [](const PyForwardProblem& p) { return p.feature_table_map.size(); })
      .def_property_readonly("num_tables", [](const PyForwardProblem& p) { return p.rows.size(); })
      .def_property_readonly("num_indices", [](const PyForwardProblem& p) { return p.indices.numel(); })
      .def_property_readonly("output_shape", &PyForwardProblem::output_shape,
                             "pooled [B, sum_f D_f], NONE [N, D], VBE [numel] (1-D)")
      .def("__repr__", [](const PyForwardProblem& p) {
        return "<ForwardProblem T=" + s(static_cast<std::int64_t>(p.feature_table_map.size())) +
               " tables=" + s(static_cast<std::int64_t>(p.rows.size())) +
               " N=" + s(p.indices.numel()) + " output " + shape_text(p.output_shape()) + " " +
               to_string(p.options.pooling) + " bounds_check=" +
               to_string(p.options.bounds_check) + " " + to_string(p.options.policy) +
               (p.per_sample_weights ? " weighted" : "") + ">";
      });

  m.def(
      "forward_reference",
      [](const PyForwardProblem& p) {
        void* out = nullptr;
        py::object a = new_array(p.options.policy.output, p.output_shape(), &out);
        const ForwardProblem view = p.view();
        py::gil_scoped_release nogil;
        forward_reference(view, out);
        return a;
      },
      py::arg("problem"),
      "The reference forward (tbe::forward_reference): the FP64 sum of every bag in index order "
      "(1/L for MEAN; empty bag -> 0), rounded once to policy.output. Returns a new NumPy array of "
      "problem.output_shape (bf16 as uint16 bits). Applies the bounds check first: FATAL raises "
      "BoundsCheckError; WARNING / IGNORE repair (repair() gives the counts).");
  m.def(
      "forward_reference_fp64",
      [](const PyForwardProblem& p) {
        const ForwardProblem view = p.view();
        std::vector<double> v;
        {
          py::gil_scoped_release nogil;
          v = forward_reference_fp64(view);
        }
        return fp64_array(p.output_shape(), v);
      },
      py::arg("problem"),
      "The FP64 reference values before output rounding (float64, problem.output_shape).");

  py::class_<RepairResult>(m, "RepairResult",
                           "The bounds check / repair of a forward problem (tbe::repair): "
                           "repaired int64 offsets and indices and the warning counts.")
      .def_property_readonly("offsets",
                             [](const RepairResult& r) {
                               return make_array({static_cast<std::int64_t>(r.offsets.size())},
                                                 std::span<const std::int64_t>(r.offsets));
                             })
      .def_property_readonly("indices",
                             [](const RepairResult& r) {
                               return make_array({static_cast<std::int64_t>(r.indices.size())},
                                                 std::span<const std::int64_t>(r.indices));
                             })
      .def_readonly("warnings", &RepairResult::warnings,
                    "repaired bags + repaired last offset + repaired indices")
      .def_readonly("bad_bags", &RepairResult::bad_bags)
      .def_readonly("bad_last_offset", &RepairResult::bad_last_offset)
      .def_readonly("bad_indices", &RepairResult::bad_indices);
  m.def(
      "repair",
      [](const PyForwardProblem& p) {
        const ForwardProblem view = p.view();
        py::gil_scoped_release nogil;
        return repair(view);
      },
      py::arg("problem"),
      "Applies problem.bounds_check (docs/semantics.md 'Bounds check'): FATAL raises "
      "BoundsCheckError for the first offender, WARNING / IGNORE repair with the max-scan rule "
      "and count, NONE returns the input. `warnings` is the count a forward call reports.");
  m.def(
      "find_first_violation",
      [](const PyForwardProblem& p) -> py::object {
        const ForwardProblem view = p.view();
        std::optional<BoundsViolation> v;
        {
          py::gil_scoped_release nogil;
          v = find_first_violation(view);
        }
        return v ? py::cast(*v) : py::none();
      },
      py::arg("problem"),
      "The first bad bag, last offset or index in offender order (a BoundsViolation), or None.");

  py::class_<oracle::ForwardEnclosures>(m, "ForwardEnclosures",
                                        "Per-element enclosures [lo, hi] of a forward output "
                                        "and the FP64 reference values (float64 arrays, flat).")
      .def_property_readonly("lo",
                             [](const oracle::ForwardEnclosures& e) {
                               std::vector<double> v;
                               for (const auto& x : e.enclosures) v.push_back(x.lo);
                               return fp64_array({static_cast<std::int64_t>(v.size())}, v);
                             })
      .def_property_readonly("hi",
                             [](const oracle::ForwardEnclosures& e) {
                               std::vector<double> v;
                               for (const auto& x : e.enclosures) v.push_back(x.hi);
                               return fp64_array({static_cast<std::int64_t>(v.size())}, v);
                             })
      .def_property_readonly("reference", [](const oracle::ForwardEnclosures& e) {
        return fp64_array({static_cast<std::int64_t>(e.reference.size())}, e.reference);
      });
  m.def(
      "forward_enclosures",
      [](const PyForwardProblem& p, const std::string& bound, double false_alarm_probability) {
        const oracle::EnclosureOptions o = enclosure_options(bound, false_alarm_probability);
        const ForwardProblem view = p.view();
        py::gil_scoped_release nogil;
        return oracle::compute_forward_enclosures(view, o);
      },
      py::arg("problem"), py::kw_only(), py::arg("bound") = "worst-case",
      py::arg("false_alarm_probability") = 1e-9,
      "The oracle's enclosures of every output element (docs/oracle.md): every result a "
      "conforming implementation may store under problem.policy, whatever its summation order. "
      "bound='worst-case' (rigorous) or 'probabilistic' (Higham & Mary; random data only).");
  m.def(
      "check_forward",
      [](const PyForwardProblem& p, py::handle output, const std::string& bound,
         double false_alarm_probability) {
        const oracle::EnclosureOptions o = enclosure_options(bound, false_alarm_probability);
        HostTensor out = HostTensor::borrow(output, "output");
        out.expect_dtype(p.options.policy.output, "policy.output");
        const ForwardProblem view = p.view();
        out.expect_numel(make_output_layout(view).numel,
                         "the forward output (shape " + shape_text(p.output_shape()) + ")");
        const std::vector<double> values = out.to_double();
        py::gil_scoped_release nogil;
        const oracle::ForwardEnclosures enc = oracle::compute_forward_enclosures(view, o);
        return oracle::judge_forward(view, enc, values);
      },
      py::arg("problem"), py::arg("output"), py::kw_only(), py::arg("bound") = "worst-case",
      py::arg("false_alarm_probability") = 1e-9,
      "Judges an implementation's forward output (any shape with the output's element count, "
      "dtype policy.output; bf16 as uint16 bits or torch bfloat16) against the enclosures: each "
      "element must lie in [lo, hi] and be a value of the output type. Returns a CheckReport "
      "(passed, worst element with coordinates, interval, value, position, FP64 reference). "
      "FATAL problems with a bad index raise BoundsCheckError, as the operator does.");
}

}  // namespace tbe::python
