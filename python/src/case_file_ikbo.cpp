// IKBO case folders (operators "ikbo-lce" and "ikbo-attention", tbe/io/ikbo_case_file.h,
// docs/case-files.md "IKBO"): MapKind, IkboRecordedOutput, LceCaseFile, AttentionCaseFile.
#include <pybind11/stl.h>

#include "case_file.h"

namespace tbe::python {
namespace {

using namespace pybind11::literals;

py::object map_array(const std::vector<std::int32_t>& cand_to_user) {
  return make_array({static_cast<std::int64_t>(cand_to_user.size())},
                    std::span<const std::int32_t>(cand_to_user));
}

/// The recorded output of a read case as an array of the output's shape.
std::optional<PyIkboRecorded> recorded_of(const std::optional<io::IkboRecordedOutput>& in,
                                          DType storage, const std::vector<std::int64_t>& shape) {
  if (!in) return std::nullopt;
  PyIkboRecorded r{in->implementation, py::none(), in->error};
  if (in->output) r.output = make_array(storage, shape, in->output->data());
  return r;
}

/// The recorded output of a Python case, checked against the problem by `check_output`.
template <class Problem, class Check>
std::optional<io::IkboRecordedOutput> recorded_of(const std::optional<PyIkboRecorded>& in,
                                                  const Problem& p, Check check_output) {
  if (!in) return std::nullopt;
  io::IkboRecordedOutput r{in->implementation, std::nullopt, in->error};
  if (!in->output.is_none()) {
    HostTensor out = HostTensor::borrow(in->output, "recorded.output");
    check_output(p, out);
    r.output = bytes_of(out);
  }
  return r;
}

template <class Problem>
void bind_ikbo_case_file(py::module_& m, const char* cls, io::CaseOperator op, const char* doc) {
  using C = PyIkboCaseFile<Problem>;
  py::class_<C>(m, cls, doc)
      .def(py::init([](py::object problem, std::string name, std::string provenance,
                       std::uint64_t seed, py::handle map, std::optional<PyIkboRecorded> recorded,
                       std::optional<io::Expectation> expect) {
             return C{std::move(name), std::move(provenance), seed, std::move(problem),
                      enum_arg<ikbo::MapKind>(map, "map",
                                              [](const std::string& s, const char* what) {
                                                return ikbo::parse_map_kind(s, what);
                                              }),
                      std::move(recorded), std::move(expect)};
           }),
           py::arg("problem"), py::kw_only(), py::arg("name") = "", py::arg("provenance") = "",
           py::arg("seed") = 0, py::arg("map") = "unsorted", py::arg("recorded") = py::none(),
           py::arg("expect") = py::none())
      .def_property_readonly("operator", [op](const C&) { return io::to_string(op); })
      .def_readwrite("name", &C::name)
      .def_readwrite("provenance", &C::provenance)
      .def_readwrite("seed", &C::seed)
      .def_readwrite("problem", &C::problem)
      .def_readwrite("map", &C::map)
      .def_readwrite("recorded", &C::recorded)
      .def_readwrite("expect", &C::expect);
}

}  // namespace

py::object to_python(io::LceCaseFile& c) {
  const ikbo::LceCase& k = c.problem;
  const ikbo::LceShape& sh = k.shape;
  const DType t = k.policy.storage;
  py::object problem = module_class("LceProblem")(
      make_array(t, {sh.M, sh.K_c}, k.w_c.data()), make_array(t, {sh.M, sh.K_u}, k.w_u.data()),
      make_array(t, {sh.B, sh.K_c, sh.N}, k.e_c.data()),
      make_array(t, {sh.U, sh.K_u, sh.N}, k.e_u.data()), map_array(k.cand_to_user),
      "policy"_a = k.policy);
  return py::cast(PyLceCaseFile{c.name, c.provenance, c.seed, problem, k.map,
                                recorded_of(c.recorded, t, {sh.B, sh.M, sh.N}), c.expect});
}

py::object to_python(io::AttentionCaseFile& c) {
  const ikbo::AttentionCase& k = c.problem;
  const ikbo::AttentionShape& sh = k.shape;
  const DType t = k.policy.storage;
  py::dict kw;
  kw["n_seed"] = sh.n_seed;
  kw["scale"] = sh.scale;
  kw["policy"] = k.policy;
  std::int64_t keys = 0;
  if (sh.jagged) {
    kw["k_offsets"] = make_array({sh.U + 1}, std::span<const std::int64_t>(k.k_offsets));
    keys = k.k_offsets.back();
  } else {
    kw["S"] = sh.S;
    keys = sh.U * sh.S;  // read_attention_case checked the product
  }
  py::object problem = module_class("AttentionProblem")(
      make_array(t, {sh.B * sh.n_seed, sh.H, sh.Dh}, k.q.data()),
      make_array(t, {keys, sh.H, sh.Dh}, k.k.data()), make_array(t, {keys, sh.H, sh.Dh}, k.v.data()),
      map_array(k.cand_to_user), **kw);
  return py::cast(PyAttentionCaseFile{c.name, c.provenance, c.seed, problem, k.map,
                                      recorded_of(c.recorded, t, {sh.B * sh.n_seed, sh.H, sh.Dh}),
                                      c.expect});
}

io::LceCaseFile to_io(const PyLceCaseFile& c) {
  const auto& p = problem_as<PyLceProblem>(c.problem, "LceProblem");
  const ikbo::LceProblem& q = p.problem;
  io::LceCaseFile out{c.name, c.provenance, c.seed, {}, recorded_of(c.recorded, q, check_lce_output), c.expect};
  ikbo::LceCase& k = out.problem;
  k.shape = ikbo::LceShape{.B = q.B, .U = q.U, .M = q.M, .N = q.N, .K_c = q.K_c, .K_u = q.K_u};
  k.policy = q.policy;
  k.map = c.map;
  k.w_c = bytes_of(p.w_c);
  k.w_u = bytes_of(p.w_u);
  k.e_c = bytes_of(p.e_c);
  k.e_u = bytes_of(p.e_u);
  k.cand_to_user.assign(q.cand_to_user, q.cand_to_user + q.B);
  return out;
}

io::AttentionCaseFile to_io(const PyAttentionCaseFile& c) {
  const auto& p = problem_as<PyAttentionProblem>(c.problem, "AttentionProblem");
  const ikbo::AttentionProblem& a = p.problem;
  io::AttentionCaseFile out{c.name, c.provenance, c.seed, {},
                            recorded_of(c.recorded, a, check_attention_output), c.expect};
  ikbo::AttentionCase& k = out.problem;
  k.shape = ikbo::AttentionShape{.B = a.B, .U = a.U, .n_seed = a.n_seed, .H = a.H, .Dh = a.Dh,
                                 .S = a.S, .jagged = a.jagged(), .lengths = {}, .scale = a.scale};
  k.k_offsets = p.k_offsets;
  for (std::size_t u = 0; u + 1 < k.k_offsets.size(); ++u)
    k.shape.lengths.push_back(k.k_offsets[u + 1] - k.k_offsets[u]);
  k.policy = a.policy;
  k.map = c.map;
  k.q = bytes_of(p.q);
  k.k = bytes_of(p.k);
  k.v = bytes_of(p.v);
  k.cand_to_user.assign(a.cand_to_user, a.cand_to_user + a.B);
  return out;
}

void bind_ikbo_case_files(py::module_& m) {
  using ikbo::MapKind;
  py::enum_<MapKind>(m, "MapKind",
                     "How an IKBO case's candidate-to-user map was generated (tbe::ikbo::MapKind, "
                     "docs/ikbo.md; case.json 'map', provenance only, never checked against the "
                     "map): SORTED ('sorted'), UNSORTED ('unsorted': also a map of no particular "
                     "kind), USERS_WITHOUT_CANDIDATES ('users-without-candidates'), ONE_USER "
                     "('one-user'), USER_PER_CANDIDATE ('u-eq-b').")
      .value("SORTED", MapKind::Sorted)
      .value("UNSORTED", MapKind::Unsorted)
      .value("USERS_WITHOUT_CANDIDATES", MapKind::UsersWithoutCandidates)
      .value("ONE_USER", MapKind::OneUser)
      .value("USER_PER_CANDIDATE", MapKind::UserPerCandidate)
      .def("__str__", [](MapKind k) { return ikbo::to_string(k); }, py::prepend());

  py::class_<PyIkboRecorded>(
      m, "IkboRecordedOutput",
      "What an implementation produced for an IKBO case: implementation (text), output (an "
      "array of policy.storage with the output's element count in any shape: LCE [B, M, N], "
      "attention [B*n_seed, H, Dh]; read back in that shape; or None), error "
      "('invalid_argument', 'device_error' or None). Exactly one of output and error.")
      .def(py::init([](std::string implementation, py::object output,
                       std::optional<std::string> error) {
             return PyIkboRecorded{std::move(implementation), std::move(output), std::move(error)};
           }),
           py::kw_only(), py::arg("implementation") = "", py::arg("output") = py::none(),
           py::arg("error") = py::none())
      .def_readwrite("implementation", &PyIkboRecorded::implementation)
      .def_readwrite("output", &PyIkboRecorded::output)
      .def_readwrite("error", &PyIkboRecorded::error);

  bind_ikbo_case_file<PyLceProblem>(
      m, "LceCaseFile", io::CaseOperator::IkboLce,
      "An IKBO linear-compression case folder (operator 'ikbo-lce', docs/case-files.md): name, "
      "provenance, seed, problem (an LceProblem; its tensors are stored in their exact shapes), "
      "map (a MapKind or its name, default 'unsorted'), recorded (IkboRecordedOutput or None), "
      "expect (Expectation or None). Judge a read case with check_lce(case.problem, "
      "case.recorded.output).");
  bind_ikbo_case_file<PyAttentionProblem>(
      m, "AttentionCaseFile", io::CaseOperator::IkboAttention,
      "An IKBO cross-attention case folder (operator 'ikbo-attention', docs/case-files.md): as "
      "LceCaseFile with problem an AttentionProblem (dense: S stored; jagged: k_offsets stored, "
      "S written as 0, so a generator's mean length is not kept). Judge a read case with "
      "check_attention(case.problem, case.recorded.output).");
}

}  // namespace tbe::python
