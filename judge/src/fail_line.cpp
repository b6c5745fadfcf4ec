// tbe-verify's machine-readable fail lines (include/tbe/judge/fail_line.h).
#include "tbe/judge/fail_line.h"

#include <nlohmann/json.hpp>

#include "tbe/ikbo.h"
#include "tbe/judge/case_commands.h"

namespace tbe::judge {

namespace {

/// "<target> <name>" of the first failed check of `row` ("<target> unknown" if none is marked).
std::string first_failed_check(const RowResult& row) {
  for (const Check& c : row.checks)
    if (!c.passed) return to_string(row.target) + " " + c.name;
  return to_string(row.target) + " unknown";
}

}  // namespace

std::string format_fail_line(const FailLine& f) {
  const nlohmann::json j = {{"section", f.section}, {"row", f.row},       {"check", f.check},
                            {"case", f.case_dir},   {"replay", f.replay}};
  return std::string(kFailLinePrefix) + " " + j.dump();
}

std::optional<FailLine> parse_fail_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.size() <= kFailLinePrefix.size() + 1 || line.substr(0, kFailLinePrefix.size()) != kFailLinePrefix ||
      line[kFailLinePrefix.size()] != ' ')
    return std::nullopt;
  const nlohmann::json j =
      nlohmann::json::parse(line.substr(kFailLinePrefix.size() + 1), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  FailLine f;
  for (auto [key, field] : {std::pair{"section", &f.section}, std::pair{"row", &f.row},
                            std::pair{"check", &f.check}, std::pair{"case", &f.case_dir},
                            std::pair{"replay", &f.replay}}) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return std::nullopt;
    *field = it->get<std::string>();
  }
  return f;
}

std::vector<FailLine> fail_lines(const RunInfo& info, const CaseResult& r) {
  std::vector<FailLine> out;
  for (const RowResult& row : r.rows) {
    if (row.verdict != Verdict::Failed) continue;
    out.push_back({"forward", r.label, first_failed_check(row), r.saved_case,
                   r.saved_case.empty() ? replay_command(info, r.axes)
                                        : replay_case_command(r.saved_case)});
  }
  return out;
}

std::vector<FailLine> fail_lines(const BackwardRowResult& r, const std::string& replay_prefix) {
  if (r.row.verdict != Verdict::Failed) return {};
  return {{"backward", r.label, first_failed_check(r.row), "",
           replay_prefix + " --backward-row " + std::to_string(r.index + 1)}};
}

std::vector<FailLine> fail_lines(const IkboConfig& cfg, const IkboRowResult& r) {
  std::vector<FailLine> out;
  for (const RowResult& row : r.rows) {
    if (row.verdict != Verdict::Failed) continue;
    out.push_back({"ikbo", r.label, first_failed_check(row), "",
                   "tbe-verify --rows ikbo --seed " + std::to_string(cfg.seed) +
                       " --ikbo-rounding " + ikbo::to_string(cfg.lce_rounding) +
                       (cfg.device ? "" : " --backend cpu")});
  }
  return out;
}

std::vector<FailLine> fail_lines(const LargeTableRow& r, std::uint64_t seed) {
  if (r.row.verdict != Verdict::Failed) return {};
  const std::string section = r.name == "large.backward" ? "backward" : "forward";
  return {{section, r.name, first_failed_check(r.row), "",
           "tbe-verify --full --rows " + section + " --batch 64 --seed " + std::to_string(seed)}};
}

}  // namespace tbe::judge
