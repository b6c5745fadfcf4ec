// Checks, rows and verdicts (row.h).
#include "tbe/judge/row.h"

#include <algorithm>
#include <cmath>

namespace tbe::judge {

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::Passed:
      return "passed";
    case Verdict::Failed:
      return "failed";
    default:
      return "skipped";
  }
}

std::string to_string(Target t) { return t == Target::Device ? "gpu" : "cpu-self-check"; }

Check agreement(const std::string& name, bool ok, const std::string& detail) {
  return Check{name, ok, detail, std::nullopt};
}

const Check* RowResult::worst_check() const {
  const Check* worst = nullptr;
  for (const Check& c : checks) {
    if (!c.report) continue;
    const double pos = std::abs(c.report->worst.position);
    if (!worst || pos > std::abs(worst->report->worst.position) || std::isnan(pos)) worst = &c;
  }
  return worst;
}

void finish_row(RowResult& row) {
  row.verdict = Verdict::Passed;
  for (const Check& c : row.checks) {
    if (!c.passed) {
      row.verdict = Verdict::Failed;
      row.reason = c.name + ": " + c.detail;
      break;
    }
  }
}

void add_paths(RowResult& row, const std::vector<std::string>& paths) {
  for (const auto& p : paths)
    if (std::find(row.paths.begin(), row.paths.end(), p) == row.paths.end()) row.paths.push_back(p);
}

}  // namespace tbe::judge
