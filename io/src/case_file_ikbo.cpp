// IKBO case folders (docs/case-files.md "IKBO"): ikbo-lce and ikbo-attention. Untrusted input:
// every key checked, shape products checked against int64 and the .npy limit before any tensor is
// read, every tensor under its fixed name in its exact shape, then ikbo::validate and
// ikbo::validate_map on the assembled problem.
#include "tbe/io/ikbo_case_file.h"

#include "case_file_internal.h"

namespace tbe::io {

using namespace detail;

namespace {

constexpr std::initializer_list<const char*> kIkboErrors = {"invalid_argument", "device_error"};

std::string s64(std::int64_t v) { return std::to_string(v); }

// --- reading ---

ikbo::IkboPolicy read_policy(const Reader& r, const json& j) {
  const json& pj = r.object(j, "", "policy");
  r.only_keys(pj, "policy", {"storage", "accumulation", "lce_rounding"});
  ikbo::IkboPolicy pol;
  auto dt = [](const std::string& x, const char* w) { return parse_dtype(x, w); };
  pol.storage = r.parse_enum(pj, "policy", "storage", dt);
  if (pol.storage != DType::F16 && pol.storage != DType::BF16 && pol.storage != DType::F32)
    r.fail("policy.storage", "'" + to_string(pol.storage) + "' is not a storage type (allowed: fp16, bf16, fp32)");
  pol.accumulation = r.parse_enum(pj, "policy", "accumulation", dt);
  if (pol.accumulation != DType::F32 && pol.accumulation != DType::F64)
    r.fail("policy.accumulation", "'" + to_string(pol.accumulation) + "' is not an accumulation type (allowed: fp32, fp64)");
  pol.lce_rounding = r.parse_enum(pj, "policy", "lce_rounding", [](const std::string& x, const char* w) {
    return ikbo::parse_lce_rounding(x, w);
  });
  return pol;
}

ikbo::MapKind read_map_kind(const Reader& r, const json& j) {
  return r.parse_enum(j, "", "map", [](const std::string& x, const char* w) { return ikbo::parse_map_kind(x, w); });
}

// The product of `factors` (element counts), failing on int64 overflow naming `key`.
std::int64_t product(const Reader& r, const std::string& key, const std::string& formula,
                     std::initializer_list<std::int64_t> factors) {
  std::string text;
  for (std::int64_t f : factors) {
    if (f == 0) return 0;
    text += (text.empty() ? "" : "·") + s64(f);
  }
  std::int64_t n = 1;
  for (std::int64_t f : factors) {
    if (n > kI64 / f) r.fail(key, formula + " = " + text + " overflows int64");
    n *= f;
  }
  return n;
}

// a·b for a shape the writer stores (in-memory cases are trusted less than validated ones).
std::int64_t shape_mul(std::int64_t a, std::int64_t b, const std::string& key) {
  if (a < 0 || b < 0 || (a != 0 && b > kI64 / a))
    throw InvalidArgument(key, "write_case: " + key + ": " + s64(a) + "·" + s64(b) + " is negative or overflows int64");
  return a * b;
}

// One storage tensor of exactly `shape` (numel = prod(shape), already overflow-checked).
std::vector<std::byte> storage_tensor(const fs::path& d, const char* file, const std::string& key,
                                      DType storage, std::int64_t numel, const std::string& shape_why,
                                      std::vector<std::int64_t> shape) {
  return load_tensor(d, file, key, npy_descr(storage), "policy.storage " + to_string(storage), numel,
                     shape_why, ShapeRule::Exact, shape)
      .data;
}

std::vector<std::int32_t> read_map(const fs::path& d, std::int64_t B, std::int64_t U) {
  std::vector<std::int32_t> map = int32_values(
      load_tensor(d, kCandToUserFile, "cand_to_user", "<i4", "the map (int32)", B, "[B]", ShapeRule::Exact, {B}));
  if (const Status st = ikbo::validate_map(map, U); !st.ok())
    throw InvalidArgument(st.argument, (d / kCandToUserFile).string() + ": " + st.message);
  return map;
}

std::optional<IkboRecordedOutput> read_recorded(const Reader& r, const json& j, const fs::path& d,
                                                DType storage, std::int64_t numel,
                                                const std::string& numel_why) {
  const json* rj = r.optional_member(j, "recorded");
  if (rj == nullptr) return std::nullopt;
  if (!rj->is_object()) r.fail("recorded", "expected an object, got " + type_name(*rj));
  r.only_keys(*rj, "recorded", {"implementation", "output", "error"});
  IkboRecordedOutput rec;
  rec.implementation = r.string(*rj, "recorded", "implementation");
  rec.error = read_recorded_error(r, *rj, kIkboErrors);
  if (r.file_or_null(*rj, "recorded", "output", kOutputFile)) {
    if (rec.error) r.fail("recorded.output", "an output together with error '" + *rec.error + "'");
    rec.output = load_tensor(d, kOutputFile, "recorded.output", npy_descr(storage),
                             "policy.storage " + to_string(storage), numel, numel_why, ShapeRule::AnyShape)
                     .data;
  } else if (!rec.error) {
    r.fail("recorded.output", "null, but recorded.error is null too (record an output or an error)");
  }
  return rec;
}

// --- writing ---

ojson policy_json(const ikbo::IkboPolicy& p) {
  return {{"storage", to_string(p.storage)},
          {"accumulation", to_string(p.accumulation)},
          {"lce_rounding", ikbo::to_string(p.lce_rounding)}};
}

// Writes `data` as an array of `shape` after checking it holds prod(shape) elements of t.
void write_exact(const fs::path& d, const char* file, const std::string& key, DType t,
                 const std::vector<std::int64_t>& shape, const void* data, std::size_t bytes,
                 std::set<std::string>& written) {
  std::int64_t n = 1;
  for (std::int64_t x : shape) {
    if (x < 0 || (x != 0 && n > std::numeric_limits<std::int64_t>::max() / x))
      throw InvalidArgument(key, "write_case: " + key + ": dimension " + s64(x) + " is negative or overflows int64");
    n *= x;
  }
  if (bytes / dtype_size(t) != static_cast<std::uint64_t>(n) || bytes % dtype_size(t) != 0)
    throw InvalidArgument(key, "write_case: " + key + ": " + std::to_string(bytes) + " bytes != " + s64(n) +
                                   " elements of " + to_string(t) + " required by the shape");
  write_shaped_tensor(d, file, t, shape, data, written);
}

void put_recorded(ojson& j, const std::optional<IkboRecordedOutput>& rec) {
  if (!rec) return;
  check_recorded_error(rec->error, kIkboErrors, "write_case");
  if (rec->output && rec->error)
    throw InvalidArgument("recorded.error", "write_case: recorded output together with error '" + *rec->error + "' (record one or the other)");
  if (!rec->output && !rec->error)
    throw InvalidArgument("recorded.output", "write_case: recorded neither an output nor an error");
  j["recorded"] = {{"implementation", rec->implementation},
                   {"output", rec->output ? ojson(kOutputFile) : ojson(nullptr)},
                   {"error", rec->error ? ojson(*rec->error) : ojson(nullptr)}};
}

void write_recorded(const fs::path& d, const std::optional<IkboRecordedOutput>& rec, DType storage,
                    const std::vector<std::int64_t>& shape, std::set<std::string>& written) {
  if (rec && rec->output)
    write_exact(d, kOutputFile, "recorded.output", storage, shape, rec->output->data(), rec->output->size(), written);
}

bool same_recorded(const std::optional<IkboRecordedOutput>& a, const std::optional<IkboRecordedOutput>& b) {
  return a.has_value() == b.has_value() &&
         (!a || (a->implementation == b->implementation && a->output == b->output && a->error == b->error));
}

}  // namespace

// ---- ikbo-lce --------------------------------------------------------------------------------

void write_case(const std::string& dir, const LceCaseFile& c) {
  const ikbo::LceCase& p = c.problem;
  const ikbo::LceShape& sh = p.shape;
  ojson j = header_json({c.name, c.provenance, c.seed}, CaseOperator::IkboLce);
  j["shape"] = {{"B", sh.B}, {"U", sh.U}, {"M", sh.M}, {"N", sh.N}, {"K_c", sh.K_c}, {"K_u", sh.K_u}};
  j["map"] = ikbo::to_string(p.map);
  j["policy"] = policy_json(p.policy);
  put_recorded(j, c.recorded);
  put_expect(j, c.expect);

  const fs::path d = make_case_dir(dir);
  std::set<std::string> written;
  const DType st = p.policy.storage;
  write_exact(d, kWcFile, "w_c", st, {sh.M, sh.K_c}, p.w_c.data(), p.w_c.size(), written);
  write_exact(d, kWuFile, "w_u", st, {sh.M, sh.K_u}, p.w_u.data(), p.w_u.size(), written);
  write_exact(d, kEcFile, "e_c", st, {sh.B, sh.K_c, sh.N}, p.e_c.data(), p.e_c.size(), written);
  write_exact(d, kEuFile, "e_u", st, {sh.U, sh.K_u, sh.N}, p.e_u.data(), p.e_u.size(), written);
  write_exact(d, kCandToUserFile, "cand_to_user", DType::I32, {sh.B}, p.cand_to_user.data(),
              p.cand_to_user.size() * sizeof(std::int32_t), written);
  write_recorded(d, c.recorded, st, {sh.B, sh.M, sh.N}, written);
  finish_case_dir(d, j, written);
}

namespace detail {

LceCaseFile read_lce_json(const CaseJson& cj) {
  const Reader r(cj.jname);
  const json& j = cj.j;
  const CaseHeader h = read_header(r, j, CaseOperator::IkboLce,
                                   {"format", "version", "name", "provenance", "seed", "operator",
                                    "shape", "map", "policy", "recorded", "expect"});
  LceCaseFile c;
  c.name = h.name;
  c.provenance = h.provenance;
  c.seed = h.seed;
  ikbo::LceCase& p = c.problem;
  ikbo::LceShape& sh = p.shape;
  const json& sj = r.object(j, "", "shape");
  r.only_keys(sj, "shape", {"B", "U", "M", "N", "K_c", "K_u"});
  sh.B = r.integer(sj, "shape", "B", 0, kI64);
  sh.U = r.integer(sj, "shape", "U", 1, kI64);
  sh.M = r.integer(sj, "shape", "M", 1, kI64);
  sh.N = r.integer(sj, "shape", "N", 1, kI64);
  sh.K_c = r.integer(sj, "shape", "K_c", 1, kI64);
  sh.K_u = r.integer(sj, "shape", "K_u", 0, kI64);
  p.map = read_map_kind(r, j);
  p.policy = read_policy(r, j);

  // Element counts (int64) before any tensor is read.
  const std::int64_t n_wc = product(r, "shape.K_c", "M·K_c", {sh.M, sh.K_c});
  const std::int64_t n_wu = product(r, "shape.K_u", "M·K_u", {sh.M, sh.K_u});
  const std::int64_t n_ec = product(r, "shape.B", "B·K_c·N", {sh.B, sh.K_c, sh.N});
  const std::int64_t n_eu = product(r, "shape.U", "U·K_u·N", {sh.U, sh.K_u, sh.N});
  const std::int64_t n_out = product(r, "shape.B", "B·M·N", {sh.B, sh.M, sh.N});
  const DType st = p.policy.storage;
  p.w_c = storage_tensor(cj.dir, kWcFile, "w_c", st, n_wc, "[M, K_c]", {sh.M, sh.K_c});
  p.w_u = storage_tensor(cj.dir, kWuFile, "w_u", st, n_wu, "[M, K_u]", {sh.M, sh.K_u});
  p.e_c = storage_tensor(cj.dir, kEcFile, "e_c", st, n_ec, "[B, K_c, N]", {sh.B, sh.K_c, sh.N});
  p.e_u = storage_tensor(cj.dir, kEuFile, "e_u", st, n_eu, "[U, K_u, N]", {sh.U, sh.K_u, sh.N});
  p.cand_to_user = read_map(cj.dir, sh.B, sh.U);
  if (const Status s = ikbo::validate(p.view()); !s.ok())
    throw InvalidArgument(s.argument, cj.jname + ": " + s.message);
  c.recorded = read_recorded(r, j, cj.dir, st, n_out, "B·M·N");
  c.expect = read_expect(r, j);
  return c;
}

}  // namespace detail

LceCaseFile read_lce_case(const std::string& dir) { return read_lce_json(parse_case_json(dir)); }

bool bitwise_equal(const LceCaseFile& a, const LceCaseFile& b) {
  const ikbo::LceCase& x = a.problem;
  const ikbo::LceCase& y = b.problem;
  const ikbo::LceShape& s = x.shape;
  const ikbo::LceShape& t = y.shape;
  return a.name == b.name && a.provenance == b.provenance && a.seed == b.seed && s.B == t.B &&
         s.U == t.U && s.M == t.M && s.N == t.N && s.K_c == t.K_c && s.K_u == t.K_u &&
         x.policy == y.policy && x.map == y.map && x.w_c == y.w_c && x.w_u == y.w_u &&
         x.e_c == y.e_c && x.e_u == y.e_u && x.cand_to_user == y.cand_to_user &&
         same_recorded(a.recorded, b.recorded) && a.expect == b.expect;
}

// ---- ikbo-attention --------------------------------------------------------------------------

void write_case(const std::string& dir, const AttentionCaseFile& c) {
  const ikbo::AttentionCase& p = c.problem;
  const ikbo::AttentionShape& sh = p.shape;
  if (sh.jagged != !p.k_offsets.empty())
    throw InvalidArgument("k_offsets", std::string("write_case: shape.jagged is ") + (sh.jagged ? "true" : "false") +
                                           " but k_offsets holds " + std::to_string(p.k_offsets.size()) + " values");
  if (sh.jagged && !sh.lengths.empty()) {
    bool same = sh.lengths.size() + 1 == p.k_offsets.size();
    for (std::size_t u = 0; same && u < sh.lengths.size(); ++u)
      same = sh.lengths[u] == p.k_offsets[u + 1] - p.k_offsets[u];
    if (!same) throw InvalidArgument("shape.lengths", "write_case: shape.lengths disagree with k_offsets (which the case stores)");
  }
  ojson j = header_json({c.name, c.provenance, c.seed}, CaseOperator::IkboAttention);
  j["shape"] = {{"B", sh.B},   {"U", sh.U}, {"n_seed", sh.n_seed}, {"H", sh.H}, {"Dh", sh.Dh},
                {"S", sh.S},   {"jagged", sh.jagged}, {"scale", finite_for_json(sh.scale, "shape.scale")}};
  j["map"] = ikbo::to_string(p.map);
  j["policy"] = policy_json(p.policy);
  put_recorded(j, c.recorded);
  put_expect(j, c.expect);

  const fs::path d = make_case_dir(dir);
  std::set<std::string> written;
  const DType st = p.policy.storage;
  const std::int64_t keys = sh.jagged ? p.k_offsets.back() : shape_mul(sh.U, sh.S, "shape.S");
  const std::int64_t rows_q = shape_mul(sh.B, sh.n_seed, "shape.n_seed");
  write_exact(d, kQFile, "q", st, {rows_q, sh.H, sh.Dh}, p.q.data(), p.q.size(), written);
  write_exact(d, kKFile, "k", st, {keys, sh.H, sh.Dh}, p.k.data(), p.k.size(), written);
  write_exact(d, kVFile, "v", st, {keys, sh.H, sh.Dh}, p.v.data(), p.v.size(), written);
  write_exact(d, kCandToUserFile, "cand_to_user", DType::I32, {sh.B}, p.cand_to_user.data(),
              p.cand_to_user.size() * sizeof(std::int32_t), written);
  if (sh.jagged)
    write_exact(d, kKOffsetsFile, "k_offsets", DType::I64, {sh.U + 1}, p.k_offsets.data(),
                p.k_offsets.size() * sizeof(std::int64_t), written);
  write_recorded(d, c.recorded, st, {rows_q, sh.H, sh.Dh}, written);
  finish_case_dir(d, j, written);
}

namespace detail {

AttentionCaseFile read_attention_json(const CaseJson& cj) {
  const Reader r(cj.jname);
  const json& j = cj.j;
  const CaseHeader h = read_header(r, j, CaseOperator::IkboAttention,
                                   {"format", "version", "name", "provenance", "seed", "operator",
                                    "shape", "map", "policy", "recorded", "expect"});
  AttentionCaseFile c;
  c.name = h.name;
  c.provenance = h.provenance;
  c.seed = h.seed;
  ikbo::AttentionCase& p = c.problem;
  ikbo::AttentionShape& sh = p.shape;
  const json& sj = r.object(j, "", "shape");
  r.only_keys(sj, "shape", {"B", "U", "n_seed", "H", "Dh", "S", "jagged", "scale"});
  sh.B = r.integer(sj, "shape", "B", 0, kI64);
  sh.U = r.integer(sj, "shape", "U", 1, kI64 - 1);  // k_offsets has U + 1 entries
  sh.n_seed = r.integer(sj, "shape", "n_seed", 1, kI64);
  sh.H = r.integer(sj, "shape", "H", 1, kI64);
  sh.Dh = r.integer(sj, "shape", "Dh", 1, kI64);
  // jagged first: it decides S's rule (dense: >= 1, stated as the dense rule; jagged: >= 0)
  sh.jagged = r.boolean(sj, "shape", "jagged");
  const std::int64_t s_min = sh.jagged ? 0 : std::numeric_limits<std::int64_t>::min();
  sh.S = r.integer(sj, "shape", "S", s_min, kI64);
  if (!sh.jagged && sh.S < 1)
    r.fail("shape.S", std::to_string(sh.S) + " must be >= 1 in dense mode (shape.jagged is false)");
  sh.scale = r.number(sj, "shape", "scale");
  if (sh.scale < 0.0) r.fail("shape.scale", short_json(sj["scale"]) + " must be > 0 (or 0 for 1/sqrt(Dh))");
  p.map = read_map_kind(r, j);
  p.policy = read_policy(r, j);

  std::int64_t keys = 0;
  if (sh.jagged) {
    const fs::path kpath = cj.dir / kKOffsetsFile;
    p.k_offsets = index_values(load_tensor(cj.dir, kKOffsetsFile, "k_offsets", "<i8", "the key offsets (int64)",
                                           sh.U + 1, "[U + 1]", ShapeRule::Exact, {sh.U + 1}));
    if (p.k_offsets[0] != 0)
      throw InvalidArgument("k_offsets[0]", kpath.string() + ": k_offsets[0]: " + s64(p.k_offsets[0]) + " must be 0");
    for (std::int64_t u = 0; u < sh.U; ++u)
      if (p.k_offsets[u + 1] < p.k_offsets[u])
        throw InvalidArgument("k_offsets[" + s64(u + 1) + "]",
                              kpath.string() + ": k_offsets[" + s64(u + 1) + "]: " + s64(p.k_offsets[u + 1]) +
                                  " < k_offsets[" + s64(u) + "] = " + s64(p.k_offsets[u]) + " (must be non-decreasing)");
    keys = p.k_offsets.back();
    sh.lengths.resize(static_cast<std::size_t>(sh.U));
    for (std::int64_t u = 0; u < sh.U; ++u) sh.lengths[u] = p.k_offsets[u + 1] - p.k_offsets[u];
  } else {
    std::error_code ec;
    if (fs::exists(cj.dir / kKOffsetsFile, ec))
      throw InvalidArgument("k_offsets", (cj.dir / kKOffsetsFile).string() +
                                             ": k_offsets: present, but shape.jagged is false (dense "
                                             "keys: remove the file or set shape.jagged)");
    keys = product(r, "shape.S", "U·S", {sh.U, sh.S});
  }
  const std::int64_t rows_q = product(r, "shape.n_seed", "B·n_seed", {sh.B, sh.n_seed});
  const std::int64_t n_q = product(r, "shape.B", "B·n_seed·H·Dh", {rows_q, sh.H, sh.Dh});
  const std::int64_t n_k = product(r, sh.jagged ? "shape.H" : "shape.S", "keys·H·Dh", {keys, sh.H, sh.Dh});
  const DType st = p.policy.storage;
  p.q = storage_tensor(cj.dir, kQFile, "q", st, n_q, "[B·n_seed, H, Dh]", {rows_q, sh.H, sh.Dh});
  p.k = storage_tensor(cj.dir, kKFile, "k", st, n_k, "[keys, H, Dh]", {keys, sh.H, sh.Dh});
  p.v = storage_tensor(cj.dir, kVFile, "v", st, n_k, "[keys, H, Dh]", {keys, sh.H, sh.Dh});
  p.cand_to_user = read_map(cj.dir, sh.B, sh.U);
  if (const Status s = ikbo::validate(p.view()); !s.ok())
    throw InvalidArgument(s.argument, cj.jname + ": " + s.message);
  c.recorded = read_recorded(r, j, cj.dir, st, n_q, "B·n_seed·H·Dh");
  c.expect = read_expect(r, j);
  return c;
}

}  // namespace detail

AttentionCaseFile read_attention_case(const std::string& dir) {
  return read_attention_json(parse_case_json(dir));
}

bool bitwise_equal(const AttentionCaseFile& a, const AttentionCaseFile& b) {
  const ikbo::AttentionCase& x = a.problem;
  const ikbo::AttentionCase& y = b.problem;
  const ikbo::AttentionShape& s = x.shape;
  const ikbo::AttentionShape& t = y.shape;
  return a.name == b.name && a.provenance == b.provenance && a.seed == b.seed && s.B == t.B &&
         s.U == t.U && s.n_seed == t.n_seed && s.H == t.H && s.Dh == t.Dh && s.S == t.S &&
         s.jagged == t.jagged && s.lengths == t.lengths && same_bits(s.scale, t.scale) &&
         x.policy == y.policy && x.map == y.map && x.q == y.q && x.k == y.k && x.v == y.v &&
         x.cand_to_user == y.cand_to_user && x.k_offsets == y.k_offsets &&
         same_recorded(a.recorded, b.recorded) && a.expect == b.expect;
}

}  // namespace tbe::io
