// tbe-mutate's output parsers and kill table (kill_table.h).
#include "mutate/kill_table.h"

#include <iomanip>
#include <ostream>
#include <sstream>

#include "tbe/judge/fail_line.h"

namespace tbe::mutate {

namespace {

/// The lines of `text` (without their '\n').
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_rule(std::string_view line, char c) {
  line = trim(line);
  return line.size() >= 20 && line.find_first_not_of(c) == std::string_view::npos;
}

std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

/// Killed by the exit status alone: "exit N" / "signal N".
Failure exit_failure(const ChildResult& r) {
  return Failure{r.signal != 0 ? "signal " + std::to_string(r.signal)
                               : "exit " + std::to_string(r.exit_code),
                 "", "", ""};
}

std::string verdict_text(const Verdict& v) {
  std::string s = to_string(v.outcome);
  if (v.outcome == Outcome::Killed || v.outcome == Outcome::Survived || v.outcome == Outcome::Budget)
    s += " " + fixed(v.seconds, 1) + " s";
  if (v.outcome == Outcome::Killed && v.failure) s += " by " + v.failure->check;
  return s;
}

}  // namespace

std::optional<Failure> first_verify_failure(std::string_view output) {
  std::optional<Failure> fallback;
  for (std::string_view line : lines_of(output)) {
    if (const std::optional<judge::FailLine> f = judge::parse_fail_line(line))
      return Failure{f->check, f->section + ": " + f->row, f->case_dir, f->replay};
    if (fallback) continue;
    const std::string_view t = trim(line);
    if (t.rfind("FAILED: path ", 0) == 0) fallback = Failure{std::string(t), "backward paths", "", ""};
    else if (t.rfind("tbe-verify: error: ", 0) == 0) fallback = Failure{std::string(t), "", "", ""};
  }
  return fallback;
}

std::optional<Failure> first_catch_failure(std::string_view output) {
  // Console reporter: a rule of '-', the test case name (then section names, indented), a rule
  // of '-', the source line, a rule of '.', then the assertions, "<file>:<line>: FAILED:".
  std::string name;
  const std::vector<std::string_view> lines = lines_of(output);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (is_rule(lines[i], '-') && i + 1 < lines.size() && !is_rule(lines[i + 1], '-') &&
        !trim(lines[i + 1]).empty()) {
      // a header opens here if a second rule follows within the name lines
      std::size_t j = i + 1;
      while (j < lines.size() && !is_rule(lines[j], '-') && !is_rule(lines[j], '.')) ++j;
      if (j < lines.size() && is_rule(lines[j], '-')) {
        name = std::string(trim(lines[i + 1]));
        i = j - 1;
        continue;
      }
    }
    const std::string_view t = trim(lines[i]);
    if (t.size() >= 7 && t.substr(t.size() - 7) == "FAILED:")
      return Failure{name.empty() ? std::string("unknown test") : name, std::string(t), "", ""};
  }
  return std::nullopt;
}

std::string to_string(Outcome o) {
  switch (o) {
    case Outcome::Killed: return "killed";
    case Outcome::Survived: return "survived";
    case Outcome::Budget: return "budget";
    case Outcome::NoDevice: return "no-device";
    case Outcome::NotRun: return "not-run";
  }
  return "?";
}

namespace {

// One child's verdict: killed by the first failure its output names (`failure`, from
// judged_output), else by the budget, a clean exit (survived), the child's no-device exit code,
// or any other exit.
Verdict judge_child(const ChildResult& r, std::optional<Failure> failure, int no_device_exit) {
  Verdict v;
  if (failure) {
    v.outcome = Outcome::Killed;
    v.failure = std::move(failure);
    v.seconds = r.kill_seconds > 0 ? r.kill_seconds : r.seconds;
    return v;
  }
  v.seconds = r.seconds;
  if (r.over_budget) {
    v.outcome = Outcome::Budget;
  } else if (r.signal == 0 && r.exit_code == 0) {
    v.outcome = Outcome::Survived;
  } else if (r.signal == 0 && r.exit_code == no_device_exit) {
    v.outcome = Outcome::NoDevice;
  } else {
    v.outcome = Outcome::Killed;
    v.failure = exit_failure(r);
  }
  return v;
}

/// What the child printed before tbe-mutate stopped it at its budget (all of it otherwise): what
/// follows the stop (Catch2's "FAILED: ... SIGTERM") is the stop itself, not a check, so a hang
/// stays "budget".
std::string_view judged_output(const ChildResult& r) {
  return r.over_budget ? std::string_view(r.output).substr(0, r.output_before_stop)
                       : std::string_view(r.output);
}

}  // namespace

Verdict judge_verify(const ChildResult& r) {
  return judge_child(r, first_verify_failure(judged_output(r)), 4);  // tbe-verify --require-gpu: 4
}

Verdict judge_tests(const ChildResult& r) {
  return judge_child(r, first_catch_failure(judged_output(r)), 77);  // the GPU test label: 77 = skipped
}

bool killed(const KillRow& r) {
  return r.verify.outcome == Outcome::Killed || r.tests.outcome == Outcome::Killed;
}

void print_kill_table(std::ostream& os, const KillRow& baseline, const std::vector<KillRow>& rows,
                      bool with_tests) {
  os << "baseline (no fault): main job " << verdict_text(baseline.verify);
  if (with_tests) os << "; tests " << verdict_text(baseline.tests);
  os << "\n\n";
  os << std::left << std::setw(36) << "fault" << std::setw(52) << "main job (tbe-verify)";
  if (with_tests) os << std::setw(44) << "tests (test_optimized)";
  os << "first failing row / case folder / replay\n";
  os << std::string(with_tests ? 170 : 126, '-') << "\n";
  std::vector<std::string> survivors;
  int by_main = 0, total_killed = 0;
  for (const KillRow& r : rows) {
    os << std::setw(36) << r.fault << std::setw(52) << verdict_text(r.verify);
    if (with_tests) os << std::setw(44) << verdict_text(r.tests);
    const std::optional<Failure>& f = r.verify.failure ? r.verify.failure : r.tests.failure;
    if (f) {
      os << f->row;
      if (!f->case_dir.empty()) os << "  case " << f->case_dir;
      if (!f->replay.empty()) os << "  replay: " << f->replay;
    }
    os << "\n";
    if (r.verify.outcome == Outcome::Killed) ++by_main;
    if (killed(r)) ++total_killed;
    else survivors.push_back(r.fault + " (" + r.where + ")");
  }
  os << "\nkilled " << total_killed << " of " << rows.size() << " faults (main job alone: "
     << by_main << ")";
  if (!survivors.empty()) {
    os << "; not killed:";
    for (const std::string& s : survivors) os << "\n  " << s;
  }
  os << "\n";
}

nlohmann::json kill_table_json(const KillRow& baseline, const std::vector<KillRow>& rows) {
  auto verdict = [](const Verdict& v) {
    nlohmann::json j{{"outcome", to_string(v.outcome)}, {"seconds", v.seconds}};
    if (v.failure)
      j["failure"] = {{"check", v.failure->check}, {"row", v.failure->row},
                      {"case", v.failure->case_dir}, {"replay", v.failure->replay}};
    return j;
  };
  auto row = [&](const KillRow& r) {
    return nlohmann::json{{"fault", r.fault}, {"where", r.where}, {"killed", killed(r)},
                          {"verify", verdict(r.verify)}, {"tests", verdict(r.tests)},
                          {"log", r.log}};
  };
  nlohmann::json j;
  j["tool"] = "tbe-mutate";
  j["baseline"] = row(baseline);
  j["faults"] = nlohmann::json::array();
  for (const KillRow& r : rows) j["faults"].push_back(row(r));
  return j;
}

}  // namespace tbe::mutate
