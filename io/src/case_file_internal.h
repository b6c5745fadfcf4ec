// Internal helpers shared by the case-folder readers and writers of every operator
// (case_file.cpp: forward, case_file_backward.cpp, case_file_ikbo.cpp; not a public header):
// the strict typed JSON reader, the tensor loader with its shape/dtype/size checks, the header,
// forward-input, recorded-error and expectation blocks. Format: docs/case-files.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tbe/host_case.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/io/case_file.h"
#include "tbe/io/ikbo_case_file.h"
#include "tbe/io/npy.h"

namespace tbe::io::detail {

using nlohmann::json;
using ojson = nlohmann::ordered_json;  // keys in writing order
namespace fs = std::filesystem;

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kFormatName = "tbe-case";
inline constexpr std::int64_t kMaxJsonBytes = std::int64_t{64} << 20;
inline constexpr int kMaxJsonDepth = 32;
inline constexpr std::int64_t kI64 = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kI32 = std::numeric_limits<std::int32_t>::max();

// Fixed tensor file names: the readers never open a path that came from the JSON.
inline constexpr const char* kWeightsFile = "weights.npy";
inline constexpr const char* kIndicesFile = "indices.npy";
inline constexpr const char* kOffsetsFile = "offsets.npy";
inline constexpr const char* kPswFile = "per_sample_weights.npy";
inline constexpr const char* kOutputFile = "output.npy";
inline constexpr const char* kGradOutputFile = "grad_output.npy";
inline constexpr const char* kMomentumFile = "momentum.npy";
inline constexpr const char* kRecordedWeightsFile = "recorded_weights.npy";
inline constexpr const char* kRecordedMomentumFile = "recorded_momentum.npy";
inline constexpr const char* kRecordedPswGradFile = "recorded_psw_grad.npy";
inline constexpr const char* kWcFile = "w_c.npy";
inline constexpr const char* kWuFile = "w_u.npy";
inline constexpr const char* kEcFile = "e_c.npy";
inline constexpr const char* kEuFile = "e_u.npy";
inline constexpr const char* kCandToUserFile = "cand_to_user.npy";
inline constexpr const char* kQFile = "q.npy";
inline constexpr const char* kKFile = "k.npy";
inline constexpr const char* kVFile = "v.npy";
inline constexpr const char* kKOffsetsFile = "k_offsets.npy";
/// Every fixed tensor name of every operator: a writer removes those it does not write, so a
/// folder rewritten with another case (or operator) keeps no stale tensor.
inline constexpr const char* kAllTensorFiles[] = {
    kWeightsFile,  kIndicesFile,         kOffsetsFile,          kPswFile,      kOutputFile,
    kGradOutputFile, kMomentumFile,      kRecordedWeightsFile,  kRecordedMomentumFile,
    kRecordedPswGradFile, kWcFile,       kWuFile,               kEcFile,       kEuFile,
    kCandToUserFile, kQFile,             kKFile,                kVFile,        kKOffsetsFile};

std::string short_json(const json& v);
std::string type_name(const json& v);

/// Reads typed values out of case.json, naming the file and the dotted key in every error.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;
  const json& member(const json& obj, const std::string& path, const std::string& key) const;
  /// The member, or nullptr when absent or null.
  const json* optional_member(const json& obj, const std::string& key) const;
  /// Unknown keys are errors (a misspelt key must not silently pass).
  void only_keys(const json& obj, const std::string& path, const std::set<std::string>& allowed) const;
  const json& object(const json& obj, const std::string& path, const std::string& key) const;
  std::string string(const json& v, const std::string& full) const;
  std::string string(const json& obj, const std::string& path, const std::string& key) const;
  bool boolean(const json& obj, const std::string& path, const std::string& key) const;
  std::int64_t integer(const json& v, const std::string& full, std::int64_t lo, std::int64_t hi) const;
  std::int64_t integer(const json& obj, const std::string& path, const std::string& key,
                       std::int64_t lo, std::int64_t hi) const;
  std::uint64_t unsigned64(const json& obj, const std::string& path, const std::string& key) const;
  /// A finite JSON number (integer or not) as FP64.
  double number(const json& obj, const std::string& path, const std::string& key) const;
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
  /// Wraps the project's enum parsers (fn(text, key) throwing InvalidArgument) so the error also
  /// names the file.
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
  /// A key whose value is the fixed file name `file` or null: true for the file.
  bool file_or_null(const json& obj, const std::string& path, const std::string& key,
                    const char* file) const;
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

RoundingMode parse_rounding(const std::string& s, const char* what);

/// a·b, failing on int64 overflow (names `key`; `what` is the formula, e.g. "T·B").
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const Reader& r, const std::string& key,
                         const std::string& what);

/// How a tensor file's shape is checked.
enum class ShapeRule : std::uint8_t {
  OneD,      ///< 1-D of the expected length
  AnyShape,  ///< any shape with the expected element count (recorded outputs, torch tensors)
  Exact,     ///< exactly the expected shape
};

/// One tensor of the case under its fixed name: must exist, have `descr` (`dtype_why` says which
/// key requires it) and `numel` elements (`count_why` says why; numel < 0: any count) in `shape`
/// (ShapeRule::Exact) or per `rule`. The expected payload is checked against the .npy limit
/// before the file is opened.
NpyArray load_tensor(const fs::path& dir, const char* file, const std::string& key,
                     const std::string& descr, const std::string& dtype_why, std::int64_t numel,
                     const std::string& count_why, ShapeRule rule = ShapeRule::OneD,
                     const std::vector<std::int64_t>& shape = {});
/// An int32/int64 index tensor as int64 values.
std::vector<std::int64_t> index_values(const NpyArray& a);
/// The elements of an FP32 ('<f4') tensor.
std::vector<float> float_values(const NpyArray& a);
/// The elements of an int32 ('<i4') tensor.
std::vector<std::int32_t> int32_values(const NpyArray& a);

/// case.json of a folder: the folder and file checked (size and nesting depth before parsing),
/// parsed, a JSON object at the top.
struct CaseJson {
  fs::path dir;
  std::string jname;  ///< the case.json path, as errors name it
  json j;
};
CaseJson parse_case_json(const std::string& dir);
/// The operator case.json names, if it is a string naming a known operator (no other check: the
/// operator's reader reports every error in its order).
std::optional<CaseOperator> peek_operator(const json& j);

/// The identity of a case: format, version, name, provenance, seed, operator. read_header checks
/// the top-level keys against `top_keys` and that the operator is `op`.
struct CaseHeader {
  std::string name, provenance;
  std::uint64_t seed = 0;
};
CaseHeader read_header(const Reader& r, const json& j, CaseOperator op,
                       const std::set<std::string>& top_keys);
ojson header_json(const CaseHeader& h, CaseOperator op);

/// Scalars of the forward blocks `tables`, `lookups`, `options` read into a ForwardCase (tensors
/// not yet loaded). `extra_option_keys`: keys the operator adds to `options` (read by the caller).
struct ForwardScalars {
  std::int64_t total_elems = 0;  ///< Σ E·D
  std::int64_t num_bags = 0;
  std::string bags_why;  ///< "T·B + 1 (T=.., B=..)" or "Σ vbe_batch_sizes + 1"
  bool weighted = false;
  const json* options = nullptr;
};
ForwardScalars read_forward_scalars(const Reader& r, const json& j, ForwardCase& p,
                                    const std::set<std::string>& extra_option_keys = {});
/// weights, offsets, indices and per-sample weights of the forward inputs.
void read_forward_tensors(const fs::path& d, const ForwardScalars& s, ForwardCase& p);
/// p.view(), tbe::validate, and the refusal of a bounds-check NONE case violating bounds.
ForwardProblem checked_forward_view(const std::string& dir, const Reader& r, ForwardCase& p);
/// The blocks tables, lookups, options of `p` (an operator adds its own keys to j["options"]).
void put_forward_blocks(ojson& j, const ForwardCase& p);
/// Writes weights, indices, offsets and (weighted) per-sample weights of `p`; adds the names
/// written to `written`.
void write_forward_tensors(const fs::path& d, const ForwardCase& p, std::set<std::string>& written);

/// Every field of two forward cases equal (per-sample weights by their bits).
bool same_forward_case(const ForwardCase& x, const ForwardCase& y);
/// Same length and the same bits (NaN payloads and -0 count).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// recorded.error: null, or one of `allowed`.
std::optional<std::string> read_recorded_error(const Reader& r, const json& rj,
                                               std::initializer_list<const char*> allowed);
void check_recorded_error(const std::optional<std::string>& error,
                          std::initializer_list<const char*> allowed, const char* writer);
/// The optional `expect` block.
std::optional<Expectation> read_expect(const Reader& r, const json& j);
void put_expect(ojson& j, const std::optional<Expectation>& e);

/// The readers of each operator on a parsed case.json (read_case, read_backward_case,
/// read_lce_case, read_attention_case parse the folder's case.json and call these; read_any_case
/// parses once and dispatches).
CaseFile read_forward_json(const CaseJson& cj);
BackwardCaseFile read_backward_json(const CaseJson& cj);
LceCaseFile read_lce_json(const CaseJson& cj);
AttentionCaseFile read_attention_json(const CaseJson& cj);

/// Creates the folder (InvalidArgument naming it if it cannot).
fs::path make_case_dir(const std::string& dir);
/// Writes a 1-D tensor and records its name in `written`.
void write_tensor(const fs::path& d, const char* file, DType t, std::int64_t n, const void* data,
                  std::set<std::string>& written);
/// Writes a tensor of `shape` (prod(shape) elements of t at data) and records its name.
void write_shaped_tensor(const fs::path& d, const char* file, DType t,
                         std::vector<std::int64_t> shape, const void* data,
                         std::set<std::string>& written);
/// Removes every fixed tensor name not in `written`, then writes case.json.
void finish_case_dir(const fs::path& d, const ojson& j, const std::set<std::string>& written);
/// A finite double for JSON (JSON has no NaN/inf): InvalidArgument naming `key` otherwise.
double finite_for_json(double v, const std::string& key);

}  // namespace tbe::io::detail
