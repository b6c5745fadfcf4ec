// Forward case folders: case.json + fixed-name .npy tensors (docs/case-files.md). read_case treats
// the folder as untrusted: every key is type- and range-checked, tensor files are found only under
// their fixed names (never a path taken from the JSON), sizes are checked against the scalars
// before use, and the assembled problem goes through tbe::validate. The helpers shared with the
// other operators' readers are in case_file_common.cpp.
#include "tbe/io/case_file.h"

#include "case_file_internal.h"
#include "tbe/problem.h"

namespace tbe::io {

using namespace detail;

namespace {

// The error kinds of a recorded forward call.
constexpr std::initializer_list<const char*> kForwardErrors = {"bounds_check", "invalid_argument",
                                                               "device_error"};

}  // namespace

std::string to_string(CaseOperator op) {
  switch (op) {
    case CaseOperator::Forward: return "forward";
    case CaseOperator::Backward: return "backward";
    case CaseOperator::IkboLce: return "ikbo-lce";
    case CaseOperator::IkboAttention: return "ikbo-attention";
  }
  return "operator(" + std::to_string(static_cast<int>(op)) + ")";
}

CaseOperator parse_case_operator(const std::string& s, const char* what) {
  for (CaseOperator op : {CaseOperator::Forward, CaseOperator::Backward, CaseOperator::IkboLce,
                          CaseOperator::IkboAttention})
    if (s == to_string(op)) return op;
  throw InvalidArgument(what, std::string(what) + ": '" + s +
                                  "' is not a supported operator (allowed: forward, backward, "
                                  "ikbo-lce, ikbo-attention)");
}

CaseOperator read_case_operator(const std::string& dir) {
  const CaseJson cj = parse_case_json(dir);
  const Reader r(cj.jname);
  if (r.string(cj.j, "", "format") != kFormatName)
    r.fail("format", "'" + cj.j["format"].get<std::string>() + "' is not '" + kFormatName + "'");
  r.integer(cj.j, "", "version", kFormatVersion, kFormatVersion);
  return r.parse_enum(cj.j, "", "operator",
                      [](const std::string& x, const char* w) { return parse_case_operator(x, w); });
}

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
  const fs::path d = make_case_dir(dir);
  const ForwardCase& p = c.problem;
  if (!is_index(p.index_dtype)) throw InvalidArgument("lookups.index_dtype", "write_case: index dtype " + to_string(p.index_dtype) + " is not int32/int64");

  ojson j = header_json({c.name, c.provenance, c.seed}, CaseOperator::Forward);
  put_forward_blocks(j, p);
  if (c.recorded) {
    const RecordedOutputs& r = *c.recorded;
    if (!r.output.empty() && r.error)
      throw InvalidArgument("recorded.error", "write_case: recorded output together with error '" + *r.error + "' (record one or the other)");
    ojson rj;
    rj["implementation"] = r.implementation;
    rj["output_dtype"] = to_string(r.output_dtype);
    // An output file unless the implementation raised (an empty output of 0 elements is a file).
    const bool has_output = !r.output.empty() || !r.error.has_value();
    rj["output"] = has_output ? ojson(kOutputFile) : ojson(nullptr);
    rj["warnings"] = r.warnings ? ojson(*r.warnings) : ojson(nullptr);
    rj["error"] = r.error ? ojson(*r.error) : ojson(nullptr);
    j["recorded"] = rj;
  }
  put_expect(j, c.expect);

  std::set<std::string> written;
  write_forward_tensors(d, p, written);
  if (c.recorded && j["recorded"]["output"].is_string()) {
    const RecordedOutputs& r = *c.recorded;
    const std::size_t item = dtype_size(r.output_dtype);
    if (r.output.size() % item != 0)
      throw InvalidArgument("recorded.output", "write_case: " + std::to_string(r.output.size()) + " output bytes are not a multiple of " + std::to_string(item));
    write_tensor(d, kOutputFile, r.output_dtype, static_cast<std::int64_t>(r.output.size() / item), r.output.data(), written);
  }
  finish_case_dir(d, j, written);
}

namespace detail {

CaseFile read_forward_json(const CaseJson& cj) {
  const std::string dir = cj.dir.string();
  const Reader r(cj.jname);
  const json& j = cj.j;
  const CaseHeader h = read_header(r, j, CaseOperator::Forward,
                                   {"format", "version", "name", "provenance", "seed", "operator",
                                    "tables", "lookups", "options", "recorded", "expect"});
  CaseFile c;
  c.name = h.name;
  c.provenance = h.provenance;
  c.seed = h.seed;
  ForwardCase& p = c.problem;
  const ForwardScalars s = read_forward_scalars(r, j, p);
  read_forward_tensors(cj.dir, s, p);
  const ForwardProblem view = checked_forward_view(dir, r, p);
  const PrecisionPolicy& pol = p.options.policy;

  // --- recorded outputs ---
  if (const json* rj = r.optional_member(j, "recorded")) {
    if (!rj->is_object()) r.fail("recorded", "expected an object, got " + type_name(*rj));
    r.only_keys(*rj, "recorded", {"implementation", "output_dtype", "output", "warnings", "error"});
    RecordedOutputs rec;
    rec.implementation = r.string(*rj, "recorded", "implementation");
    rec.output_dtype = r.parse_enum(*rj, "recorded", "output_dtype", [](const std::string& x, const char* w) { return parse_dtype(x, w); });
    if (rec.output_dtype != pol.output)
      r.fail("recorded.output_dtype", "'" + to_string(rec.output_dtype) + "' != options.policy.output '" + to_string(pol.output) + "'");
    if (const json* w = r.optional_member(*rj, "warnings")) rec.warnings = r.integer(*w, "recorded.warnings", 0, kI64);
    rec.error = read_recorded_error(r, *rj, kForwardErrors);
    if (r.file_or_null(*rj, "recorded", "output", kOutputFile)) {
      if (rec.error) r.fail("recorded.output", "an output together with error '" + *rec.error + "'");
      const OutputLayout layout = make_output_layout(view);
      NpyArray out = load_tensor(cj.dir, kOutputFile, "recorded.output", npy_descr(rec.output_dtype),
                                 "recorded.output_dtype " + to_string(rec.output_dtype), layout.numel,
                                 "the output size of the case", ShapeRule::AnyShape);
      rec.output = std::move(out.data);
    } else if (!rec.error) {
      r.fail("recorded.output", "null, but recorded.error is null too (record an output or an error)");
    }
    c.recorded = std::move(rec);
  }
  c.expect = read_expect(r, j);
  return c;
}

}  // namespace detail

CaseFile read_case(const std::string& dir) { return read_forward_json(parse_case_json(dir)); }

bool bitwise_equal(const CaseFile& a, const CaseFile& b) {
  auto same_recorded = [](const RecordedOutputs& r, const RecordedOutputs& q) {
    return r.implementation == q.implementation && r.output_dtype == q.output_dtype &&
           r.output == q.output && r.warnings == q.warnings && r.error == q.error;
  };
  return same_forward_case(a.problem, b.problem) && a.name == b.name &&
         a.provenance == b.provenance && a.seed == b.seed &&
         a.recorded.has_value() == b.recorded.has_value() &&
         (!a.recorded || same_recorded(*a.recorded, *b.recorded)) && a.expect == b.expect;
}

}  // namespace tbe::io
