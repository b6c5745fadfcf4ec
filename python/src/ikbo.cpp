// IKBO user x candidate operators (tbe/ikbo.h, tbe/oracle/ikbo_oracle.h): IkboPolicy,
// LceProblem, AttentionProblem, their reference operators and check_lce / check_attention.
#include <pybind11/stl.h>

#include <limits>

#include "bindings.h"
#include "tbe/oracle/ikbo_oracle.h"

namespace tbe::python {

using ikbo::AttentionProblem;
using ikbo::IkboPolicy;
using ikbo::LceProblem;
using ikbo::LceRounding;

namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

IkboPolicy ikbo_policy_arg(py::handle policy, DType storage) {
  if (policy.is_none()) return IkboPolicy{storage, DType::F32, LceRounding::RoundOnce};
  if (!py::isinstance<IkboPolicy>(policy))
    throw py::type_error("policy: " + std::string(py::str(py::type::of(policy).attr("__name__"))) +
                         " is not a tbe_verify.IkboPolicy");
  return policy.cast<IkboPolicy>();
}

void expect_storage(const HostTensor& t, const IkboPolicy& p) {
  t.expect_dtype(p.storage, "policy.storage");
}

/// Extent `dim` of `t` must equal `expected`, which `source` defines.
void expect_extent(const HostTensor& t, std::int64_t dim, std::int64_t expected,
                   const std::string& symbol, const std::string& source) {
  if (t.shape()[dim] != expected)
    throw InvalidArgument(t.name(), t.name() + ": shape " + t.shape_string() + " has " + symbol +
                                        " = " + s(t.shape()[dim]) + " but " + source + " has " +
                                        symbol + " = " + s(expected));
}

std::shared_ptr<PyLceProblem> make_lce_problem(py::handle w_c, py::handle w_u, py::handle e_c,
                                               py::handle e_u, py::handle cand_to_user,
                                               py::handle policy) {
  auto p = std::make_shared<PyLceProblem>();
  p->w_c = HostTensor::borrow(w_c, "w_c");
  p->w_u = HostTensor::borrow(w_u, "w_u");
  p->e_c = HostTensor::borrow(e_c, "e_c");
  p->e_u = HostTensor::borrow(e_u, "e_u");
  p->cand_to_user = HostTensor::borrow(cand_to_user, "cand_to_user");
  LceProblem& q = p->problem;
  q.policy = ikbo_policy_arg(policy, p->w_c.dtype());
  for (const HostTensor* t : {&p->w_c, &p->w_u, &p->e_c, &p->e_u}) expect_storage(*t, q.policy);
  p->w_c.expect_ndim(2);
  p->w_u.expect_ndim(2);
  p->e_c.expect_ndim(3);
  p->e_u.expect_ndim(3);
  p->cand_to_user.expect_ndim(1);
  // w_c [M, K_c], w_u [M, K_u], e_c [B, K_c, N], e_u [U, K_u, N], cand_to_user [B].
  q.M = p->w_c.shape()[0];
  q.K_c = p->w_c.shape()[1];
  q.K_u = p->w_u.shape()[1];
  q.B = p->e_c.shape()[0];
  q.N = p->e_c.shape()[2];
  q.U = p->e_u.shape()[0];
  expect_extent(p->w_u, 0, q.M, "M", "w_c");
  expect_extent(p->e_c, 1, q.K_c, "K_c", "w_c");
  expect_extent(p->e_u, 1, q.K_u, "K_u", "w_u");
  expect_extent(p->e_u, 2, q.N, "N", "e_c");
  expect_extent(p->cand_to_user, 0, q.B, "B", "e_c");
  q.w_c = p->w_c.data();
  q.w_u = p->w_u.data();
  q.e_c = p->e_c.data();
  q.e_u = p->e_u.data();
  q.cand_to_user = cand_to_user_data(p->cand_to_user, p->cand_to_user_copy);
  throw_if_error(ikbo::validate(q));
  throw_if_error(ikbo::validate_map(std::span(q.cand_to_user, static_cast<std::size_t>(q.B)), q.U));
  return p;
}

std::shared_ptr<PyAttentionProblem> make_attention_problem(py::handle q_obj, py::handle k_obj,
                                                           py::handle v_obj,
                                                           py::handle cand_to_user,
                                                           py::handle n_seed, py::handle S,
                                                           py::handle k_offsets, double scale,
                                                           py::handle policy) {
  auto p = std::make_shared<PyAttentionProblem>();
  p->q = HostTensor::borrow(q_obj, "q");
  p->k = HostTensor::borrow(k_obj, "k");
  p->v = HostTensor::borrow(v_obj, "v");
  p->cand_to_user = HostTensor::borrow(cand_to_user, "cand_to_user");
  AttentionProblem& a = p->problem;
  a.policy = ikbo_policy_arg(policy, p->q.dtype());
  for (const HostTensor* t : {&p->q, &p->k, &p->v}) {
    expect_storage(*t, a.policy);
    t->expect_ndim(3);
  }
  p->cand_to_user.expect_ndim(1);
  // q [B·n_seed, H, Dh]; k, v [keys, H, Dh]; cand_to_user [B].
  a.B = p->cand_to_user.numel();
  a.n_seed = int_arg(n_seed, "n_seed");
  a.H = p->q.shape()[1];
  a.Dh = p->q.shape()[2];
  a.scale = scale;
  if (a.n_seed < 1)
    throw InvalidArgument("n_seed", "n_seed: " + s(a.n_seed) + " must be >= 1");
  if (a.B > 0 && a.n_seed > std::numeric_limits<std::int64_t>::max() / a.B)
    throw InvalidArgument("n_seed", "n_seed: B·n_seed = " + s(a.B) + "·" + s(a.n_seed) +
                                        " overflows int64");
  expect_extent(p->q, 0, a.B * a.n_seed, "B·n_seed", "cand_to_user (B) times n_seed");
  for (HostTensor* t : {&p->k, &p->v}) {
    expect_extent(*t, 1, a.H, "H", "q");
    expect_extent(*t, 2, a.Dh, "Dh", "q");
  }
  expect_extent(p->v, 0, p->k.shape()[0], "keys", "k");
  const std::int64_t keys = p->k.shape()[0];
  if (!k_offsets.is_none()) {
    if (!S.is_none())
      throw InvalidArgument("S", "S: not used with k_offsets (jagged: user u owns keys "
                                 "[k_offsets[u], k_offsets[u+1]))");
    p->k_offsets = int64_list(k_offsets, "k_offsets");
    a.k_offsets = p->k_offsets;
    a.U = static_cast<std::int64_t>(p->k_offsets.size()) - 1;
  } else {
    if (S.is_none())
      throw InvalidArgument("S", "S: needed without k_offsets (dense: user u owns keys "
                                 "[u·S, (u+1)·S))");
    a.S = int_arg(S, "S");
    if (a.S < 1) throw InvalidArgument("S", "S: " + s(a.S) + " must be >= 1 in dense mode");
    if (keys % a.S != 0)
      throw InvalidArgument("k", "k: " + s(keys) + " keys are not a multiple of S = " + s(a.S) +
                                     " (dense: k is [U·S, H, Dh])");
    a.U = keys / a.S;
  }
  a.q = p->q.data();
  a.k = p->k.data();
  a.v = p->v.data();
  a.cand_to_user = cand_to_user_data(p->cand_to_user, p->cand_to_user_copy);
  throw_if_error(ikbo::validate(a));
  if (a.total_keys() != keys)
    throw InvalidArgument("k", "k: " + s(keys) + " keys but k_offsets[U] = " +
                                   s(a.total_keys()) + " (k and v are [k_offsets[U], H, Dh])");
  throw_if_error(ikbo::validate_map(std::span(a.cand_to_user, static_cast<std::size_t>(a.B)), a.U));
  return p;
}

}  // namespace

const std::int32_t* cand_to_user_data(const HostTensor& t, std::vector<std::int32_t>& copy) {
  if (t.dtype() == DType::I32) return static_cast<const std::int32_t*>(t.data());
  if (t.dtype() != DType::I64)
    throw py::type_error(t.name() + ": dtype " + to_string(t.dtype()) +
                         " but the candidate-to-user map needs int32 (or int64, narrowed)");
  const auto* wide = static_cast<const std::int64_t*>(t.data());
  copy.resize(static_cast<std::size_t>(t.numel()));
  for (std::int64_t b = 0; b < t.numel(); ++b) {
    if (wide[b] < std::numeric_limits<std::int32_t>::min() ||
        wide[b] > std::numeric_limits<std::int32_t>::max())
      throw InvalidArgument(t.name() + "[" + s(b) + "]", t.name() + "[" + s(b) + "]: " +
                                                             s(wide[b]) + " does not fit int32");
    copy[b] = static_cast<std::int32_t>(wide[b]);
  }
  return copy.data();
}

void check_lce_output(const LceProblem& q, const HostTensor& out) {
  out.expect_dtype(q.policy.storage, "policy.storage");
  out.expect_numel(ikbo::lce_output_numel(q), "the LCE output [B, M, N] = [" + s(q.B) + ", " +
                                                  s(q.M) + ", " + s(q.N) + "]");
}

void check_attention_output(const AttentionProblem& a, const HostTensor& out) {
  out.expect_dtype(a.policy.storage, "policy.storage");
  out.expect_numel(ikbo::attention_output_numel(a), "the attention output [B*n_seed, H, Dh] = [" +
                                                        s(a.B * a.n_seed) + ", " + s(a.H) + ", " +
                                                        s(a.Dh) + "]");
}

void bind_ikbo(py::module_& m) {
  py::enum_<LceRounding>(m, "LceRounding",
                         "Where LCE rounds to the storage type (docs/ikbo.md): PUBLISHED "
                         "('published'), ROUND_ONCE ('round-once'), USER_ROUNDED "
                         "('user-rounded').")
      .value("PUBLISHED", LceRounding::Published)
      .value("ROUND_ONCE", LceRounding::RoundOnce)
      .value("USER_ROUNDED", LceRounding::UserRounded)
      .def("__str__", [](LceRounding r) { return ikbo::to_string(r); }, py::prepend());
  m.def("parse_lce_rounding", [](const std::string& n) { return ikbo::parse_lce_rounding(n); },
        py::arg("name"));

  py::class_<IkboPolicy>(m, "IkboPolicy",
                         "Precision policy of an IKBO call (tbe::ikbo::IkboPolicy): storage "
                         "type of every input and the output (fp16 / bf16 / fp32), "
                         "accumulation type (fp32; fp64 for the reference), LCE rounding "
                         "points.")
      .def(py::init([](py::handle storage, py::handle accumulation, py::handle lce_rounding) {
             return IkboPolicy{dtype_arg(storage, "storage"), dtype_arg(accumulation, "accumulation"),
                               enum_arg<LceRounding>(lce_rounding, "lce_rounding",
                                                     ikbo::parse_lce_rounding)};
           }),
           py::kw_only(), py::arg("storage") = "fp16", py::arg("accumulation") = "fp32",
           py::arg("lce_rounding") = "round-once")
      .def_readonly("storage", &IkboPolicy::storage)
      .def_readonly("accumulation", &IkboPolicy::accumulation)
      .def_readonly("lce_rounding", &IkboPolicy::lce_rounding)
      .def("__eq__", [](const IkboPolicy& a, const IkboPolicy& b) { return a == b; })
      .def("__str__", [](const IkboPolicy& p) { return ikbo::to_string(p); });

  py::class_<PyLceProblem, std::shared_ptr<PyLceProblem>>(
      m, "LceProblem",
      R"doc(One IKBO linear compression (tbe::ikbo::LceProblem, docs/ikbo.md "LCE"):
out[b] = w_c @ e_c[b] + w_u @ e_u[cand_to_user[b]].
w_c [M, K_c], w_u [M, K_u], e_c [B, K_c, N], e_u [U, K_u, N] of policy.storage (K_u = 0: pass
[M, 0] and [U, 0, N] arrays); cand_to_user [B] int32 (int64 is narrowed, checked) in [0, U).
policy: an IkboPolicy (default: storage = w_c's dtype, fp32 accumulation, round-once).
B, U, M, N, K_c, K_u come from the shapes, which must agree. The attributes w_c, w_u, e_c, e_u,
cand_to_user return the objects given.)doc")
      .def(py::init(&make_lce_problem), py::arg("w_c"), py::arg("w_u"), py::arg("e_c"),
           py::arg("e_u"), py::arg("cand_to_user"), py::kw_only(), py::arg("policy") = py::none())
      .def_property_readonly("w_c", [](const PyLceProblem& p) { return p.w_c.source(); })
      .def_property_readonly("w_u", [](const PyLceProblem& p) { return p.w_u.source(); })
      .def_property_readonly("e_c", [](const PyLceProblem& p) { return p.e_c.source(); })
      .def_property_readonly("e_u", [](const PyLceProblem& p) { return p.e_u.source(); })
      .def_property_readonly("cand_to_user",
                             [](const PyLceProblem& p) { return p.cand_to_user.source(); })
      .def_property_readonly("B", [](const PyLceProblem& p) { return p.problem.B; })
      .def_property_readonly("U", [](const PyLceProblem& p) { return p.problem.U; })
      .def_property_readonly("M", [](const PyLceProblem& p) { return p.problem.M; })
      .def_property_readonly("N", [](const PyLceProblem& p) { return p.problem.N; })
      .def_property_readonly("K_c", [](const PyLceProblem& p) { return p.problem.K_c; })
      .def_property_readonly("K_u", [](const PyLceProblem& p) { return p.problem.K_u; })
      .def_property_readonly("policy", [](const PyLceProblem& p) { return p.problem.policy; })
      .def_property_readonly("output_shape", [](const PyLceProblem& p) {
        return std::vector<std::int64_t>{p.problem.B, p.problem.M, p.problem.N};
      });

  py::class_<PyAttentionProblem, std::shared_ptr<PyAttentionProblem>>(
      m, "AttentionProblem",
      R"doc(One IKBO cross attention (tbe::ikbo::AttentionProblem, docs/ikbo.md "Attention"):
the n_seed queries of candidate b attend to the keys of user cand_to_user[b].
q [B*n_seed, H, Dh]; k, v [keys, H, Dh] of policy.storage; cand_to_user [B] int32 (or int64).
Dense: S keys per user (U = keys / S). Jagged: k_offsets [U + 1] non-decreasing from 0, user u
owns keys [k_offsets[u], k_offsets[u+1]) (an empty range gives zeros). scale 0 = 1/sqrt(Dh).
The attributes q, k, v, cand_to_user return the objects given.)doc")
      .def(py::init(&make_attention_problem), py::arg("q"), py::arg("k"), py::arg("v"),
           py::arg("cand_to_user"), py::kw_only(), py::arg("n_seed") = 1,
           py::arg("S") = py::none(), py::arg("k_offsets") = py::none(), py::arg("scale") = 0.0,
           py::arg("policy") = py::none())
      .def_property_readonly("q", [](const PyAttentionProblem& p) { return p.q.source(); })
      .def_property_readonly("k", [](const PyAttentionProblem& p) { return p.k.source(); })
      .def_property_readonly("v", [](const PyAttentionProblem& p) { return p.v.source(); })
      .def_property_readonly("cand_to_user",
                             [](const PyAttentionProblem& p) { return p.cand_to_user.source(); })
      .def_property_readonly(
          "k_offsets",
          [](const PyAttentionProblem& p) -> py::object {
            if (!p.problem.jagged()) return py::none();
            return make_array({static_cast<std::int64_t>(p.k_offsets.size())},
                              std::span<const std::int64_t>(p.k_offsets));
          },
          "jagged: a new int64 array [U + 1] of the key offsets; dense: None")
      .def_property_readonly("B", [](const PyAttentionProblem& p) { return p.problem.B; })
      .def_property_readonly("U", [](const PyAttentionProblem& p) { return p.problem.U; })
      .def_property_readonly("n_seed", [](const PyAttentionProblem& p) { return p.problem.n_seed; })
      .def_property_readonly("H", [](const PyAttentionProblem& p) { return p.problem.H; })
      .def_property_readonly("Dh", [](const PyAttentionProblem& p) { return p.problem.Dh; })
      .def_property_readonly("S", [](const PyAttentionProblem& p) { return p.problem.S; })
      .def_property_readonly("jagged", [](const PyAttentionProblem& p) { return p.problem.jagged(); })
      .def_property_readonly("scale",
                             [](const PyAttentionProblem& p) { return ikbo::attention_scale(p.problem); },
                             "the scale in effect (1/sqrt(Dh) when 0 was given)")
      .def_property_readonly("policy", [](const PyAttentionProblem& p) { return p.problem.policy; })
      .def_property_readonly("output_shape", [](const PyAttentionProblem& p) {
        return std::vector<std::int64_t>{p.problem.B * p.problem.n_seed, p.problem.H, p.problem.Dh};
      });

  m.def(
      "lce_reference",
      [](const PyLceProblem& p) {
        const LceProblem& q = p.problem;
        void* out = nullptr;
        py::object a = new_array(q.policy.storage, {q.B, q.M, q.N}, &out);
        py::gil_scoped_release nogil;
        ikbo::lce_reference(q, out);
        return a;
      },
      py::arg("problem"),
      "The CPU reference LCE: FP64 parts rounded per policy.lce_rounding to policy.storage "
      "(a new [B, M, N] array; bf16 as uint16 bits).");
  m.def(
      "lce_reference_fp64",
      [](const PyLceProblem& p) {
        const LceProblem& q = p.problem;
        ikbo::LceReference r;
        {
          py::gil_scoped_release nogil;
          r = ikbo::lce_reference_fp64(q);
        }
        const std::vector<std::int64_t> shape{q.B, q.M, q.N};
        py::dict d;
        d["candidate_part"] = make_array(shape, std::span<const double>(r.candidate_part));
        d["user_part"] = make_array(shape, std::span<const double>(r.user_part));
        d["out"] = make_array(shape, std::span<const double>(r.out));
        return d;
      },
      py::arg("problem"),
      "The FP64 LCE: a dict of float64 [B, M, N] arrays 'candidate_part', 'user_part', 'out'.");
  m.def(
      "check_lce",
      [](const PyLceProblem& p, py::handle output) {
        const LceProblem& q = p.problem;
        HostTensor out = HostTensor::borrow(output, "output");
        check_lce_output(q, out);
        const std::vector<double> values = out.to_double();
        py::gil_scoped_release nogil;
        return oracle::check_lce_values(q, values);
      },
      py::arg("problem"), py::arg("output"),
      "Judges an LCE output (B*M*N elements of policy.storage) against the oracle's enclosures "
      "(any GEMM order or blocking in the accumulation type, at the policy's rounding points). "
      "Returns a CheckReport (coordinates: sample = b, row = m, column = n).");

  m.def(
      "attention_reference",
      [](const PyAttentionProblem& p) {
        const AttentionProblem& a = p.problem;
        void* out = nullptr;
        py::object arr = new_array(a.policy.storage, {a.B * a.n_seed, a.H, a.Dh}, &out);
        py::gil_scoped_release nogil;
        ikbo::attention_reference(a, out);
        return arr;
      },
      py::arg("problem"),
      "The CPU reference attention: FP64 max-subtracted softmax, rounded once to policy.storage "
      "(a new [B*n_seed, H, Dh] array).");
  m.def(
      "attention_reference_fp64",
      [](const PyAttentionProblem& p) {
        const AttentionProblem& a = p.problem;
        std::vector<double> v;
        {
          py::gil_scoped_release nogil;
          v = ikbo::attention_reference_fp64(a);
        }
        return make_array({a.B * a.n_seed, a.H, a.Dh}, std::span<const double>(v));
      },
      py::arg("problem"), "The FP64 attention output, float64 [B*n_seed, H, Dh].");
  m.def(
      "check_attention",
      [](const PyAttentionProblem& p, py::handle output) {
        const AttentionProblem& a = p.problem;
        HostTensor out = HostTensor::borrow(output, "output");
        check_attention_output(a, out);
        const std::vector<double> values = out.to_double();
        py::gil_scoped_release nogil;
        return oracle::check_attention_values(a, values);
      },
      py::arg("problem"), py::arg("output"),
      "Judges an attention output against the enclosures of an FA-style kernel (online softmax "
      "over key blocks of any size, either order, P optionally rounded to storage). Returns a "
      "CheckReport (coordinates: row = query row, sample = b, head = h, column = d).");
}

}  // namespace tbe::python
