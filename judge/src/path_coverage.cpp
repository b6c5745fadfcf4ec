// The path coverage row (path_coverage.h).
#include "tbe/judge/path_coverage.h"

#include <ostream>

namespace tbe::judge {

std::string to_string(PathFamily f) {
  switch (f) {
    case PathFamily::Forward: return "forward";
    case PathFamily::Backward: return "backward";
    case PathFamily::Ikbo: return "ikbo";
  }
  return "?";
}

const std::vector<std::string>& required_paths(PathFamily f) {
  static const std::vector<std::string> forward = {
      "forward.pooled.vec4",     "forward.pooled.vec8",     "forward.pooled.scalar",
      "forward.pooled.column_chunks", "forward.pooled.group_per_bag", "forward.vbe",
      "forward.pooled.row_index32",
      "forward.sequence.vec4",   "forward.sequence.vec8",   "forward.sequence.scalar",
      "bounds.fused",            "bounds.separate",         "bounds.fatal_check"};
  // (not forward.pooled.streamed: the matrix's features have mixed D, so each whole-warp launch
  // has B bags, below ForwardTuning::staged_auto_min_bags at the default B = 8192 (at --full's
  // B = 131072 they reach it and stream); tests/optimized [streamed] forces it and compares it
  // bit for bit with the group-per-bag kernel)
  // (not the chunk-order sorts, bwd.chunk_order.one-cta / .device-wide: which one runs follows N,
  // and every long-route row of the main job's seed-large slices, N ~ 1.3 M lookups, has more than
  // the one CTA's 9216 chunk slots (H200, session 14); tests/optimized [chunk_order] forces both
  // and compares them bit for bit, and the fuzz campaign's small cases reach the one-CTA sort)
  // (not the transpose's keys, bwd.sort.row_bits / .linear_ids / .wide_digits: Auto takes
  // linearized ids, whose digit follows Σ E_t; tests/optimized [transpose_keys] forces both keys
  // and both digits and compares them bit for bit)
  static const std::vector<std::string> backward = {
      "bwd.sort.key32", "bwd.short",      "bwd.long.chunked", "bwd.long.fused",
      "bwd.sr",         "bwd.psw_grad",   "bwd.group.warp",   "bwd.group.block",
      "bwd.nondeterministic", "bwd.gather.staged", "bwd.gather.registers",
      "bwd.short.staged", "bwd.short.registers",
      "bwd.runs.interleaved",  // RunLaunch::Auto on the rows of the staged short-run instance
      "forward.small_table.mma", "bwd.small_table", "bwd.small_table.saved_counts",
      "bwd.small_table.no_sort",  // the small-table rows' hi/lo probe: one feature, no sort
      "bwd.chunk_schedule.dynamic"};  // the default schedule of every long-route row
  // every LCE stage that runs under the default round-once policy (lt-epilogue implements
  // user-rounded only and then runs padded-k, docs/ikbo.md); both attention kernels at the
  // main job's Dh = 128 (the wgmma one through AttentionKernel::Auto, which picks it on compute
  // capability 9.0, the devices the kernels are built for; the mma.sync one on the last backend
  // of select_ikbo_backends) and both groupings (one CTA at the main job's B through
  // AttentionGroupingBuild::Auto; device-wide on the last backend); the wgmma kernel's TMA-store
  // epilogue (AttentionEpilogue::Auto: every 64-row block of the main job's n_seed = 64 is one
  // whole candidate; its register epilogue serves other layouts, tests/optimized)
  static const std::vector<std::string> ikbo = {
      "lce.decomposed",  "lce.padded-k",         "lce.fused-epilogue",
      "lce.l2-chunked",  "lce.user-gemm.cublas", "lce.candidate-gemm.cublas",
      "lce.gather-add",  "attention.grouping.one-cta", "attention.grouping.cub-sort-rle",
      "attention.wgmma.dh128.kb128.stages2",
      "attention.mma-sync.dh128.kb128.qreg.stages3", "attention.epilogue.tma-store"};
  switch (f) {
    case PathFamily::Forward: return forward;
    case PathFamily::Backward: return backward;
    case PathFamily::Ikbo: break;
  }
  return ikbo;
}

std::vector<std::string> missing_paths(const FamilyPaths& fp) {
  std::vector<std::string> out;
  if (!fp.checked) return out;
  for (const std::string& p : required_paths(fp.family))
    if (!fp.exercised.count(p)) out.push_back(p);
  return out;
}

RowResult path_coverage_row(const std::vector<FamilyPaths>& families) {
  RowResult row;
  row.target = Target::Device;
  std::string not_checked;
  for (const FamilyPaths& fp : families) {
    const std::string name = to_string(fp.family);
    if (!fp.checked) {
      not_checked += (not_checked.empty() ? "" : "; ") + name + ": " + fp.why_not;
      continue;
    }
    const std::vector<std::string> missing = missing_paths(fp);
    const std::size_t required = required_paths(fp.family).size();
    std::string detail = std::to_string(required - missing.size()) + "/" +
                         std::to_string(required) + " required paths exercised";
    if (!missing.empty()) {
      detail += "; never exercised: ";
      for (std::size_t i = 0; i < missing.size(); ++i) detail += (i ? ", " : "") + missing[i];
    }
    row.checks.push_back(agreement("paths." + name, missing.empty(), detail));
    for (const std::string& p : fp.exercised) row.paths.push_back(p);
  }
  if (row.checks.empty()) {
    row.verdict = Verdict::Skipped;
    row.reason = not_checked.empty() ? "no section ran" : not_checked;
    return row;
  }
  finish_row(row);
  if (row.verdict == Verdict::Passed && !not_checked.empty())
    row.reason = "not checked: " + not_checked;
  return row;
}

void print_path_coverage(std::ostream& os, const RowResult& row) {
  if (row.verdict == Verdict::Skipped) {
    os << "path coverage: skipped (" << row.reason << ")\n";
    return;
  }
  if (row.verdict == Verdict::Failed) {
    os << "FAILED path coverage:\n";
    for (const Check& c : row.checks)
      os << "  " << c.name << ": " << (c.passed ? "passed, " : "FAILED, ") << c.detail << "\n";
    return;
  }
  os << "path coverage: passed (";
  for (std::size_t i = 0; i < row.checks.size(); ++i)
    os << (i ? "; " : "") << row.checks[i].name << " " << row.checks[i].detail;
  os << ")" << (row.reason.empty() ? "" : "; " + row.reason) << "\n";
}

nlohmann::json path_coverage_json(const RowResult& row) {
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : row.checks)
    checks.push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
  return {{"verdict", to_string(row.verdict)}, {"reason", row.reason}, {"checks", checks}};
}

}  // namespace tbe::judge
