// Case folders: case.json + fixed-name .npy tensors (docs/case-files.md). read_case treats the
// folder as untrusted: every key is type- and range-checked, tensor files are found only under
// their fixed names (never a path taken from the JSON), sizes are checked against the scalars
// before use, and the assembled problem goes through tbe::validate.
#include "tbe/io/case_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tbe/bounds_check.h"
#include "tbe/io/npy.h"
#include "tbe/problem.h"

namespace tbe::io {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kFormatVersion = 1;
constexpr const char* kFormatName = "tbe-case";
constexpr std::int64_t kMaxJsonBytes = std::int64_t{64} << 20;
constexpr int kMaxJsonDepth = 32;
// Fixed tensor file names: the reader never opens a path that came from the JSON.
constexpr const char* kWeightsFile = "weights.npy";
constexpr const char* kIndicesFile = "indices.npy";
constexpr const char* kOffsetsFile = "offsets.npy";
constexpr const char* kPswFile = "per_sample_weights.npy";
constexpr const char* kOutputFile = "output.npy";

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

/// Reads typed values out of case.json, naming the file and the dotted key in every error.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw InvalidArgument(key, file_ + ": " + key + ": " + msg);
  }

  const json& member(const json& obj, const std::string& path, const std::string& key) const {
    const std::string full = path.empty() ? key : path + "." + key;
    auto it = obj.find(key);
    if (it == obj.end()) fail(full, "missing required key");
    return *it;
  }
  const json* optional_member(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  void only_keys(const json& obj, const std::string& path, std::set<std::string> allowed) const {
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
  const json& object(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = member(obj, path, key);
    if (!v.is_object())
      fail(join(path, key), "expected an object, got " + type_name(v) + " " + short_json(v));
    return v;
  }
  std::string string(const json& v, const std::string& full) const {
    if (!v.is_string()) fail(full, "expected a string, got " + type_name(v) + " " + short_json(v));
    return v.get<std::string>();
  }
  std::string string(const json& obj, const std::string& path, const std::string& key) const {
    return string(member(obj, path, key), join(path, key));
  }
  bool boolean(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = member(obj, path, key);
    if (!v.is_boolean()) fail(join(path, key), "expected true or false, got " + type_name(v) + " " + short_json(v));
    return v.get<bool>();
  }
  std::int64_t integer(const json& v, const std::string& full, std::int64_t lo, std::int64_t hi) const {
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
  std::int64_t integer(const json& obj, const std::string& path, const std::string& key,
                       std::int64_t lo, std::int64_t hi) const {
    return integer(member(obj, path, key), join(path, key), lo, hi);
  }
  std::uint64_t unsigned64(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = member(obj, path, key);
    if (!v.is_number_integer()) fail(join(path, key), "expected an unsigned integer, got " + type_name(v) + " " + short_json(v));
    if (!v.is_number_unsigned() && v.get<std::int64_t>() < 0)
      fail(join(path, key), "value " + std::to_string(v.get<std::int64_t>()) + " is negative");
    return v.get<std::uint64_t>();
  }
  template <class Int>
  std::vector<Int> int_array(const json& obj, const std::string& path, const std::string& key,
                             std::int64_t lo, std::int64_t hi) const {
    const json& v = member(obj, path, key);
    const std::string full = join(path, key);
    if (!v.is_array()) fail(full, "expected an array of integers, got " + type_name(v) + " " + short_json(v));
    std::vector<Int> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(static_cast<Int>(integer(v[i], full + "[" + std::to_string(i) + "]", lo, hi)));
    return out;
  }
  // Wraps the project's enum parsers so the error also names the file.
  template <class Fn>
  auto parse_enum(const json& obj, const std::string& path, const std::string& key, Fn&& fn) const {
    const std::string full = join(path, key);
    const std::string text = string(obj, path, key);
    try {
      return fn(text, full.c_str());
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(full, file_ + ": " + e.what());
    }
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

RoundingMode parse_rounding(const std::string& s, const char* what) {
  if (s == "rne") return RoundingMode::Nearest;
  if (s == "sr") return RoundingMode::Stochastic;
  throw InvalidArgument(what, std::string(what) + ": unknown rounding mode '" + s + "' (known: rne, sr)");
}

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

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const Reader& r, const std::string& key,
                         const std::string& what) {
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a)
    r.fail(key, what + " = " + std::to_string(a) + "·" + std::to_string(b) + " overflows int64");
  return a * b;
}

// One tensor file of the case: must exist, be 1-D (or, for `any_shape`, any shape) with the
// expected descr and element count.
NpyArray load_tensor(const fs::path& dir, const char* file, const std::string& key,
                     const std::string& descr, std::int64_t expected_numel,
                     const std::string& expected_why, bool any_shape = false) {
  const fs::path path = dir / file;
  const std::string name = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InvalidArgument(key, name + ": missing (" + key + " needs it)");
  NpyArray a = read_npy(name);
  if (!any_shape && a.shape.size() != 1)
    throw InvalidArgument(key, name + ": " + key + ": expected a 1-D array, got " + std::to_string(a.shape.size()) + " dimensions");
  if (a.descr != descr)
    throw InvalidArgument(key, name + ": " + key + ": descr '" + a.descr + "' != '" + descr + "' required by " + expected_why.substr(0, expected_why.find('|')));
  if (expected_numel >= 0 && a.numel() != expected_numel)
    throw InvalidArgument(key, name + ": " + key + ": " + std::to_string(a.numel()) + " elements != " + expected_why.substr(expected_why.find('|') + 1) + " = " + std::to_string(expected_numel));
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

void write_json_file(const fs::path& path, const nlohmann::ordered_json& j) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw InvalidArgument("dir", path.string() + ": cannot open for writing");
  out << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";  // bad UTF-8 -> U+FFFD
  out.close();
  if (!out) throw InvalidArgument("dir", path.string() + ": write failed");
}

}  // namespace

ForwardCase copy_case(const ForwardProblem& p) {
  throw_if_error(validate(p));
  ForwardCase c;
  const TableBatchView& tb = p.tables;
  const std::size_t item = dtype_size(tb.dtype);
  c.weights_dtype = tb.dtype;
  c.rows.assign(tb.rows.begin(), tb.rows.end());
  c.dims.assign(tb.dims.begin(), tb.dims.end());
  c.feature_table_map.assign(tb.feature_table_map.begin(), tb.feature_table_map.end());
  std::int64_t total = 0;
  for (std::int64_t t = 0; t < tb.num_tables(); ++t) {
    c.table_offsets.push_back(total);
    total += tb.rows[t] * tb.dims[t];
  }
  c.weights.resize(static_cast<std::size_t>(total) * item);
  const std::byte* src = static_cast<const std::byte*>(tb.weights);
  for (std::int64_t t = 0; t < tb.num_tables() && src != nullptr; ++t)
    std::memcpy(c.weights.data() + c.table_offsets[t] * item, src + tb.table_offsets[t] * item,
                static_cast<std::size_t>(tb.rows[t] * tb.dims[t]) * item);
  const LookupBatchView& lk = p.lookups;
  c.index_dtype = lk.index_dtype;
  c.indices.resize(static_cast<std::size_t>(lk.num_indices));
  for (std::int64_t i = 0; i < lk.num_indices; ++i) c.indices[i] = load_index(lk.index_dtype, lk.indices, i);
  c.offsets.resize(static_cast<std::size_t>(lk.num_offsets));
  for (std::int64_t i = 0; i < lk.num_offsets; ++i) c.offsets[i] = load_index(lk.index_dtype, lk.offsets, i);
  if (lk.per_sample_weights != nullptr)
    c.per_sample_weights.assign(lk.per_sample_weights, lk.per_sample_weights + lk.num_indices);
  c.batch_size = lk.batch_size;
  c.vbe_batch_sizes.assign(lk.vbe_batch_sizes.begin(), lk.vbe_batch_sizes.end());
  c.vbe_ranks = lk.vbe_ranks;
  c.options = p.options;
  return c;
}

void write_case(const std::string& dir, const CaseFile& c) {
  const fs::path d(dir);
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec || !fs::is_directory(d)) throw InvalidArgument("dir", dir + ": cannot create the case folder (" + ec.message() + ")");
  const ForwardCase& p = c.problem;
  if (!is_index(p.index_dtype)) throw InvalidArgument("lookups.index_dtype", "write_case: index dtype " + to_string(p.index_dtype) + " is not int32/int64");

  nlohmann::ordered_json j;  // keys in reading order: format, identity, tables, lookups, ...
  j["format"] = kFormatName;
  j["version"] = kFormatVersion;
  j["name"] = c.name;
  j["provenance"] = c.provenance;
  j["seed"] = c.seed;
  j["operator"] = "forward";
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
  if (c.recorded) {
    const RecordedOutputs& r = *c.recorded;
    if (!r.output.empty() && r.error)
      throw InvalidArgument("recorded.error", "write_case: recorded output together with error '" + *r.error + "' (record one or the other)");
    nlohmann::ordered_json rj;
    rj["implementation"] = r.implementation;
    rj["output_dtype"] = to_string(r.output_dtype);
    // An output file unless the implementation raised (an empty output of 0 elements is a file).
    const bool has_output = !r.output.empty() || !r.error.has_value();
    rj["output"] = has_output ? nlohmann::ordered_json(kOutputFile) : nlohmann::ordered_json(nullptr);
    rj["warnings"] = r.warnings ? nlohmann::ordered_json(*r.warnings) : nlohmann::ordered_json(nullptr);
    rj["error"] = r.error ? nlohmann::ordered_json(*r.error) : nlohmann::ordered_json(nullptr);
    j["recorded"] = rj;
  }
  if (c.expect) j["expect"] = {{"verdict", c.expect->verdict}, {"rule", c.expect->rule}};

  // Tensors (stale optional files from an earlier write of this folder are removed).
  if (p.weights.size() % dtype_size(p.weights_dtype) != 0)
    throw InvalidArgument("tables.weights", "write_case: " + std::to_string(p.weights.size()) + " weight bytes are not a multiple of the " + to_string(p.weights_dtype) + " element size");
  const std::int64_t nw = static_cast<std::int64_t>(p.weights.size() / dtype_size(p.weights_dtype));
  write_npy((d / kWeightsFile).string(), p.weights_dtype, nw, p.weights.data());
  const std::int64_t N = static_cast<std::int64_t>(p.indices.size());
  const std::int64_t K = static_cast<std::int64_t>(p.offsets.size());
  if (p.index_dtype == DType::I64) {
    write_npy((d / kIndicesFile).string(), DType::I64, N, p.indices.data());
    write_npy((d / kOffsetsFile).string(), DType::I64, K, p.offsets.data());
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
    write_npy((d / kIndicesFile).string(), DType::I32, N, i32.data());
    write_npy((d / kOffsetsFile).string(), DType::I32, K, o32.data());
  }
  if (!p.per_sample_weights.empty()) {
    write_npy((d / kPswFile).string(), DType::F32, static_cast<std::int64_t>(p.per_sample_weights.size()), p.per_sample_weights.data());
  } else {
    fs::remove(d / kPswFile, ec);
  }
  if (c.recorded && j["recorded"]["output"].is_string()) {
    const RecordedOutputs& r = *c.recorded;
    const std::size_t item = dtype_size(r.output_dtype);
    if (r.output.size() % item != 0)
      throw InvalidArgument("recorded.output", "write_case: " + std::to_string(r.output.size()) + " output bytes are not a multiple of " + std::to_string(item));
    write_npy((d / kOutputFile).string(), r.output_dtype, static_cast<std::int64_t>(r.output.size() / item), r.output.data());
  } else {
    fs::remove(d / kOutputFile, ec);
  }
  write_json_file(d / "case.json", j);
}

CaseFile read_case(const std::string& dir) {
  const fs::path d(dir);
  const fs::path json_path = d / "case.json";
  const std::string jname = json_path.string();
  std::error_code ec;
  if (!fs::is_directory(d, ec)) throw InvalidArgument("dir", dir + ": not a case folder (no such directory)");
  if (!fs::is_regular_file(json_path, ec)) throw InvalidArgument("case.json", jname + ": missing");
  const std::uintmax_t jsize = fs::file_size(json_path, ec);
  if (ec || jsize > static_cast<std::uintmax_t>(kMaxJsonBytes))
    throw InvalidArgument("case.json", jname + ": size " + std::to_string(jsize) + " bytes exceeds the limit " + std::to_string(kMaxJsonBytes));
  std::string text;
  {
    std::ifstream in(json_path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  if (json_depth(text) > kMaxJsonDepth)
    throw InvalidArgument("case.json", jname + ": nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InvalidArgument("case.json", jname + ": not valid JSON (" + e.what() + ")");
  }
  const Reader r(jname);
  if (!j.is_object()) r.fail("(top level)", "expected an object, got " + type_name(j));
  r.only_keys(j, "", {"format", "version", "name", "provenance", "seed", "operator", "tables", "lookups", "options", "recorded", "expect"});

  CaseFile c;
  if (r.string(j, "", "format") != kFormatName) r.fail("format", "'" + j["format"].get<std::string>() + "' is not '" + kFormatName + "'");
  r.integer(j, "", "version", kFormatVersion, kFormatVersion);
  c.name = r.string(j, "", "name");
  c.provenance = r.string(j, "", "provenance");
  c.seed = r.unsigned64(j, "", "seed");
  if (r.string(j, "", "operator") != "forward") r.fail("operator", "'" + j["operator"].get<std::string>() + "' is not a supported operator (allowed: forward)");

  ForwardCase& p = c.problem;
  constexpr std::int64_t kI64 = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kI32 = std::numeric_limits<std::int32_t>::max();

  // --- tables ---
  const json& tj = r.object(j, "", "tables");
  r.only_keys(tj, "tables", {"dtype", "rows", "dims", "table_offsets", "feature_table_map"});
  p.weights_dtype = r.parse_enum(tj, "tables", "dtype", [](const std::string& s, const char* w) { return parse_dtype(s, w); });
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
  std::int64_t total_elems = 0;  // Σ E·D
  std::vector<std::int64_t> table_elems(static_cast<std::size_t>(num_tables));
  for (std::int64_t t = 0; t < num_tables; ++t) {
    const std::string key = "tables.rows[" + std::to_string(t) + "]";
    table_elems[t] = checked_mul(p.rows[t], p.dims[t], r, key, "E·D");
    if (table_elems[t] > kI64 - total_elems) r.fail(key, "Σ E·D overflows int64");
    total_elems += table_elems[t];
  }
  for (std::int64_t t = 0; t < num_tables; ++t) {
    if (p.table_offsets[t] > total_elems - table_elems[t])
      r.fail("tables.table_offsets[" + std::to_string(t) + "]", "offset " + std::to_string(p.table_offsets[t]) + " + E·D = " + std::to_string(table_elems[t]) + " runs past the " + std::to_string(total_elems) + " weights (Σ E·D)");
  }
  for (std::size_t f = 0; f < p.feature_table_map.size(); ++f)
    if (p.feature_table_map[f] >= num_tables)
      r.fail("tables.feature_table_map[" + std::to_string(f) + "]", "table " + std::to_string(p.feature_table_map[f]) + " is outside [0, num_tables=" + std::to_string(num_tables) + ")");
  const std::int64_t T = static_cast<std::int64_t>(p.feature_table_map.size());

  // --- lookups ---
  const json& lj = r.object(j, "", "lookups");
  r.only_keys(lj, "lookups", {"index_dtype", "batch_size", "vbe_ranks", "vbe_batch_sizes", "weighted"});
  p.index_dtype = r.parse_enum(lj, "lookups", "index_dtype", [](const std::string& s, const char* w) { return parse_dtype(s, w); });
  if (!is_index(p.index_dtype)) r.fail("lookups.index_dtype", "'" + to_string(p.index_dtype) + "' is not an index type (allowed: int32, int64)");
  p.batch_size = r.integer(lj, "lookups", "batch_size", 0, kI64);
  p.vbe_ranks = static_cast<std::int32_t>(r.integer(lj, "lookups", "vbe_ranks", 0, kI32));
  p.vbe_batch_sizes = r.int_array<std::int32_t>(lj, "lookups", "vbe_batch_sizes", 0, kI32);
  const bool weighted = r.boolean(lj, "lookups", "weighted");
  std::int64_t num_bags = 0;
  std::string bags_why;
  if (!p.vbe_batch_sizes.empty()) {
    if (p.vbe_ranks < 1) r.fail("lookups.vbe_ranks", "R = " + std::to_string(p.vbe_ranks) + " with " + std::to_string(p.vbe_batch_sizes.size()) + " VBE batch sizes (needs R >= 1)");
    const std::int64_t TR = checked_mul(T, p.vbe_ranks, r, "lookups.vbe_ranks", "T·R");
    if (static_cast<std::int64_t>(p.vbe_batch_sizes.size()) != TR)
      r.fail("lookups.vbe_batch_sizes", "length " + std::to_string(p.vbe_batch_sizes.size()) + " != T·R = " + std::to_string(TR) + " (T=" + std::to_string(T) + ", R=" + std::to_string(p.vbe_ranks) + ")");
    for (std::int32_t b : p.vbe_batch_sizes) num_bags += b;  // <= 2^31 · 2^23 entries: no overflow
    bags_why = "Σ vbe_batch_sizes + 1";
  } else {
    if (p.vbe_ranks != 0 && T > 0) r.fail("lookups.vbe_batch_sizes", "empty but lookups.vbe_ranks = " + std::to_string(p.vbe_ranks));
    num_bags = checked_mul(T, p.batch_size, r, "lookups.batch_size", "T·B");
    if (num_bags == kI64) r.fail("lookups.batch_size", "T·B + 1 overflows int64");
    bags_why = "T·B + 1 (T=" + std::to_string(T) + ", B=" + std::to_string(p.batch_size) + ")";
  }

  // --- options ---
  const json& oj = r.object(j, "", "options");
  r.only_keys(oj, "options", {"pooling", "bounds_check", "policy"});
  p.options.pooling = r.parse_enum(oj, "options", "pooling", [](const std::string& s, const char* w) { return parse_pooling(s, w); });
  p.options.bounds_check = r.parse_enum(oj, "options", "bounds_check", [](const std::string& s, const char* w) { return parse_bounds_check(s, w); });
  const json& pj = r.object(oj, "options", "policy");
  r.only_keys(pj, "options.policy", {"kind", "weights", "output", "accumulation", "optimizer_state", "write_back"});
  PrecisionPolicy& pol = p.options.policy;
  auto dt = [](const std::string& s, const char* w) { return parse_dtype(s, w); };
  pol.kind = r.parse_enum(pj, "options.policy", "kind", [](const std::string& s, const char* w) { return parse_policy_kind(s, w); });
  pol.weights = r.parse_enum(pj, "options.policy", "weights", dt);
  pol.output = r.parse_enum(pj, "options.policy", "output", dt);
  pol.accumulation = r.parse_enum(pj, "options.policy", "accumulation", dt);
  pol.optimizer_state = r.parse_enum(pj, "options.policy", "optimizer_state", dt);
  pol.write_back = r.parse_enum(pj, "options.policy", "write_back", parse_rounding);
  if (!is_floating(pol.accumulation)) r.fail("options.policy.accumulation", "'" + to_string(pol.accumulation) + "' is not a floating type");

  // --- tensors (fixed names; descr and length against the scalars) ---
  {
    NpyArray w = load_tensor(d, kWeightsFile, "tables.weights", npy_descr(p.weights_dtype),
                             total_elems, "tables.dtype " + to_string(p.weights_dtype) + "|Σ E·D");
    p.weights = std::move(w.data);
  }
  const std::string idescr = npy_descr(p.index_dtype);
  const NpyArray offsets = load_tensor(d, kOffsetsFile, "offsets", idescr, num_bags + 1,
                                       "lookups.index_dtype " + to_string(p.index_dtype) + "|" + bags_why);
  p.offsets = index_values(offsets);
  const NpyArray indices = load_tensor(d, kIndicesFile, "lookups.indices", idescr, -1,
                                       "lookups.index_dtype " + to_string(p.index_dtype) + "|");
  p.indices = index_values(indices);
  const std::int64_t N = static_cast<std::int64_t>(p.indices.size());
  if (weighted) {
    NpyArray w = load_tensor(d, kPswFile, "lookups.per_sample_weights", "<f4", N,
                             "per-sample weights (fp32)|len(indices) N");
    p.per_sample_weights.resize(static_cast<std::size_t>(N));
    if (N > 0) std::memcpy(p.per_sample_weights.data(), w.data.data(), static_cast<std::size_t>(N) * 4);
  }

  // --- the assembled problem ---
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

  // --- recorded outputs ---
  if (const json* rj = r.optional_member(j, "recorded")) {
    if (!rj->is_object()) r.fail("recorded", "expected an object, got " + type_name(*rj));
    r.only_keys(*rj, "recorded", {"implementation", "output_dtype", "output", "warnings", "error"});
    RecordedOutputs rec;
    rec.implementation = r.string(*rj, "recorded", "implementation");
    rec.output_dtype = r.parse_enum(*rj, "recorded", "output_dtype", dt);
    if (rec.output_dtype != pol.output)
      r.fail("recorded.output_dtype", "'" + to_string(rec.output_dtype) + "' != options.policy.output '" + to_string(pol.output) + "'");
    if (const json* w = r.optional_member(*rj, "warnings")) rec.warnings = r.integer(*w, "recorded.warnings", 0, kI64);
    if (const json* e = r.optional_member(*rj, "error")) {
      rec.error = r.string(*e, "recorded.error");
      if (*rec.error != "bounds_check" && *rec.error != "invalid_argument" && *rec.error != "device_error")
        r.fail("recorded.error", "'" + *rec.error + "' is not an error kind (allowed: bounds_check, invalid_argument, device_error, or null)");
    }
    if (const json* o = r.optional_member(*rj, "output")) {
      if (r.string(*o, "recorded.output") != kOutputFile)
        r.fail("recorded.output", "'" + o->get<std::string>() + "' (allowed: \"output.npy\" or null)");
      if (rec.error) r.fail("recorded.output", "an output together with error '" + *rec.error + "'");
      const OutputLayout layout = make_output_layout(view);
      NpyArray out = load_tensor(d, kOutputFile, "recorded.output", npy_descr(rec.output_dtype), layout.numel,
                                 "recorded.output_dtype " + to_string(rec.output_dtype) + "|the output size of the case",
                                 /*any_shape=*/true);
      rec.output = std::move(out.data);
    } else if (!rec.error) {
      r.fail("recorded.output", "null, but recorded.error is null too (record an output or an error)");
    }
    c.recorded = std::move(rec);
  }

  // --- expectation ---
  if (const json* ej = r.optional_member(j, "expect")) {
    if (!ej->is_object()) r.fail("expect", "expected an object, got " + type_name(*ej));
    r.only_keys(*ej, "expect", {"verdict", "rule"});
    Expectation e;
    e.verdict = r.string(*ej, "expect", "verdict");
    if (e.verdict != "pass" && e.verdict != "fail") r.fail("expect.verdict", "'" + e.verdict + "' (allowed: pass, fail)");
    if (const json* rule = r.optional_member(*ej, "rule")) e.rule = r.string(*rule, "expect.rule");
    if (e.verdict == "fail" && e.rule.empty()) r.fail("expect.rule", "required (non-empty) when expect.verdict is 'fail'");
    c.expect = std::move(e);
  }
  return c;
}

}  // namespace tbe::io
