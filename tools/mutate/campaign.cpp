// tbe-mutate's campaign (campaign.h).
#include "mutate/campaign.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <stdexcept>

#include "mutate/child.h"
#include "tbe/cuda/mutation.h"
#include "tbe/judge/fail_line.h"

namespace tbe::mutate {

namespace {

constexpr const char* kBaseline = "(baseline)";

std::string family_section(const std::string& fault) {
  // small_table_: the small-table rows are backward rows (their forward is judged there too)
  if (fault.rfind("bwd_", 0) == 0 || fault.rfind("small_table_", 0) == 0) return "backward";
  if (fault.rfind("lce_", 0) == 0 || fault.rfind("attn_", 0) == 0) return "ikbo";
  return "forward";  // fwd_, seq_, bounds_
}

/// Whether `program` is a mutation build: with an unknown TBE_MUTANT it must refuse to start,
/// naming the variable.
bool is_mutation_build(const std::string& program) {
  ChildSpec probe;
  probe.argv = {program, "--help"};
  probe.fault = "(probe: not a fault)";
  probe.budget_seconds = 60;
  const ChildResult r = run_child(probe);
  return r.exit_code != 0 && r.output.find("unknown fault") != std::string::npos;
}

struct Runner {
  const MutateOptions& o;
  std::ostream& log;
  std::filesystem::path out;

  /// The main job for `fault` ("" for the baseline): its sections as children, stopped at the
  /// first kill; the output of every child is appended to `log_file`.
  Verdict verify(const std::string& fault, double budget, std::ofstream& log_file) {
    std::vector<std::vector<std::string>> sections;
    if (o.own_section_first && !fault.empty()) {
      for (const std::string& s : section_order(fault)) sections.push_back({"--rows", s});
    } else if (o.own_section_first) {
      for (const char* s : {"forward", "backward", "ikbo"}) sections.push_back({"--rows", s});
    } else {
      sections.push_back({});
    }
    const std::string name = fault.empty() ? "baseline" : fault;
    Verdict total;
    total.outcome = Outcome::Survived;
    double spent = 0.0;
    for (const std::vector<std::string>& rows : sections) {
      ChildSpec c;
      const std::filesystem::path cases = o.cases.empty() ? out : std::filesystem::path(o.cases);
      c.argv = {o.verify, "--require-gpu", "--save-failures", (cases / name).string(),
                "--save-failures-max", o.save_cases ? "1" : "0"};
      c.argv.insert(c.argv.end(), rows.begin(), rows.end());
      c.argv.insert(c.argv.end(), o.verify_args.begin(), o.verify_args.end());
      c.fault = fault;
      c.budget_seconds = budget - spent;
      c.stop_at_kill = !o.keep_going;
      c.is_failure = [](std::string_view line) { return judge::parse_fail_line(line).has_value(); };
      if (c.budget_seconds <= 0) {
        total.outcome = Outcome::Budget;
        break;
      }
      log << "  " << name << ": tbe-verify" << (rows.empty() ? "" : " --rows " + rows[1]) << " ..."
          << std::flush;
      const ChildResult r = run_child(c);
      log_file << "$ TBE_MUTANT=" << fault << " " << [&] {
        std::string cmd;
        for (const std::string& a : c.argv) cmd += (cmd.empty() ? "" : " ") + a;
        return cmd;
      }() << "\n" << r.output << "\n(exit " << r.exit_code << ", signal " << r.signal << ", "
               << r.seconds << " s)\n\n";
      if (!fault.empty() &&
          r.output.find(tbe::cuda::fault_announcement(fault)) == std::string::npos)
        throw std::runtime_error("tbe-verify did not announce fault '" + fault +
                                 "': not a mutation build, or the fault was not applied (log: " +
                                 (out / (name + ".log")).string() + ")");
      Verdict v = judge_verify(r);
      log << " " << to_string(v.outcome) << " (" << std::fixed << std::setprecision(1) << r.seconds
          << " s)\n";
      if (v.outcome == Outcome::Killed) {
        v.seconds += spent;
        return v;
      }
      spent += r.seconds;
      if (v.outcome != Outcome::Survived) {
        v.seconds = spent;
        return v;
      }
    }
    total.seconds = spent;
    return total;
  }

  Verdict tests(const std::string& fault, double budget, std::ofstream& log_file) {
    ChildSpec c;
    c.argv = {o.tests};
    c.argv.insert(c.argv.end(), o.tests_args.begin(), o.tests_args.end());
    c.fault = fault;
    c.budget_seconds = budget;
    c.stop_at_kill = !o.keep_going;
    c.is_failure = [](std::string_view line) {
      return line.size() >= 7 && line.substr(line.size() - 7) == "FAILED:";
    };
    log << "  " << (fault.empty() ? "baseline" : fault) << ": test_optimized ..." << std::flush;
    const ChildResult r = run_child(c);
    log_file << "$ TBE_MUTANT=" << fault << " " << o.tests << "\n" << r.output << "\n(exit "
             << r.exit_code << ", signal " << r.signal << ", " << r.seconds << " s)\n\n";
    const Verdict v = judge_tests(r);
    log << " " << to_string(v.outcome) << " (" << std::fixed << std::setprecision(1) << r.seconds
        << " s)\n";
    return v;
  }

  KillRow row(const std::string& fault, const std::string& where, bool baseline) {
    KillRow k;
    k.fault = baseline ? kBaseline : fault;
    k.where = where;
    const std::string name = baseline ? "baseline" : fault;
    const std::filesystem::path log_path = out / (name + ".log");
    std::ofstream log_file(log_path);
    if (!log_file) throw std::runtime_error("--out: cannot write '" + log_path.string() + "'");
    k.log = log_path.string();
    k.verify = verify(baseline ? "" : fault, baseline ? o.baseline_budget : o.budget, log_file);
    if (o.with_tests) k.tests = tests(baseline ? "" : fault, baseline ? o.baseline_budget : o.tests_budget, log_file);
    return k;
  }
};

}  // namespace

std::vector<std::string> section_order(const std::string& fault) {
  const std::string own = family_section(fault);
  std::vector<std::string> order{own};
  for (const char* s : {"forward", "backward", "ikbo"})
    if (s != own) order.push_back(s);
  return order;
}

void print_catalogue(std::ostream& os) {
  for (const tbe::cuda::FaultInfo& f : tbe::cuda::kFaults)
    os << f.name << "\t" << f.where << "\t" << f.what << "\n";
}

int run_campaign(const MutateOptions& o, std::ostream& os, std::ostream& log) {
  std::vector<const tbe::cuda::FaultInfo*> faults;
  if (o.faults.empty() && !o.baseline_only) {
    for (const tbe::cuda::FaultInfo& f : tbe::cuda::kFaults) faults.push_back(&f);
  } else {
    for (const std::string& name : o.faults) faults.push_back(&tbe::cuda::parse_fault(name));
  }
  for (const std::string* p : {&o.verify, o.with_tests ? &o.tests : nullptr}) {
    if (p != nullptr && !is_mutation_build(*p)) {
      os << "tbe-mutate: '" << *p << "' is not a mutation build (configure with the preset "
         << "`mutation`, -DTBE_MUTATION=ON): with TBE_MUTANT unknown it did not refuse to run\n";
      return 3;
    }
  }
  Runner run{o, log, o.out};
  std::filesystem::create_directories(run.out);
  const auto t0 = std::chrono::steady_clock::now();
  KillRow baseline;
  baseline.fault = kBaseline;
  if (o.baseline) {
    log << "baseline (no fault)\n";
    baseline = run.row("", "", true);
  }
  std::vector<KillRow> rows;
  for (const tbe::cuda::FaultInfo* f : faults) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.total_budget > 0 && spent >= o.total_budget) {
      KillRow k;
      k.fault = std::string(f->name);
      k.where = std::string(f->where);
      rows.push_back(k);  // NotRun
      continue;
    }
    log << f->name << "\n";
    rows.push_back(run.row(std::string(f->name), std::string(f->where), false));
  }
  print_kill_table(os, baseline, rows, o.with_tests);
  if (!o.json.empty()) {
    std::ofstream j(o.json);
    j << kill_table_json(baseline, rows).dump(2) << "\n";
    if (!j) throw std::runtime_error("--json: cannot write '" + o.json + "'");
  }
  const bool baseline_ok = !o.baseline || (baseline.verify.outcome == Outcome::Survived &&
                                           (!o.with_tests || baseline.tests.outcome == Outcome::Survived));
  if (!baseline_ok) {
    os << "tbe-mutate: the baseline (no fault) did not pass: the kill table means nothing\n";
    return 3;
  }
  if (!o.baseline)
    os << "(--no-baseline: the table assumes a passing baseline of this build from an earlier run)\n";
  for (const KillRow& r : rows)
    if (!killed(r)) return 1;
  return 0;
}

}  // namespace tbe::mutate
