// tbe-verify's IKBO rows (ikbo_rows.h).
#include "tbe/judge/ikbo_rows.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "tbe/errors.h"
#include "tbe/host_case.h"
#include "tbe/io/ikbo_case_file.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/poisoned_output.h"
#include "tbe/judge/runner.h"
#include "tbe/oracle/ikbo_oracle.h"
#include "tbe/oracle/report_json.h"

namespace tbe::judge {

namespace {

using ikbo::MapKind;

constexpr std::size_t kCanaryBytes = 64;
constexpr std::byte kPoison{0x7E};  // FP16 0x7E7E is NaN; every canary byte must survive
constexpr std::byte kUntouched{0x5A};  // the bad-map call's buffer: no byte may change

// The output buffer of one IKBO call: numel elements of st, then a canary of kCanaryBytes.
PoisonedOutput ikbo_output(DType st, std::int64_t numel, std::byte poison) {
  return PoisonedOutput(st, numel, static_cast<std::int64_t>(kCanaryBytes / dtype_size(st)),
                        poison);
}

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}
std::string position_text(double pos) {
  if (std::isnan(pos)) return "nan";
  if (std::isinf(pos)) return pos > 0 ? "+inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.3g", pos);
  return buf;
}

ikbo::IkboPolicy policy_for(const IkboConfig& cfg, DType st) {
  return {st, st == DType::F32 ? DType::F64 : DType::F32, cfg.lce_rounding};
}

std::uint64_t row_seed(const IkboConfig& cfg, const IkboRowSpec& s) {
  return cfg.seed * 0x9E3779B97F4A7C15ull + stable_hash(ikbo_label(s));
}

/// What the judged call of a row returned, as a case folder records it.
struct IkboCall {
  std::optional<std::vector<std::byte>> output;
  std::optional<std::string> error;  ///< "invalid_argument" or "device_error"
};

/// Runs `call(out)` on a poisoned buffer with canaries and judges it (its output or error kept in
/// `captured`); then the bad-map check.
template <class Problem, class Call, class Judge>
RowResult run_target(Target target, const std::string& backend, const Problem& p, DType st,
                     std::int64_t numel, Call&& call, Judge&& judge, IkboCall& captured) {
  RowResult row;
  row.target = target;
  row.paths.push_back(backend);
  const auto t0 = std::chrono::steady_clock::now();
  PoisonedOutput out = ikbo_output(st, numel, kPoison);
  bool ran = true;
  try {
    call(p, out.data());
  } catch (const std::exception& e) {
    ran = false;
    captured.error = dynamic_cast<const InvalidArgument*>(&e) ? "invalid_argument" : "device_error";
    row.checks.push_back({"run", false, std::string("the backend threw: ") + e.what(), {}});
  }
  if (ran) {
    captured.output = out.output();
    std::vector<double> values(static_cast<std::size_t>(numel));
    for (std::int64_t i = 0; i < numel; ++i) values[i] = load_as_double(st, out.data(), i);
    oracle::CheckReport rep = judge(values);
    row.checks.push_back({"oracle", rep.passed(), rep.summary(), rep});
    const bool canary = out.canary_intact();
    row.checks.push_back({"canary", canary,
                          canary ? "sentinels past the end intact"
                                 : "the backend wrote past the end of the output",
                          {}});
  }
  // Error agreement: a map value = U is rejected before anything is written.
  if (p.B > 0) {
    std::vector<std::int32_t> bad(p.cand_to_user, p.cand_to_user + p.B);
    bad.back() = static_cast<std::int32_t>(p.U);
    Problem q = p;
    q.cand_to_user = bad.data();
    PoisonedOutput untouched = ikbo_output(st, numel, kUntouched);
    const std::string want = "cand_to_user[" + std::to_string(p.B - 1) + "]";
    std::string detail;
    bool ok = false;
    try {
      call(q, untouched.data());
      detail = "no error for cand_to_user[" + std::to_string(p.B - 1) + "] = U";
    } catch (const InvalidArgument& e) {
      ok = e.argument() == want && untouched.untouched();
      detail = std::string(e.what()) +
               (untouched.untouched() ? "" : " (but the output was written)");
      if (e.argument() != want) detail += " (argument '" + e.argument() + "', want '" + want + "')";
    } catch (const std::exception& e) {
      detail = std::string("wrong error type: ") + e.what();
    }
    row.checks.push_back({"error.bad-map", ok, detail, {}});
  }
  finish_row(row);
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

}  // namespace

std::string to_string(IkboOp op) { return op == IkboOp::Lce ? "lce" : "attention"; }

std::string ikbo_label(const IkboRowSpec& s) {
  return "ikbo op=" + to_string(s.op) + ",dtype=" + tbe::to_string(s.storage) +
         ",map=" + ikbo::to_string(s.map) + (s.jagged ? ",keys=jagged" : "");
}

std::vector<IkboRowSpec> ikbo_row_specs(bool include_fp32) {
  std::vector<IkboRowSpec> out;
  std::vector<DType> types = {DType::F16, DType::BF16};
  if (include_fp32) types.push_back(DType::F32);
  for (IkboOp op : {IkboOp::Lce, IkboOp::Attention})
    for (DType st : types)
      for (MapKind m : ikbo::kAllMapKinds) {
        out.push_back({op, st, m, false});
        if (op == IkboOp::Attention) out.push_back({op, st, m, true});
      }
  return out;
}

Verdict IkboRowResult::verdict() const {
  bool passed = false;
  for (const RowResult& r : rows) {
    if (r.verdict == Verdict::Failed) return Verdict::Failed;
    passed = passed || r.verdict == Verdict::Passed;
  }
  return passed ? Verdict::Passed : Verdict::Skipped;
}

IkboRowResult run_ikbo_row(const IkboConfig& cfg, const IkboRowSpec& spec,
                           std::int64_t* saved_failures) {
  IkboRowResult res;
  res.spec = spec;
  res.label = ikbo_label(spec);
  const std::uint64_t seed = row_seed(cfg, spec);
  const ikbo::IkboPolicy pol = policy_for(cfg, spec.storage);
  std::unique_ptr<ikbo::IkboBackend> reference = ikbo::make_reference_ikbo_backend();
  RowResult skipped;
  skipped.target = Target::Device;
  skipped.verdict = Verdict::Skipped;
  skipped.reason = cfg.skip_reason;

  IkboCall captured;
  std::string implementation;
  // Device rows: one per backend under test (LCE: each of cfg.lce_devices when set); the
  // recorded output of a failing row is the first failing backend's.
  auto run_all = [&](const auto& p, std::int64_t numel, auto&& call_on, auto&& judge,
                     const std::vector<ikbo::IkboBackend*>& devices) {
    if (cfg.device) {
      bool failed = false;
      for (ikbo::IkboBackend* dev : devices) {
        std::vector<std::string> device_paths;  // IkboBackend::last_paths of its successful calls
        IkboCall call;
        res.rows.push_back(run_target(Target::Device, dev->name(), p, spec.storage, numel,
                                      [&](const auto& q, void* o) {
                                        call_on(*dev, q, o);
                                        const auto paths = dev->last_paths();
                                        device_paths.insert(device_paths.end(), paths.begin(),
                                                            paths.end());
                                      },
                                      judge, call));
        add_paths(res.rows.back(), device_paths);
        if (!failed) {
          implementation = dev->name();
          captured = std::move(call);
          failed = res.rows.back().verdict == Verdict::Failed;
        }
      }
    } else {
      implementation = reference->name();
      res.rows.push_back(skipped);
      res.rows.push_back(run_target(Target::SelfCheck, reference->name(), p, spec.storage, numel,
                                    [&](const auto& q, void* o) { call_on(*reference, q, o); },
                                    judge, captured));
    }
  };
  // A failing row as a case folder of its operator (`CaseFile` io::LceCaseFile or
  // io::AttentionCaseFile holding `problem`).
  auto save = [&](auto cf, const auto& problem) {
    if (res.verdict() != Verdict::Failed || cfg.save_failures_dir.empty() || !saved_failures)
      return;
    if (*saved_failures >= cfg.save_failures_max) {
      res.save_note = "not saved (--save-failures-max " + std::to_string(cfg.save_failures_max) +
                      " reached)";
      return;
    }
    std::string failed;
    for (const RowResult& row : res.rows)
      for (const Check& ck : row.checks)
        if (!ck.passed) failed += (failed.empty() ? "" : ", ") + ck.name;
    cf.name = res.label;
    cf.provenance = "tbe-verify --rows ikbo --seed " + std::to_string(cfg.seed) +
                    " --ikbo-rounding " + ikbo::to_string(cfg.lce_rounding) + ": row " +
                    res.label + " (" + res.shape + ") failed: " + failed;
    cf.seed = seed;
    cf.problem = problem;
    cf.recorded = io::IkboRecordedOutput{implementation, captured.output, captured.error};
    cf.expect = io::Expectation{"pass", ""};  // what the suite requires of the backend
    const std::string dir = cfg.save_failures_dir + "/ikbo-" + to_string(spec.op) + "-" +
                            tbe::to_string(spec.storage) + "-" + ikbo::to_string(spec.map) +
                            (spec.jagged ? "-jagged" : "");
    try {
      io::write_case(dir, cf);
      res.saved_case = dir;
      ++*saved_failures;
    } catch (const std::exception& e) {
      res.save_note = std::string("saving the case failed: ") + e.what();
    }
  };

  if (spec.op == IkboOp::Lce) {
    const ikbo::LceCase c =
        ikbo::make_lce_case(cfg.lce_shape ? *cfg.lce_shape
                                          : ikbo::named_lce_shape("ikbo-lce", cfg.lce_batch),
                            pol, spec.map, seed);
    const ikbo::LceProblem p = c.view();
    res.shape = "B=" + std::to_string(p.B) + " U=" + std::to_string(p.U) +
                " M=" + std::to_string(p.M) + " N=" + std::to_string(p.N) +
                " K_c=" + std::to_string(p.K_c) + " K_u=" + std::to_string(p.K_u);
    const oracle::IkboEnclosures enc = oracle::compute_lce_enclosures(p);
    run_all(p, ikbo::lce_output_numel(p),
            [](ikbo::IkboBackend& be, const ikbo::LceProblem& q, void* o) { be.lce(q, o); },
            [&](const std::vector<double>& v) { return oracle::judge_lce(p, enc, v); },
            cfg.lce_devices.empty() ? std::vector<ikbo::IkboBackend*>{cfg.device} : cfg.lce_devices);
    save(io::LceCaseFile{}, c);
  } else {
    ikbo::AttentionShape sh =
        ikbo::named_attention_shape("ikbo-fa", cfg.attention_S, cfg.attention_batch);
    sh.U = cfg.attention_users;
    sh.jagged = spec.jagged;
    const ikbo::AttentionCase c = ikbo::make_attention_case(sh, pol, spec.map, seed);
    const ikbo::AttentionProblem p = c.view();
    res.shape = "B=" + std::to_string(p.B) + " U=" + std::to_string(p.U) +
                " n_seed=" + std::to_string(p.n_seed) + " H=" + std::to_string(p.H) +
                " Dh=" + std::to_string(p.Dh) +
                (p.jagged() ? " jagged keys=" + std::to_string(p.total_keys())
                            : " S=" + std::to_string(p.S));
    const oracle::IkboEnclosures enc = oracle::compute_attention_enclosures(p);
    run_all(p, ikbo::attention_output_numel(p),
            [](ikbo::IkboBackend& be, const ikbo::AttentionProblem& q, void* o) {
              be.attention(q, o);
            },
            [&](const std::vector<double>& v) { return oracle::judge_attention(p, enc, v); },
            cfg.attention_devices.empty() ? std::vector<ikbo::IkboBackend*>{cfg.device}
                                          : cfg.attention_devices);
    save(io::AttentionCaseFile{}, c);
  }
  return res;
}

IkboTotals count_ikbo_rows(const std::vector<IkboRowResult>& results) {
  IkboTotals t;
  for (const IkboRowResult& r : results)
    for (const RowResult& row : r.rows) {
      if (row.verdict == Verdict::Passed) ++t.passed;
      else if (row.verdict == Verdict::Failed) ++t.failed;
      else ++t.skipped;
    }
  return t;
}

void print_ikbo_rows(std::ostream& os, const IkboConfig& cfg,
                     const std::vector<IkboRowResult>& results) {
  os << "IKBO rows (" << (cfg.device ? "gpu: " + cfg.device->name() : "gpu: skipped, " +
                                                                          cfg.skip_reason +
                                                                          "; cpu: reference "
                                                                          "self-checks")
     << "; " << (cfg.lce_shape ? std::string("custom lce shape") : "ikbo-lce at B=" + std::to_string(cfg.lce_batch)) << ", ikbo-fa at B=" << cfg.attention_batch
     << " U=" << cfg.attention_users << " S=" << cfg.attention_S << "; lce rounding "
     << ikbo::to_string(cfg.lce_rounding) << ")\n";
  const std::string head = pad("op", 11) + pad("dtype", 7) + pad("map", 26) + pad("target", 16) +
                           pad("verdict", 9) + pad("worst", 9) + "backend / shape";
  os << head << "\n" << std::string(head.size() + 10, '-') << "\n";
  for (const IkboRowResult& r : results)
    for (const RowResult& row : r.rows) {
      std::string worst = "-";
      if (const Check* c = row.worst_check()) worst = position_text(c->report->worst.position);
      os << pad(to_string(r.spec.op), 11) << pad(tbe::to_string(r.spec.storage), 7)
         << pad(ikbo::to_string(r.spec.map), 26) << pad(to_string(row.target), 16)
         << pad(to_string(row.verdict), 9) << pad(worst, 9)
         << (row.verdict == Verdict::Skipped ? std::string("-") : row.paths.front());
      for (std::size_t i = 1; i < row.paths.size(); ++i)  // the kernels that ran
        os << (i == 1 ? " [" : " ") << row.paths[i] << (i + 1 == row.paths.size() ? "]" : "");
      os << "; " << r.shape << "\n";
    }
  bool any = false;
  for (const IkboRowResult& r : results)
    for (const RowResult& row : r.rows) {
      if (row.verdict != Verdict::Failed) continue;
      if (!any) os << "IKBO failures:\n";
      any = true;
      os << "  " << r.label << " (" << to_string(row.target) << ")\n";
      for (const Check& c : row.checks)
        if (!c.passed) os << "      " << c.name << ": " << c.detail << "\n";
      os << "      replay: tbe-verify --rows ikbo --seed " << cfg.seed << " --ikbo-rounding "
         << ikbo::to_string(cfg.lce_rounding) << (cfg.device ? "" : " --backend cpu") << "\n";
      if (!r.saved_case.empty())
        os << "      replay case: " << replay_case_command(r.saved_case)
           << "   (judge the saved outputs: " << check_case_command(r.saved_case) << ")\n";
      else if (!r.save_note.empty())
        os << "      case file: " << r.save_note << "\n";
    }
  const IkboTotals t = count_ikbo_rows(results);
  os << "ikbo rows: " << t.passed << " passed, " << t.failed << " failed, " << t.skipped
     << " skipped\n";
}

nlohmann::json ikbo_rows_json(const IkboConfig& cfg, const std::vector<IkboRowResult>& results) {
  using nlohmann::json;
  json j;
  j["lce_shape"] = {{"name", "ikbo-lce"}, {"B", cfg.lce_batch}};
  j["attention_shape"] = {{"name", "ikbo-fa"},
                          {"B", cfg.attention_batch},
                          {"U", cfg.attention_users},
                          {"S", cfg.attention_S}};
  j["lce_rounding"] = ikbo::to_string(cfg.lce_rounding);
  j["backend"] = cfg.device ? cfg.device->name() : "";
  if (!cfg.device) j["skip_reason"] = cfg.skip_reason;
  json rows = json::array();
  for (const IkboRowResult& r : results) {
    json jr = {{"label", r.label},
               {"op", to_string(r.spec.op)},
               {"dtype", tbe::to_string(r.spec.storage)},
               {"map", ikbo::to_string(r.spec.map)},
               {"shape", r.shape},
               {"verdict", to_string(r.verdict())}};
    if (!r.saved_case.empty()) jr["replay_case"] = replay_case_command(r.saved_case);
    json targets = json::array();
    for (const RowResult& row : r.rows) {
      json jt = {{"target", to_string(row.target)},
                 {"verdict", to_string(row.verdict)},
                 {"seconds", row.seconds}};
      if (!row.reason.empty()) jt["reason"] = row.reason;
      if (!row.paths.empty()) {
        jt["backend"] = row.paths.front();
        jt["paths"] = std::vector<std::string>(row.paths.begin() + 1, row.paths.end());
      }
      json checks = json::array();
      for (const Check& c : row.checks) {
        json jc = {{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}};
        if (c.report) jc["report"] = *c.report;
        checks.push_back(jc);
      }
      jt["checks"] = checks;
      targets.push_back(jt);
    }
    jr["rows"] = targets;
    rows.push_back(jr);
  }
  j["rows"] = rows;
  const IkboTotals t = count_ikbo_rows(results);
  j["totals"] = {{"passed", t.passed}, {"failed", t.failed}, {"skipped", t.skipped}};
  return j;
}

}  // namespace tbe::judge
