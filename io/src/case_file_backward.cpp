// Backward case folders (docs/case-files.md "Backward"): the forward inputs (case_file_common.cpp)
// plus the optimizer, the stochastic-rounding stream, the optional GPU strategy, grad_output.npy,
// momentum.npy and the recorded outputs. Untrusted input: every key checked, fixed tensor names,
// sizes against the scalars, then tbe::validate(BackwardProblem, strategy).
#include "tbe/io/backward_case_file.h"

#include "case_file_internal.h"
#include "tbe/problem.h"

namespace tbe::io {

using namespace detail;

namespace {

constexpr std::initializer_list<const char*> kBackwardErrors = {"bounds_check", "invalid_argument",
                                                                "device_error"};

std::string to_string(BackwardStrategy::LongRuns l) {
  return l == BackwardStrategy::LongRuns::Chunked ? "chunked" : "fused";
}

BackwardStrategy::LongRuns parse_long_runs(const std::string& s, const char* what) {
  if (s == "chunked") return BackwardStrategy::LongRuns::Chunked;
  if (s == "fused") return BackwardStrategy::LongRuns::Fused;
  throw InvalidArgument(what, std::string(what) + ": '" + s + "' is not a long-run path (allowed: chunked, fused)");
}

bool is_adagrad(const BackwardCase& p) {
  return p.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad;
}

}  // namespace

void write_case(const std::string& dir, const BackwardCaseFile& c) {
  const BackwardCase& p = c.problem;
  const ForwardCase& f = p.forward;
  if (!is_index(f.index_dtype)) throw InvalidArgument("lookups.index_dtype", "write_case: index dtype " + to_string(f.index_dtype) + " is not int32/int64");
  if (!is_adagrad(p) && !p.momentum.empty())
    throw InvalidArgument("momentum", "write_case: " + std::to_string(p.momentum.size()) + " momentum values with optimizer sgd (it has no state)");
  const OptimizerConfig& o = p.options.optimizer;

  ojson j = header_json({c.name, c.provenance, c.seed}, CaseOperator::Backward);
  put_forward_blocks(j, f);
  j["options"]["optimizer"] = {
      {"kind", to_string(o.kind)},
      {"learning_rate", finite_for_json(o.learning_rate, "options.optimizer.learning_rate")},
      {"eps", finite_for_json(o.eps, "options.optimizer.eps")},
      {"weight_decay", finite_for_json(o.weight_decay, "options.optimizer.weight_decay")},
      {"weight_decay_mode", to_string(o.weight_decay_mode)},
      {"max_norm", finite_for_json(o.max_norm, "options.optimizer.max_norm")},
      {"max_gradient", finite_for_json(o.max_gradient, "options.optimizer.max_gradient")}};
  j["options"]["sr_seed"] = p.options.sr_seed;
  j["options"]["sr_offset"] = p.options.sr_offset;
  if (c.strategy) {
    const BackwardStrategy& s = c.strategy->strategy;
    j["strategy"] = {{"long_run_threshold", s.long_run_threshold},
                     {"chunk_size", s.chunk_size},
                     {"long_runs", to_string(s.long_runs)},
                     {"deterministic", s.deterministic},
                     {"hoisted", c.strategy->hoisted}};
  }
  if (c.recorded) {
    const BackwardRecordedOutputs& r = *c.recorded;
    check_recorded_error(r.error, kBackwardErrors, "write_case");
    if (r.error && (r.weights || r.momentum || r.per_sample_weight_grad))
      throw InvalidArgument("recorded.error", "write_case: recorded outputs together with error '" + *r.error + "' (record one or the other)");
    if (r.momentum && !is_adagrad(p))
      throw InvalidArgument("recorded.momentum", "write_case: recorded momentum with optimizer sgd (it has no state)");
    if (r.per_sample_weight_grad && f.per_sample_weights.empty())
      throw InvalidArgument("recorded.per_sample_weight_grad", "write_case: recorded per-sample-weight gradients of an unweighted case");
    auto file = [](bool present, const char* name) { return present ? ojson(name) : ojson(nullptr); };
    ojson rj;
    rj["implementation"] = r.implementation;
    rj["weights"] = file(r.weights.has_value(), kRecordedWeightsFile);
    rj["momentum"] = file(r.momentum.has_value(), kRecordedMomentumFile);
    rj["per_sample_weight_grad"] = file(r.per_sample_weight_grad.has_value(), kRecordedPswGradFile);
    rj["warnings"] = r.warnings ? ojson(*r.warnings) : ojson(nullptr);
    rj["error"] = r.error ? ojson(*r.error) : ojson(nullptr);
    j["recorded"] = rj;
  }
  put_expect(j, c.expect);

  const fs::path d = make_case_dir(dir);
  std::set<std::string> written;
  write_forward_tensors(d, f, written);
  const DType out = f.options.policy.output;
  if (p.grad_output.size() % dtype_size(out) != 0)
    throw InvalidArgument("grad_output", "write_case: " + std::to_string(p.grad_output.size()) + " grad_output bytes are not a multiple of the " + to_string(out) + " element size");
  write_tensor(d, kGradOutputFile, out, static_cast<std::int64_t>(p.grad_output.size() / dtype_size(out)),
               p.grad_output.data(), written);
  if (is_adagrad(p))
    write_tensor(d, kMomentumFile, DType::F32, static_cast<std::int64_t>(p.momentum.size()), p.momentum.data(), written);
  if (c.recorded) {
    const BackwardRecordedOutputs& r = *c.recorded;
    if (r.weights) {
      const std::size_t item = dtype_size(f.weights_dtype);
      if (r.weights->size() % item != 0)
        throw InvalidArgument("recorded.weights", "write_case: " + std::to_string(r.weights->size()) + " recorded weight bytes are not a multiple of " + std::to_string(item));
      write_tensor(d, kRecordedWeightsFile, f.weights_dtype, static_cast<std::int64_t>(r.weights->size() / item), r.weights->data(), written);
    }
    if (r.momentum)
      write_tensor(d, kRecordedMomentumFile, DType::F32, static_cast<std::int64_t>(r.momentum->size()), r.momentum->data(), written);
    if (r.per_sample_weight_grad)
      write_tensor(d, kRecordedPswGradFile, DType::F32, static_cast<std::int64_t>(r.per_sample_weight_grad->size()),
                   r.per_sample_weight_grad->data(), written);
  }
  finish_case_dir(d, j, written);
}

namespace detail {

BackwardCaseFile read_backward_json(const CaseJson& cj) {
  const std::string dir = cj.dir.string();
  const Reader r(cj.jname);
  const json& j = cj.j;
  const CaseHeader h = read_header(r, j, CaseOperator::Backward,
                                   {"format", "version", "name", "provenance", "seed", "operator",
                                    "tables", "lookups", "options", "strategy", "recorded", "expect"});
  BackwardCaseFile c;
  c.name = h.name;
  c.provenance = h.provenance;
  c.seed = h.seed;
  BackwardCase& p = c.problem;
  ForwardCase& f = p.forward;
  const ForwardScalars s = read_forward_scalars(r, j, f, {"optimizer", "sr_seed", "sr_offset"});

  // --- options: optimizer and the stochastic-rounding stream ---
  const json& oj = *s.options;
  const json& optj = r.object(oj, "options", "optimizer");
  const std::string op = "options.optimizer";
  r.only_keys(optj, op, {"kind", "learning_rate", "eps", "weight_decay", "weight_decay_mode", "max_norm", "max_gradient"});
  OptimizerConfig& o = p.options.optimizer;
  o.kind = r.parse_enum(optj, op, "kind", [](const std::string& x, const char* w) { return parse_optimizer(x, w); });
  o.learning_rate = r.number(optj, op, "learning_rate");
  o.eps = r.number(optj, op, "eps");
  o.weight_decay = r.number(optj, op, "weight_decay");
  o.weight_decay_mode = r.parse_enum(optj, op, "weight_decay_mode", [](const std::string& x, const char* w) { return parse_weight_decay_mode(x, w); });
  o.max_norm = r.number(optj, op, "max_norm");
  o.max_gradient = r.number(optj, op, "max_gradient");
  p.options.sr_seed = r.unsigned64(oj, "options", "sr_seed");
  p.options.sr_offset = r.unsigned64(oj, "options", "sr_offset");

  // --- strategy (provenance; semantics-neutral) ---
  BackwardStrategy strategy;  // the default when none is recorded (validated all the same)
  if (const json* sj = r.optional_member(j, "strategy")) {
    if (!sj->is_object()) r.fail("strategy", "expected an object, got " + type_name(*sj));
    r.only_keys(*sj, "strategy", {"long_run_threshold", "chunk_size", "long_runs", "deterministic", "hoisted"});
    BackwardStrategyRecord rec;
    rec.strategy.long_run_threshold = static_cast<std::int32_t>(r.integer(*sj, "strategy", "long_run_threshold", 1, 1 << 20));
    rec.strategy.chunk_size = static_cast<std::int32_t>(r.integer(*sj, "strategy", "chunk_size", 32, 4096));
    rec.strategy.long_runs = r.parse_enum(*sj, "strategy", "long_runs", parse_long_runs);
    rec.strategy.deterministic = r.boolean(*sj, "strategy", "deterministic");
    rec.hoisted = r.boolean(*sj, "strategy", "hoisted");
    strategy = rec.strategy;
    c.strategy = rec;
  }

  // --- tensors ---
  read_forward_tensors(cj.dir, s, f);
  const ForwardProblem fview = checked_forward_view(dir, r, f);
  const DType out = f.options.policy.output;
  const std::int64_t numel = make_output_layout(fview).numel;
  p.grad_output = load_tensor(cj.dir, kGradOutputFile, "grad_output", npy_descr(out),
                              "options.policy.output " + to_string(out), numel,
                              "the forward output size of the case", ShapeRule::AnyShape)
                      .data;
  const std::int64_t rows = total_rows(fview.tables);  // Σ E_t <= Σ E_t·D_t: no overflow
  std::error_code ec;
  if (is_adagrad(p)) {
    p.momentum = float_values(load_tensor(cj.dir, kMomentumFile, "momentum", "<f4",
                                          "rowwise Adagrad state (fp32)", rows, "Σ E_t"));
  } else if (fs::exists(cj.dir / kMomentumFile, ec)) {
    throw InvalidArgument("momentum", (cj.dir / kMomentumFile).string() +
                                          ": momentum: present, but options.optimizer.kind is sgd "
                                          "(it has no state; remove the file)");
  }
  if (const Status st = validate(p.view(), strategy); !st.ok())
    throw InvalidArgument(st.argument, cj.jname + ": " + st.message);

  // --- recorded outputs ---
  if (const json* rj = r.optional_member(j, "recorded")) {
    if (!rj->is_object()) r.fail("recorded", "expected an object, got " + type_name(*rj));
    r.only_keys(*rj, "recorded", {"implementation", "weights", "momentum", "per_sample_weight_grad", "warnings", "error"});
    BackwardRecordedOutputs rec;
    rec.implementation = r.string(*rj, "recorded", "implementation");
    if (const json* w = r.optional_member(*rj, "warnings")) rec.warnings = r.integer(*w, "recorded.warnings", 0, kI64);
    rec.error = read_recorded_error(r, *rj, kBackwardErrors);
    auto no_error = [&](const char* key) {
      if (rec.error) r.fail(key, "an output together with error '" + *rec.error + "'");
    };
    if (r.file_or_null(*rj, "recorded", "weights", kRecordedWeightsFile)) {
      no_error("recorded.weights");
      rec.weights = load_tensor(cj.dir, kRecordedWeightsFile, "recorded.weights", npy_descr(f.weights_dtype),
                                "tables.dtype " + to_string(f.weights_dtype), s.total_elems, "Σ E·D",
                                ShapeRule::AnyShape)
                        .data;
    }
    if (r.file_or_null(*rj, "recorded", "momentum", kRecordedMomentumFile)) {
      no_error("recorded.momentum");
      if (!is_adagrad(p)) r.fail("recorded.momentum", "an output for optimizer sgd (it has no state)");
      rec.momentum = float_values(load_tensor(cj.dir, kRecordedMomentumFile, "recorded.momentum", "<f4",
                                              "rowwise Adagrad state (fp32)", rows, "Σ E_t", ShapeRule::AnyShape));
    }
    if (r.file_or_null(*rj, "recorded", "per_sample_weight_grad", kRecordedPswGradFile)) {
      no_error("recorded.per_sample_weight_grad");
      if (!s.weighted) r.fail("recorded.per_sample_weight_grad", "an output for an unweighted case (lookups.weighted is false)");
      rec.per_sample_weight_grad = float_values(load_tensor(
          cj.dir, kRecordedPswGradFile, "recorded.per_sample_weight_grad", "<f4", "per-sample-weight gradients (fp32)",
          static_cast<std::int64_t>(f.indices.size()), "len(indices) N", ShapeRule::AnyShape));
    }
    if (!rec.error && !rec.weights && !rec.momentum && !rec.per_sample_weight_grad)
      r.fail("recorded", "no output and no error (record weights, momentum, per_sample_weight_grad or an error)");
    c.recorded = std::move(rec);
  }
  c.expect = read_expect(r, j);
  return c;
}

}  // namespace detail

BackwardCaseFile read_backward_case(const std::string& dir) {
  return read_backward_json(parse_case_json(dir));
}

bool bitwise_equal(const BackwardCaseFile& a, const BackwardCaseFile& b) {
  const BackwardCase& x = a.problem;
  const BackwardCase& y = b.problem;
  const OptimizerConfig& ox = x.options.optimizer;
  const OptimizerConfig& oy = y.options.optimizer;
  const bool same_problem =
      same_forward_case(x.forward, y.forward) && x.grad_output == y.grad_output &&
      same_bits(x.momentum, y.momentum) && ox.kind == oy.kind &&
      same_bits(ox.learning_rate, oy.learning_rate) && same_bits(ox.eps, oy.eps) &&
      same_bits(ox.weight_decay, oy.weight_decay) && ox.weight_decay_mode == oy.weight_decay_mode &&
      same_bits(ox.max_norm, oy.max_norm) && same_bits(ox.max_gradient, oy.max_gradient) &&
      x.options.sr_seed == y.options.sr_seed && x.options.sr_offset == y.options.sr_offset;
  auto same_strategy = [](const BackwardStrategyRecord& s, const BackwardStrategyRecord& t) {
    return s.strategy.long_run_threshold == t.strategy.long_run_threshold &&
           s.strategy.chunk_size == t.strategy.chunk_size &&
           s.strategy.long_runs == t.strategy.long_runs &&
           s.strategy.deterministic == t.strategy.deterministic && s.hoisted == t.hoisted;
  };
  auto same_floats = [](const std::optional<std::vector<float>>& s,
                        const std::optional<std::vector<float>>& t) {
    return s.has_value() == t.has_value() && (!s || same_bits(*s, *t));
  };
  auto same_recorded = [&](const BackwardRecordedOutputs& r, const BackwardRecordedOutputs& q) {
    return r.implementation == q.implementation && r.weights == q.weights &&
           same_floats(r.momentum, q.momentum) &&
           same_floats(r.per_sample_weight_grad, q.per_sample_weight_grad) &&
           r.warnings == q.warnings && r.error == q.error;
  };
  return same_problem && a.name == b.name && a.provenance == b.provenance && a.seed == b.seed &&
         a.strategy.has_value() == b.strategy.has_value() &&
         (!a.strategy || same_strategy(*a.strategy, *b.strategy)) &&
         a.recorded.has_value() == b.recorded.has_value() &&
         (!a.recorded || same_recorded(*a.recorded, *b.recorded)) && a.expect == b.expect;
}

}  // namespace tbe::io
