// Tables, JSON, replay commands and progress of tbe-verify.
#include "tbe/judge/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>

#include "tbe/judge/case_commands.h"

namespace tbe::judge {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string pad(std::string s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

std::string position_text(double pos) {
  if (std::isnan(pos)) return "nan";
  if (std::isinf(pos)) return "inf";
  return fixed(pos, 3);
}

std::string distribution_text(const WorkloadSpec& s) {
  switch (s.distribution) {
    case IndexDistribution::Uniform:
      return "uniform";
    case IndexDistribution::Zipf:
      return "zipf " + fixed(s.zipf_alpha, 2);
    case IndexDistribution::HeavyHitters:
      return "heavy-hitters";
    default:
      return "other";
  }
}

const RowResult* row_of(const CaseResult& r, Target t) {
  for (const RowResult& row : r.rows)
    if (row.target == t) return &row;
  return nullptr;
}

// Counters of one (axis value, target) cell.
struct Cell {
  std::int64_t passed = 0, failed = 0, skipped = 0;
  double worst = -1.0;  // largest |position|, -1 if none judged
  void add(const RowResult& row) {
    if (row.verdict == Verdict::Passed)
      ++passed;
    else if (row.verdict == Verdict::Failed)
      ++failed;
    else
      ++skipped;
    if (const Check* c = row.worst_check()) {
      const double p = std::abs(c->report->worst.position);
      if (std::isnan(p) || p > worst || std::isnan(worst)) worst = p;
    }
  }
  std::string text() const {
    return pad(std::to_string(passed), 6, true) + pad(std::to_string(failed), 6, true) +
           pad(std::to_string(skipped), 6, true) +
           pad(worst < 0 ? std::string("-") : position_text(worst), 9, true);
  }
};

nlohmann::json number_or_text(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

nlohmann::json verdict_json(const oracle::ElementVerdict& v) {
  return {{"feature", v.where.feature},
          {"sample", v.where.sample},
          {"rank", v.where.rank},
          {"row", v.where.row},
          {"column", v.where.column},
          {"flat", v.where.flat},
          {"lo", number_or_text(v.enclosure.lo)},
          {"hi", number_or_text(v.enclosure.hi)},
          {"value", number_or_text(v.value)},
          {"reference", number_or_text(v.reference)},
          {"position", number_or_text(v.position)},
          {"inside", v.inside}};
}

}  // namespace

std::string spaced_label(const CaseAxes& c) {
  std::string s;
  for (const std::string& a : axis_names())
    s += (s.empty() ? "" : " ") + a + "=" + axis_value(c, a);
  return s;
}

Totals count_rows(const std::vector<CaseResult>& results) {
  Totals t;
  for (const CaseResult& r : results) {
    for (const RowResult& row : r.rows) {
      const bool device = row.target == Target::Device;
      if (row.verdict == Verdict::Passed) {
        ++t.passed;
        ++(device ? t.device_passed : t.cpu_passed);
      } else if (row.verdict == Verdict::Failed) {
        ++t.failed;
        ++(device ? t.device_failed : t.cpu_failed);
      } else {
        ++t.skipped;
        if (device) ++t.device_skipped;
      }
    }
  }
  return t;
}

std::string replay_command(const RunInfo& info, const CaseAxes& c) {
  std::string s =
      "tbe-verify --batch " + std::to_string(info.spec.B) + " --seed " + std::to_string(info.seed);
  if (info.device_is_cpu) s += " --backend cpu";
  if (info.design == Design::Full) s += " --design full";
  return s + " --only " + case_label(c);
}

void print_header(std::ostream& os, const RunInfo& info) {
  const WorkloadSpec& s = info.spec;
  os << "tbe-verify: TBE forward, backend under test vs the FP64 reference through the enclosure "
        "oracle\n";
  if (!info.device_present) {
    os << "NO GPU: " << info.skip_reason << ".\n"
       << "  Every GPU row is reported SKIPPED (never passed). Instead, the CPU self-checks run on "
          "the same workload:\n"
       << "  the oracle judges the reference's rounded output and CPU emulations of the policy "
          "(2 summation orders per case),\n"
       << "  plus reference invariants (repair count = max-scan count, FATAL first offender).\n";
  }
  os << "workload : " << s.name << " E=" << s.E << " L=" << s.L << " B=" << s.B << " ("
     << distribution_text(s) << "), as one base per weight type: 12 features over 10 tables, D "
        "1..2048 mixed, E and L per table (docs/workloads.md \"tbe-verify's matrix bases\")\n";
  os << "           pooling=none cases use the first " << info.sequence_samples
     << " samples of each feature (ceil(B/L): the [N, D] output matches the pooled output's "
        "size)\n";
  os << "           vbe=1 cases: R=" << info.vbe_ranks
     << " ranks, batch_sizes[f][r] uniform in [0, B/R] (seeded; rank 0 >= 1, feature 0's last "
        "rank empty)\n";
  os << "device   : " << info.device;
  if (info.device_present) os << " (backend " << info.backend << ")";
  if (info.device_is_cpu)
    os << " [--backend cpu: the CPU reference stands in for the device; this tests the tool]";
  os << "\n";
  os << "policies :";
  std::size_t k = 0;
  for (const PrecisionLevel& l : precision_levels())
    os << (k++ % 2 == 0 && k > 1 ? "\n           " : " ")
       << to_string(make_policy(l.policy, l.weights, l.output));
  os << "\n";
  os << "seed     : " << info.seed << "   threads: " << info.threads << "\n";
  os << "design   : " << to_string(info.design) << ", " << info.design_cases << " cases";
  if (info.design == Design::Pairwise)
    os << " (greedy covering array over 6 factors: precision level (8) x weighted (2) x index (2) "
          "x pooling (3) x bounds (4) x vbe (2); every applicable pair of values at least once; "
          "full product 768)";
  else
    os << " (full cross product, 640 applicable + 128 not applicable)";
  os << "\n";
  if (!info.only.empty()) {
    os << "only     : " << info.only;
    if (info.only_from_full) os << " (matched nothing in the design: taken from the full product)";
    os << "\n";
  }
  os << "coverage : " << info.coverage.covered << "/" << info.coverage.required
     << " applicable value pairs covered by the cases run\n";
  os << "bounds   : warning/ignore run a malformed copy (bad indices, a decreasing offset pair, a "
        "short last offset);\n"
        "           fatal runs the valid input and a malformed copy; none runs valid input only\n";
  os << "\n";
}

void print_list(std::ostream& os, const RunInfo& info, const std::vector<CaseAxes>& cases) {
  std::size_t i = 0;
  for (const CaseAxes& c : cases) {
    ++i;
    std::string why;
    const bool ok = applicable(c, &why);
    os << "[" << pad(std::to_string(i), 3, true) << "] " << spaced_label(c);
    if (!ok) os << "   (" << why << ")";
    if (ok && c.bounds != BoundsCheckMode::None) {
      const FaultSet f = fault_set_for(c);
      std::string faults;
      if (f.bad_indices) faults += " bad-indices";
      if (f.decreasing_pair) faults += " decreasing-pair";
      if (f.short_last_offset) faults += " short-last-offset";
      os << "   malformed:" << faults;
    }
    os << "\n";
  }
  os << cases.size() << (cases.size() == 1 ? " case" : " cases") << " ("
     << (info.only_from_full ? "from the full product: --only matched nothing in the " : "")
     << to_string(info.design) << (info.only_from_full ? " design" : "") << ")\n";
}

void print_results(std::ostream& os, const RunInfo& info, const std::vector<CaseResult>& results) {
  const bool with_self = !info.device_present;
  // ---- per-axis tables ----
  os << "Results per axis value (gpu: " << (info.device_present ? info.backend : "skipped, no GPU")
     << (with_self ? "; cpu: reference self-checks" : "")
     << "; worst = largest |position| in enclosure radii, <= 1 is inside)\n";
  std::string head = pad("axis", 9) + pad("value", 14) + pad("cases", 6, true) + "  | gpu" +
                     pad("pass", 6, true) + pad("fail", 6, true) + pad("skip", 6, true) +
                     pad("worst", 9, true);
  if (with_self)
    head += "  | cpu" + pad("pass", 6, true) + pad("fail", 6, true) + pad("skip", 6, true) +
            pad("worst", 9, true);
  os << head << "\n" << std::string(head.size(), '-') << "\n";
  for (const std::string& axis : axis_names()) {
    bool first = true;
    for (const std::string& value : axis_values(axis)) {
      std::int64_t cases = 0;
      Cell dev, self;
      for (const CaseResult& r : results) {
        if (axis_value(r.axes, axis) != value) continue;
        ++cases;
        if (const RowResult* row = row_of(r, Target::Device)) dev.add(*row);
        if (const RowResult* row = row_of(r, Target::SelfCheck)) self.add(*row);
      }
      if (cases == 0) continue;
      os << pad(first ? axis : "", 9) << pad(value, 14) << pad(std::to_string(cases), 6, true)
         << "  |    " << dev.text();
      if (with_self) os << "  |    " << self.text();
      os << "\n";
      first = false;
    }
  }
  os << "\n";

  // ---- kernel paths ----
  std::map<std::string, std::int64_t> dev_paths, self_paths;
  std::int64_t fused = 0, separate = 0;
  for (const CaseResult& r : results) {
    if (const RowResult* row = row_of(r, Target::Device)) {
      for (const auto& p : row->paths) ++dev_paths[p];
      if (row->verdict != Verdict::Skipped) (r.input.fused_bounds_check ? fused : separate)++;
    }
    if (const RowResult* row = row_of(r, Target::SelfCheck))
      for (const auto& p : row->paths) ++self_paths[p];
  }
  if (info.device_present) {
    os << "Kernel paths exercised (rows that reported each; strategy fused bounds check in "
       << fused << " rows, separate pass in " << separate << "):\n";
    if (dev_paths.empty()) os << "  (the backend reported none)\n";
    for (const auto& [p, n] : dev_paths)
      os << "  " << pad(p, 40) << pad(std::to_string(n), 6, true) << "\n";
  } else {
    os << "Kernel paths exercised: none (no GPU). CPU self-checks ran:";
    for (const auto& [p, n] : self_paths) os << " " << p << " x" << n;
    os << "\n";
  }
  os << "\n";

  // ---- failures ----
  bool any_failure = false;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const CaseResult& r = results[i];
    for (const RowResult& row : r.rows) {
      if (row.verdict != Verdict::Failed) continue;
      if (!any_failure) os << "Failures:\n";
      any_failure = true;
      os << "  [" << i + 1 << "] " << spaced_label(r.axes) << "\n";
      for (const Check& c : row.checks)
        if (!c.passed)
          os << "      " << to_string(row.target) << " " << c.name << ": " << c.detail << "\n";
      if (!r.input.malformed.empty()) os << "      malformed input: " << r.input.malformed << "\n";
      os << "      replay: " << replay_command(info, r.axes) << "\n";
      if (!r.saved_case.empty())
        os << "      replay case: " << replay_case_command(r.saved_case) << "   (judge the saved outputs: "
           << check_case_command(r.saved_case) << ")\n";
      else if (!r.save_note.empty())
        os << "      case file: " << r.save_note << "\n";
    }
  }
  if (any_failure) os << "\n";

  const Totals t = count_rows(results);
  os << "time: " << fixed(info.seconds_forward, 2) << " s forward matrix, "
     << fixed(info.seconds_generation, 2) << " s of it generating base workloads\n";
  os << "device rows (" << (info.backend.empty() ? std::string("no GPU") : info.backend)
     << "): " << t.device_passed << " passed, " << t.device_failed << " failed, "
     << t.device_skipped << " skipped; CPU self-check rows: " << t.cpu_passed << " passed, "
     << t.cpu_failed << " failed\n";
  os << t.passed << " passed, " << t.failed << " failed, " << t.skipped << " skipped\n";
}

nlohmann::json to_json(const RunInfo& info, const std::vector<CaseResult>& results) {
  using nlohmann::json;
  const WorkloadSpec& s = info.spec;
  json j;
  j["tool"] = "tbe-verify";
  j["workload"] = {{"name", s.name},
                   {"T", s.T},
                   {"E", s.E},
                   {"D", s.D},
                   {"L", s.L},
                   {"B", s.B},
                   {"distribution", distribution_text(s)},
                   {"sequence_samples", info.sequence_samples},
                   {"vbe_ranks", info.vbe_ranks}};
  j["seed"] = info.seed;
  j["device"] = info.device;
  j["device_present"] = info.device_present;
  if (!info.device_present) j["skip_reason"] = info.skip_reason;
  j["backend"] = info.backend;
  j["threads"] = info.threads;
  json pols = json::array();
  for (const PrecisionLevel& l : precision_levels())
    pols.push_back(to_string(make_policy(l.policy, l.weights, l.output)));
  j["policies"] = pols;
  j["design"] = {{"kind", to_string(info.design)},
                 {"cases", info.design_cases},
                 {"pairs_required", info.coverage.required},
                 {"pairs_covered", info.coverage.covered}};
  if (!info.only.empty()) j["only"] = info.only;

  json cases = json::array();
  for (std::size_t i = 0; i < results.size(); ++i) {
    const CaseResult& r = results[i];
    json axes;
    for (const std::string& a : axis_names()) axes[a] = axis_value(r.axes, a);
    json rows = json::array();
    for (const RowResult& row : r.rows) {
      json checks = json::array();
      for (const Check& c : row.checks) {
        json cj = {{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}};
        if (c.report)
          cj["report"] = {{"check", c.report->check},
                          {"policy", c.report->policy},
                          {"elements", c.report->elements},
                          {"failures", c.report->failures},
                          {"worst", verdict_json(c.report->worst)}};
        checks.push_back(std::move(cj));
      }
      json rj = {{"target", to_string(row.target)},
                 {"verdict", to_string(row.verdict)},
                 {"seconds", row.seconds},
                 {"paths", row.paths},
                 {"checks", std::move(checks)}};
      if (!row.checks.empty())
        rj["warnings"] = {{"expected", row.warnings_expected}, {"got", row.warnings_got}};
      if (!row.reason.empty()) rj["reason"] = row.reason;
      if (const Check* w = row.worst_check()) {
        rj["worst"] = verdict_json(w->report->worst);
        rj["worst"]["check"] = w->name;
      }
      rows.push_back(std::move(rj));
    }
    json cj = {{"id", i + 1},
               {"label", r.label},
               {"axes", std::move(axes)},
               {"applicable", r.applicable},
               {"verdict", to_string(r.verdict())},
               {"seconds", r.seconds},
               {"rows", std::move(rows)}};
    if (r.applicable)
      cj["input"] = {{"bags", r.input.bags},
                     {"lookups", r.input.lookups},
                     {"samples_per_feature", r.input.samples_per_feature},
                     {"vbe_ranks", r.input.vbe_ranks},
                     {"malformed", r.input.malformed},
                     {"bounds_strategy", r.input.fused_bounds_check ? "fused" : "separate"}};
    if (r.verdict() == Verdict::Failed) cj["replay"] = replay_command(info, r.axes);
    if (!r.saved_case.empty()) {
      cj["saved_case"] = r.saved_case;
      cj["replay_case"] = replay_case_command(r.saved_case);
    }
    cases.push_back(std::move(cj));
  }
  j["cases"] = std::move(cases);

  std::map<std::string, std::int64_t> paths;
  for (const CaseResult& r : results)
    for (const RowResult& row : r.rows)
      if (row.target == Target::Device)
        for (const auto& p : row.paths) ++paths[p];
  j["paths"] = paths;
  const Totals t = count_rows(results);
  j["summary"] = {{"passed", t.passed}, {"failed", t.failed}, {"skipped", t.skipped},
                  {"device", {{"passed", t.device_passed}, {"failed", t.device_failed},
                              {"skipped", t.device_skipped}}},
                  {"cpu_self_check", {{"passed", t.cpu_passed}, {"failed", t.cpu_failed}}}};
  j["seconds"] = {{"total", info.seconds_total},
                  {"forward", info.seconds_forward},
                  {"generation", info.seconds_generation}};
  return j;
}

// ---- progress -------------------------------------------------------------------------------

Progress::Progress(std::ostream& os, std::size_t total, bool tty)
    : os_(os), total_(total), tty_(tty) {}

void Progress::begin(std::size_t index, const CaseAxes& c) {
  if (!tty_) return;
  const std::size_t width = std::to_string(total_).size();
  std::ostringstream text;
  text << "[" << pad(std::to_string(index + 1), width, true) << "/" << total_ << "] "
       << spaced_label(c) << " ...";
  std::string line = text.str();
  const std::size_t w = line.size();
  if (w < last_width_) line += std::string(last_width_ - w, ' ');
  last_width_ = w;
  os_ << "\r" << line << std::flush;
}

void Progress::end(std::size_t index, const CaseResult& r) {
  if (tty_) return;
  const std::size_t width = std::to_string(total_).size();
  os_ << "[" << pad(std::to_string(index + 1), width, true) << "/" << total_ << "] "
      << spaced_label(r.axes) << "  " << to_string(r.verdict()) << " (" << fixed(r.seconds, 2)
      << " s)\n"
      << std::flush;
}

void Progress::finish() {
  if (tty_ && last_width_ > 0) os_ << "\r" << std::string(last_width_, ' ') << "\r" << std::flush;
}

}  // namespace tbe::judge
