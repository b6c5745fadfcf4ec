// The pieces every case-folder reader and writer shares (case_file_internal.h): the strict JSON
// reader, tensor loading against the scalars and the limits, the header, the forward inputs
// (forward and backward cases), recorded errors and the expectation. docs/case-files.md.
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "case_file_internal.h"
#include "tbe/bounds_check.h"
#include "tbe/problem.h"

namespace tbe::io::detail {

std::string short_json(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

// ---- Reader ----------------------------------------------------------------------------------

void Reader::fail(const std::string& key, const std::string& msg) const {
  throw InvalidArgument(key, file_ + ": " + key + ": " + msg);
}

const json& Reader::member(const json& obj, const std::string& path, const std::string& key) const {
  auto it = obj.find(key);
  if (it == obj.end()) fail(join(path, key), "missing required key");
  return *it;
}

const json* Reader::optional_member(const json& obj, const std::string& key) const {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

void Reader::only_keys(const json& obj, const std::string& path,
                       const std::set<std::string>& allowed) const {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!allowed.count(it.key())) {
      std::string list;
      for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
      // Quote the key so an empty or odd key still names the argument ("case.json[\"\"]").
      const std::string key = "[\"" + it.key() + "\"]";
      fail((path.empty() ? std::string("case.json") : path) + key,
           "unknown key (allowed: " + list + ")");
    }
  }
}

const json& Reader::object(const json& obj, const std::string& path, const std::string& key) const {
  const json& v = member(obj, path, key);
  if (!v.is_object())
    fail(join(path, key), "expected an object, got " + type_name(v) + " " + short_json(v));
  return v;
}

std::string Reader::string(const json& v, const std::string& full) const {
  if (!v.is_string()) fail(full, "expected a string, got " + type_name(v) + " " + short_json(v));
  return v.get<std::string>();
}

std::string Reader::string(const json& obj, const std::string& path, const std::string& key) const {
  return string(member(obj, path, key), join(path, key));
}

bool Reader::boolean(const json& obj, const std::string& path, const std::string& key) const {
  const json& v = member(obj, path, key);
  if (!v.is_boolean())
    fail(join(path, key), "expected true or false, got " + type_name(v) + " " + short_json(v));
  return v.get<bool>();
}

std::int64_t Reader::integer(const json& v, const std::string& full, std::int64_t lo,
                             std::int64_t hi) const {
  if (!v.is_number_integer())
    fail(full, "expected an integer, got " + type_name(v) + " " + short_json(v));
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo)))
      fail(full, "value " + std::to_string(u) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<std::int64_t>(u);
  }
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi)
    fail(full, "value " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::int64_t Reader::integer(const json& obj, const std::string& path, const std::string& key,
                             std::int64_t lo, std::int64_t hi) const {
  return integer(member(obj, path, key), join(path, key), lo, hi);
}

std::uint64_t Reader::unsigned64(const json& obj, const std::string& path,
                                 const std::string& key) const {
  const json& v = member(obj, path, key);
  if (!v.is_number_integer())
    fail(join(path, key), "expected an unsigned integer, got " + type_name(v) + " " + short_json(v));
  if (!v.is_number_unsigned() && v.get<std::int64_t>() < 0)
    fail(join(path, key), "value " + std::to_string(v.get<std::int64_t>()) + " is negative");
  return v.get<std::uint64_t>();
}

double Reader::number(const json& obj, const std::string& path, const std::string& key) const {
  const json& v = member(obj, path, key);
  if (!v.is_number()) fail(join(path, key), "expected a number, got " + type_name(v) + " " + short_json(v));
  const double x = v.get<double>();
  if (!std::isfinite(x)) fail(join(path, key), "value " + short_json(v) + " is not a finite number");
  return x;
}

bool Reader::file_or_null(const json& obj, const std::string& path, const std::string& key,
                          const char* file) const {
  const json* o = optional_member(obj, key);
  if (o == nullptr) return false;
  const std::string full = join(path, key);
  if (string(*o, full) != file)
    fail(full, "'" + o->get<std::string>() + "' (allowed: \"" + file + "\" or null)");
  return true;
}

RoundingMode parse_rounding(const std::string& s, const char* what) {
  if (s == "rne") return RoundingMode::Nearest;
  if (s == "sr") return RoundingMode::Stochastic;
  throw InvalidArgument(what, std::string(what) + ": unknown rounding mode '" + s + "' (known: rne, sr)");
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const Reader& r, const std::string& key,
                         const std::string& what) {
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a)
    r.fail(key, what + " = " + std::to_string(a) + "·" + std::to_string(b) + " overflows int64");
  return a * b;
}

// ---- tensors ---------------------------------------------------------------------------------

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

NpyArray load_tensor(const fs::path& dir, const char* file, const std::string& key,
                     const std::string& descr, const std::string& dtype_why, std::int64_t numel,
                     const std::string& count_why, ShapeRule rule,
                     const std::vector<std::int64_t>& shape) {
  const fs::path path = dir / file;
  const std::string name = path.string();
  // The size the scalars ask for, against the payload limit, before the file is opened.
  const std::int64_t limit = NpyLimits{}.max_bytes;
  const std::int64_t item = static_cast<std::int64_t>(NpyArray{descr, {}, {}}.itemsize());
  if (numel >= 0 && numel > limit / item)
    throw InvalidArgument(key, name + ": " + key + ": " + count_why + " = " + std::to_string(numel) +
                                   " elements of " + std::to_string(item) +
                                   " bytes exceed the .npy payload limit of " +
                                   std::to_string(limit) + " bytes");
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InvalidArgument(key, name + ": missing (" + key + " needs it)");
  NpyArray a = read_npy(name);
  if (rule == ShapeRule::OneD && a.shape.size() != 1)
    throw InvalidArgument(key, name + ": " + key + ": expected a 1-D array, got " + std::to_string(a.shape.size()) + " dimensions");
  if (a.descr != descr)
    throw InvalidArgument(key, name + ": " + key + ": descr '" + a.descr + "' != '" + descr + "' required by " + dtype_why);
  if (rule == ShapeRule::Exact) {
    if (a.shape != shape)
      throw InvalidArgument(key, name + ": " + key + ": shape " + shape_text(a.shape) + " != " +
                                     count_why + " = " + shape_text(shape));
  } else if (numel >= 0 && a.numel() != numel) {
    throw InvalidArgument(key, name + ": " + key + ": " + std::to_string(a.numel()) + " elements != " + count_why + " = " + std::to_string(numel));
  }
  return a;
}

std::vector<std::int64_t> index_values(const NpyArray& a) {
  const std::int64_t n = a.numel();
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  if (a.descr == "<i4") {
    for (std::int64_t i = 0; i < n; ++i) {
      std::int32_t v;
      std::memcpy(&v, a.data.data() + i * 4, 4);
      out[i] = v;
    }
  } else {
    if (n > 0) std::memcpy(out.data(), a.data.data(), static_cast<std::size_t>(n) * 8);
  }
  return out;
}

std::vector<float> float_values(const NpyArray& a) {
  std::vector<float> out(static_cast<std::size_t>(a.numel()));
  if (!out.empty()) std::memcpy(out.data(), a.data.data(), out.size() * sizeof(float));
  return out;
}

std::vector<std::int32_t> int32_values(const NpyArray& a) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(a.numel()));
  if (!out.empty()) std::memcpy(out.data(), a.data.data(), out.size() * sizeof(std::int32_t));
  return out;
}

// ---- case.json and the header ----------------------------------------------------------------

namespace {

// Deepest bracket nesting of a JSON text (strings skipped): refuse deep input before parsing it.
int json_depth(const std::string& text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return max_depth;
}

}  // namespace

CaseJson parse_case_json(const std::string& dir) {
  CaseJson c;
  c.dir = fs::path(dir);
  const fs::path json_path = c.dir / "case.json";
  c.jname = json_path.string();
  std::error_code ec;
  if (!fs::is_directory(c.dir, ec)) throw InvalidArgument("dir", dir + ": not a case folder (no such directory)");
  if (!fs::is_regular_file(json_path, ec)) throw InvalidArgument("case.json", c.jname + ": missing");
  const std::uintmax_t jsize = fs::file_size(json_path, ec);
  if (ec || jsize > static_cast<std::uintmax_t>(kMaxJsonBytes))
    throw InvalidArgument("case.json", c.jname + ": size " + std::to_string(jsize) + " bytes exceeds the limit " + std::to_string(kMaxJsonBytes));
  std::string text;
  {
    std::ifstream in(json_path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  if (json_depth(text) > kMaxJsonDepth)
    throw InvalidArgument("case.json", c.jname + ": nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    c.j = json::parse(text);
  } catch (const json::exception& e) {
    throw InvalidArgument("case.json", c.jname + ": not valid JSON (" + e.what() + ")");
  }
  if (!c.j.is_object()) Reader(c.jname).fail("(top level)", "expected an object, got " + type_name(c.j));
  return c;
}

std::optional<CaseOperator> peek_operator(const json& j) {
  const auto it = j.find("operator");
  if (it == j.end() || !it->is_string()) return std::nullopt;
  try {
    return parse_case_operator(it->get<std::string>());
  } catch (const InvalidArgument&) {
    return std::nullopt;
  }
}

CaseHeader read_header(const Reader& r, const json& j, CaseOperator op,
                       const std::set<std::string>& top_keys) {
  if (const auto named = peek_operator(j); named && *named != op)
    r.fail("operator", "'" + to_string(*named) + "' is not '" + to_string(op) +
                           "' (read_any_case reads a case of any operator)");
  r.only_keys(j, "", top_keys);
  CaseHeader h;
  if (r.string(j, "", "format") != kFormatName) r.fail("format", "'" + j["format"].get<std::string>() + "' is not '" + kFormatName + "'");
  r.integer(j, "", "version", kFormatVersion, kFormatVersion);
  h.name = r.string(j, "", "name");
  h.provenance = r.string(j, "", "provenance");
  h.seed = r.unsigned64(j, "", "seed");
  if (r.string(j, "", "operator") != to_string(op))
    r.fail("operator", "'" + j["operator"].get<std::string>() + "' is not a supported operator (allowed: forward, backward, ikbo-lce, ikbo-attention)");
  return h;
}

ojson header_json(const CaseHeader& h, CaseOperator op) {
  ojson j;
  j["format"] = kFormatName;
  j["version"] = kFormatVersion;
  j["name"] = h.name;
  j["provenance"] = h.provenance;
  j["seed"] = h.seed;
  j["operator"] = to_string(op);
  return j;
}

// ---- the forward inputs ----------------------------------------------------------------------

ForwardScalars read_forward_scalars(const Reader& r, const json& j, ForwardCase& p,
                                    const std::set<std::string>& extra_option_keys) {
  ForwardScalars s;
  // --- tables ---
  const json& tj = r.object(j, "", "tables");
  r.only_keys(tj, "tables", {"dtype", "rows", "dims", "table_offsets", "feature_table_map"});
  p.weights_dtype = r.parse_enum(tj, "tables", "dtype", [](const std::string& x, const char* w) { return parse_dtype(x, w); });
  if (p.weights_dtype != DType::F32 && p.weights_dtype != DType::F16 && p.weights_dtype != DType::BF16)
    r.fail("tables.dtype", "'" + to_string(p.weights_dtype) + "' is not a weight type (allowed: fp32, fp16, bf16)");
  p.rows = r.int_array<std::int64_t>(tj, "tables", "rows", 1, kI64);
  p.dims = r.int_array<std::int32_t>(tj, "tables", "dims", 1, kMaxD);
  p.table_offsets = r.int_array<std::int64_t>(tj, "tables", "table_offsets", 0, kI64);
  p.feature_table_map = r.int_array<std::int32_t>(tj, "tables", "feature_table_map", 0, kI32);
  const std::int64_t num_tables = static_cast<std::int64_t>(p.rows.size());
  if (static_cast<std::int64_t>(p.dims.size()) != num_tables)
    r.fail("tables.dims", "length " + std::to_string(p.dims.size()) + " != len(tables.rows) = " + std::to_string(num_tables));
  if (static_cast<std::int64_t>(p.table_offsets.size()) != num_tables)
    r.fail("tables.table_offsets", "length " + std::to_string(p.table_offsets.size()) + " != len(tables.rows) = " + std::to_string(num_tables));
  std::vector<std::int64_t> table_elems(static_cast<std::size_t>(num_tables));
  for (std::int64_t t = 0; t < num_tables; ++t) {
    const std::string key = "tables.rows[" + std::to_string(t) + "]";
    table_elems[t] = checked_mul(p.rows[t], p.dims[t], r, key, "E·D");
    if (table_elems[t] > kI64 - s.total_elems) r.fail(key, "Σ E·D overflows int64");
    s.total_elems += table_elems[t];
  }
  for (std::int64_t t = 0; t < num_tables; ++t) {
    if (p.table_offsets[t] > s.total_elems - table_elems[t])
      r.fail("tables.table_offsets[" + std::to_string(t) + "]", "offset " + std::to_string(p.table_offsets[t]) + " + E·D = " + std::to_string(table_elems[t]) + " runs past the " + std::to_string(s.total_elems) + " weights (Σ E·D)");
  }
  for (std::size_t f = 0; f < p.feature_table_map.size(); ++f)
    if (p.feature_table_map[f] >= num_tables)
      r.fail("tables.feature_table_map[" + std::to_string(f) + "]", "table " + std::to_string(p.feature_table_map[f]) + " is outside [0, num_tables=" + std::to_string(num_tables) + ")");
  const std::int64_t T = static_cast<std::int64_t>(p.feature_table_map.size());

  // --- lookups ---
  const json& lj = r.object(j, "", "lookups");
  r.only_keys(lj, "lookups", {"index_dtype", "batch_size", "vbe_ranks", "vbe_batch_sizes", "weighted"});
  p.index_dtype = r.parse_enum(lj, "lookups", "index_dtype", [](const std::string& x, const char* w) { return parse_dtype(x, w); });
  if (!is_index(p.index_dtype)) r.fail("lookups.index_dtype", "'" + to_string(p.index_dtype) + "' is not an index type (allowed: int32, int64)");
  p.batch_size = r.integer(lj, "lookups", "batch_size", 0, kI64);
  p.vbe_ranks = static_cast<std::int32_t>(r.integer(lj, "lookups", "vbe_ranks", 0, kI32));
  p.vbe_batch_sizes = r.int_array<std::int32_t>(lj, "lookups", "vbe_batch_sizes", 0, kI32);
  s.weighted = r.boolean(lj, "lookups", "weighted");
  if (!p.vbe_batch_sizes.empty()) {
    if (p.vbe_ranks < 1) r.fail("lookups.vbe_ranks", "R = " + std::to_string(p.vbe_ranks) + " with " + std::to_string(p.vbe_batch_sizes.size()) + " VBE batch sizes (needs R >= 1)");
    const std::int64_t TR = checked_mul(T, p.vbe_ranks, r, "lookups.vbe_ranks", "T·R");
    if (static_cast<std::int64_t>(p.vbe_batch_sizes.size()) != TR)
      r.fail("lookups.vbe_batch_sizes", "length " + std::to_string(p.vbe_batch_sizes.size()) + " != T·R = " + std::to_string(TR) + " (T=" + std::to_string(T) + ", R=" + std::to_string(p.vbe_ranks) + ")");
    for (std::int32_t b : p.vbe_batch_sizes) s.num_bags += b;  // <= 2^31 · 2^23 entries: no overflow
    s.bags_why = "Σ vbe_batch_sizes + 1";
  } else {
    if (p.vbe_ranks != 0 && T > 0) r.fail("lookups.vbe_batch_sizes", "empty but lookups.vbe_ranks = " + std::to_string(p.vbe_ranks));
    s.num_bags = checked_mul(T, p.batch_size, r, "lookups.batch_size", "T·B");
    if (s.num_bags == kI64) r.fail("lookups.batch_size", "T·B + 1 overflows int64");
    s.bags_why = "T·B + 1 (T=" + std::to_string(T) + ", B=" + std::to_string(p.batch_size) + ")";
  }

  // --- options ---
  const json& oj = r.object(j, "", "options");
  std::set<std::string> option_keys = {"pooling", "bounds_check", "policy"};
  option_keys.insert(extra_option_keys.begin(), extra_option_keys.end());
  r.only_keys(oj, "options", option_keys);
  s.options = &oj;
  p.options.pooling = r.parse_enum(oj, "options", "pooling", [](const std::string& x, const char* w) { return parse_pooling(x, w); });
  p.options.bounds_check = r.parse_enum(oj, "options", "bounds_check", [](const std::string& x, const char* w) { return parse_bounds_check(x, w); });
  const json& pj = r.object(oj, "options", "policy");
  r.only_keys(pj, "options.policy", {"kind", "weights", "output", "accumulation", "optimizer_state", "write_back"});
  PrecisionPolicy& pol = p.options.policy;
  auto dt = [](const std::string& x, const char* w) { return parse_dtype(x, w); };
  pol.kind = r.parse_enum(pj, "options.policy", "kind", [](const std::string& x, const char* w) { return parse_policy_kind(x, w); });
  pol.weights = r.parse_enum(pj, "options.policy", "weights", dt);
  pol.output = r.parse_enum(pj, "options.policy", "output", dt);
  pol.accumulation = r.parse_enum(pj, "options.policy", "accumulation", dt);
  pol.optimizer_state = r.parse_enum(pj, "options.policy", "optimizer_state", dt);
  pol.write_back = r.parse_enum(pj, "options.policy", "write_back", parse_rounding);
  if (!is_floating(pol.accumulation)) r.fail("options.policy.accumulation", "'" + to_string(pol.accumulation) + "' is not a floating type");
  return s;
}

void read_forward_tensors(const fs::path& d, const ForwardScalars& s, ForwardCase& p) {
  {
    NpyArray w = load_tensor(d, kWeightsFile, "tables.weights", npy_descr(p.weights_dtype),
                             "tables.dtype " + to_string(p.weights_dtype), s.total_elems, "Σ E·D");
    p.weights = std::move(w.data);
  }
  const std::string idescr = npy_descr(p.index_dtype);
  const std::string iwhy = "lookups.index_dtype " + to_string(p.index_dtype);
  p.offsets = index_values(load_tensor(d, kOffsetsFile, "offsets", idescr, iwhy, s.num_bags + 1, s.bags_why));
  p.indices = index_values(load_tensor(d, kIndicesFile, "lookups.indices", idescr, iwhy, -1, ""));
  const std::int64_t N = static_cast<std::int64_t>(p.indices.size());
  if (s.weighted)
    p.per_sample_weights = float_values(load_tensor(d, kPswFile, "lookups.per_sample_weights", "<f4",
                                                    "per-sample weights (fp32)", N, "len(indices) N"));
}

ForwardProblem checked_forward_view(const std::string& dir, const Reader& r, ForwardCase& p) {
  ForwardProblem view;
  try {
    view = p.view();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(e.argument(), dir + ": " + e.what());
  }
  if (const Status s = validate(view); !s.ok()) throw InvalidArgument(s.argument, dir + ": " + s.message);
  // Bounds mode NONE means "the caller promises valid input": a case that breaks the promise would
  // make every backend read out of bounds, so it is refused here rather than run.
  if (p.options.bounds_check == BoundsCheckMode::None) {
    if (const auto v = find_first_violation(view))
      r.fail("options.bounds_check", "none, but the input violates bounds (" + to_string(*v) +
                                         "); with bounds_check none the input must be valid "
                                         "(record it under warning, ignore or fatal)");
  }
  return view;
}

void put_forward_blocks(ojson& j, const ForwardCase& p) {
  j["tables"] = {{"dtype", to_string(p.weights_dtype)},
                 {"rows", p.rows},
                 {"dims", p.dims},
                 {"table_offsets", p.table_offsets},
                 {"feature_table_map", p.feature_table_map}};
  j["lookups"] = {{"index_dtype", to_string(p.index_dtype)},
                  {"batch_size", p.batch_size},
                  {"vbe_ranks", p.vbe_ranks},
                  {"vbe_batch_sizes", p.vbe_batch_sizes},
                  {"weighted", !p.per_sample_weights.empty()}};
  const PrecisionPolicy& pol = p.options.policy;
  j["options"] = {{"pooling", to_string(p.options.pooling)},
                  {"bounds_check", to_string(p.options.bounds_check)},
                  {"policy",
                   {{"kind", to_string(pol.kind)},
                    {"weights", to_string(pol.weights)},
                    {"output", to_string(pol.output)},
                    {"accumulation", to_string(pol.accumulation)},
                    {"optimizer_state", to_string(pol.optimizer_state)},
                    {"write_back", to_string(pol.write_back)}}}};
}

void write_forward_tensors(const fs::path& d, const ForwardCase& p, std::set<std::string>& written) {
  if (p.weights.size() % dtype_size(p.weights_dtype) != 0)
    throw InvalidArgument("tables.weights", "write_case: " + std::to_string(p.weights.size()) + " weight bytes are not a multiple of the " + to_string(p.weights_dtype) + " element size");
  const std::int64_t nw = static_cast<std::int64_t>(p.weights.size() / dtype_size(p.weights_dtype));
  write_tensor(d, kWeightsFile, p.weights_dtype, nw, p.weights.data(), written);
  const std::int64_t N = static_cast<std::int64_t>(p.indices.size());
  const std::int64_t K = static_cast<std::int64_t>(p.offsets.size());
  if (p.index_dtype == DType::I64) {
    write_tensor(d, kIndicesFile, DType::I64, N, p.indices.data(), written);
    write_tensor(d, kOffsetsFile, DType::I64, K, p.offsets.data(), written);
  } else {
    auto narrow = [](const std::vector<std::int64_t>& v, const char* name) {
      std::vector<std::int32_t> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] < std::numeric_limits<std::int32_t>::min() || v[i] > std::numeric_limits<std::int32_t>::max())
          throw InvalidArgument(name, std::string("write_case: ") + name + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) + " does not fit int32");
        out[i] = static_cast<std::int32_t>(v[i]);
      }
      return out;
    };
    const auto i32 = narrow(p.indices, "lookups.indices");
    const auto o32 = narrow(p.offsets, "offsets");
    write_tensor(d, kIndicesFile, DType::I32, N, i32.data(), written);
    write_tensor(d, kOffsetsFile, DType::I32, K, o32.data(), written);
  }
  if (!p.per_sample_weights.empty())
    write_tensor(d, kPswFile, DType::F32, static_cast<std::int64_t>(p.per_sample_weights.size()),
                 p.per_sample_weights.data(), written);
}

bool same_forward_case(const ForwardCase& x, const ForwardCase& y) {
  return x.weights_dtype == y.weights_dtype && x.weights == y.weights && x.rows == y.rows &&
         x.dims == y.dims && x.table_offsets == y.table_offsets &&
         x.feature_table_map == y.feature_table_map && x.index_dtype == y.index_dtype &&
         x.indices == y.indices && x.offsets == y.offsets &&
         same_bits(x.per_sample_weights, y.per_sample_weights) && x.batch_size == y.batch_size &&
         x.vbe_batch_sizes == y.vbe_batch_sizes && x.vbe_ranks == y.vbe_ranks &&
         x.options.pooling == y.options.pooling && x.options.bounds_check == y.options.bounds_check &&
         x.options.policy == y.options.policy;
}

// ---- recorded errors, expectation ------------------------------------------------------------

namespace {

std::string names(std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  return list;
}

bool one_of(const std::string& s, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (s == a) return true;
  return false;
}

}  // namespace

std::optional<std::string> read_recorded_error(const Reader& r, const json& rj,
                                               std::initializer_list<const char*> allowed) {
  const json* e = r.optional_member(rj, "error");
  if (e == nullptr) return std::nullopt;
  std::string error = r.string(*e, "recorded.error");
  if (!one_of(error, allowed))
    r.fail("recorded.error", "'" + error + "' is not an error kind (allowed: " + names(allowed) + ", or null)");
  return error;
}

void check_recorded_error(const std::optional<std::string>& error,
                          std::initializer_list<const char*> allowed, const char* writer) {
  if (error && !one_of(*error, allowed))
    throw InvalidArgument("recorded.error", std::string(writer) + ": recorded error '" + *error +
                                                "' is not an error kind (allowed: " + names(allowed) + ")");
}

std::optional<Expectation> read_expect(const Reader& r, const json& j) {
  const json* ej = r.optional_member(j, "expect");
  if (ej == nullptr) return std::nullopt;
  if (!ej->is_object()) r.fail("expect", "expected an object, got " + type_name(*ej));
  r.only_keys(*ej, "expect", {"verdict", "rule"});
  Expectation e;
  e.verdict = r.string(*ej, "expect", "verdict");
  if (e.verdict != "pass" && e.verdict != "fail") r.fail("expect.verdict", "'" + e.verdict + "' (allowed: pass, fail)");
  if (const json* rule = r.optional_member(*ej, "rule")) e.rule = r.string(*rule, "expect.rule");
  if (e.verdict == "fail" && e.rule.empty()) r.fail("expect.rule", "required (non-empty) when expect.verdict is 'fail'");
  return e;
}

void put_expect(ojson& j, const std::optional<Expectation>& e) {
  if (e) j["expect"] = {{"verdict", e->verdict}, {"rule", e->rule}};
}

// ---- writing ---------------------------------------------------------------------------------

fs::path make_case_dir(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec || !fs::is_directory(d)) throw InvalidArgument("dir", dir + ": cannot create the case folder (" + ec.message() + ")");
  return d;
}

void write_tensor(const fs::path& d, const char* file, DType t, std::int64_t n, const void* data,
                  std::set<std::string>& written) {
  write_npy((d / file).string(), t, n, data);
  written.insert(file);
}

void write_shaped_tensor(const fs::path& d, const char* file, DType t,
                         std::vector<std::int64_t> shape, const void* data,
                         std::set<std::string>& written) {
  write_npy((d / file).string(), t, shape, data);
  written.insert(file);
}

void finish_case_dir(const fs::path& d, const ojson& j, const std::set<std::string>& written) {
  std::error_code ec;
  for (const char* f : kAllTensorFiles)
    if (!written.count(f)) fs::remove(d / f, ec);
  const fs::path path = d / "case.json";
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw InvalidArgument("dir", path.string() + ": cannot open for writing");
  out << j.dump(2, ' ', false, ojson::error_handler_t::replace) << "\n";  // bad UTF-8 -> U+FFFD
  out.close();
  if (!out) throw InvalidArgument("dir", path.string() + ": write failed");
}

double finite_for_json(double v, const std::string& key) {
  if (!std::isfinite(v))
    throw InvalidArgument(key, "write_case: " + key + " = " + std::to_string(v) + " is not finite (JSON holds finite numbers only)");
  return v;
}

}  // namespace tbe::io::detail
