// One case of the tbe-verify matrix: derive its lookups from the base workload, run the backend
// under test (or the CPU self-checks), judge.
#include "tbe/judge/runner.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <sstream>

#include "tbe/bounds_check.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/io/case_file.h"
#include "tbe/judge/forward_call.h"
#include "tbe/judge/matrix_workload.h"
#include "tbe/judge/poisoned_output.h"
#include "tbe/oracle/policy_emulation.h"

namespace tbe::judge {
namespace {

// RNG streams of the derivations (the generator uses its own streams keyed by feature/bag).
constexpr std::uint64_t kVbeStream = 0x7662'6500'0000'0000ULL;    // "vbe"
constexpr std::uint64_t kFaultStream = 0x6661'756C'7400'0000ULL;  // "fault"

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- lookups: int64 masters, derived from the base without touching the tables ----------------

struct Lookups {
  std::vector<std::int64_t> indices;    // [N]
  std::vector<std::int64_t> offsets;    // [num_bags + 1]
  std::vector<float> weights;           // [N] per-sample weights (dropped for unweighted cases)
  std::int64_t batch_size = 0;          // B (non-VBE)
  std::vector<std::int32_t> vbe_sizes;  // [T·R] feature-major, or empty
  std::int32_t ranks = 0;
  std::vector<std::int32_t> feature_table_map;  // [T] of these lookups' features
  std::vector<std::int64_t> rows_of_feature;    // [T] E_t of each feature's table
  std::int64_t num_bags() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t num_features() const { return static_cast<std::int64_t>(feature_table_map.size()); }
};

// Keeps the first counts[j] bags of feature features[j] of a non-VBE source with B bags per
// feature, in the order of `features`; the kept bags of a feature stay consecutive and
// feature-major. counts[j] <= B.
Lookups take_leading_bags(const Lookups& src, std::int64_t B,
                          const std::vector<std::int32_t>& features,
                          const std::vector<std::int64_t>& counts) {
  Lookups out;
  std::int64_t total_bags = 0, total_lookups = 0;
  for (std::size_t j = 0; j < features.size(); ++j) {
    const std::int64_t f = features[j];
    total_bags += counts[j];
    total_lookups += src.offsets[f * B + counts[j]] - src.offsets[f * B];
    out.feature_table_map.push_back(src.feature_table_map[f]);
    out.rows_of_feature.push_back(src.rows_of_feature[f]);
  }
  out.indices.reserve(static_cast<std::size_t>(total_lookups));
  out.weights.reserve(static_cast<std::size_t>(total_lookups));
  out.offsets.reserve(static_cast<std::size_t>(total_bags + 1));
  out.offsets.push_back(0);
  for (std::size_t j = 0; j < features.size(); ++j) {
    const std::int64_t first = features[j] * B, n = counts[j];
    const std::int64_t s = src.offsets[first];
    const std::int64_t e = src.offsets[first + n];
    const std::int64_t rebase = static_cast<std::int64_t>(out.indices.size()) - s;
    out.indices.insert(out.indices.end(), src.indices.begin() + s, src.indices.begin() + e);
    if (!src.weights.empty())
      out.weights.insert(out.weights.end(), src.weights.begin() + s, src.weights.begin() + e);
    for (std::int64_t b = 1; b <= n; ++b) out.offsets.push_back(src.offsets[first + b] + rebase);
  }
  return out;
}

// VBE batch sizes [T][R] for a source with B samples per feature: R in 2..4 from the seed, each
// batch_sizes[f][r] uniform in [0, B / R] from stream (seed, f), rank 0 at least 1 (so every
// feature keeps a bag even when B < R) and feature 0's last rank empty (the empty-rank edge).
// Σ_r batch_sizes[f][r] <= B; feature f keeps its first Σ_r batch_sizes[f][r] bags.
Lookups derive_vbe(const Lookups& src, std::int64_t T, std::int64_t B, std::uint64_t seed) {
  Rng pick(seed, kVbeStream);
  const std::int32_t R = 2 + static_cast<std::int32_t>(pick.uniform_int(3));
  std::vector<std::int32_t> sizes(static_cast<std::size_t>(T * R));
  std::vector<std::int64_t> counts(static_cast<std::size_t>(T), 0);
  for (std::int64_t f = 0; f < T; ++f) {
    Rng rng(seed, kVbeStream + 1 + static_cast<std::uint64_t>(f));
    for (std::int32_t r = 0; r < R; ++r) {
      std::int32_t n = static_cast<std::int32_t>(rng.uniform_int(B / R + 1));
      if (r == 0 && B > 0) n = std::max(n, 1);
      if (f == 0 && r == R - 1) n = 0;
      sizes[f * R + r] = n;
      counts[f] += n;
    }
  }
  std::vector<std::int32_t> all(static_cast<std::size_t>(T));
  for (std::int64_t f = 0; f < T; ++f) all[f] = static_cast<std::int32_t>(f);
  Lookups out = take_leading_bags(src, B, all, counts);
  out.batch_size = 0;
  out.vbe_sizes = std::move(sizes);
  out.ranks = R;
  return out;
}

// Injects the faults of `fs` deterministically (stream (seed, kFaultStream)); returns what was
// injected. Bad index values: at the first injected position exactly E_t of its feature's table
// (the smallest bad value: a check that accepts i == E misses it), then E_max, E_max + 17,
// INT32_MAX, -1, -E_max (bad for every table).
std::string inject_faults(Lookups& l, const FaultSet& fs, std::int64_t max_rows,
                          std::uint64_t seed) {
  Rng rng(seed, kFaultStream);
  const std::int64_t nb = l.num_bags();
  const std::int64_t N = static_cast<std::int64_t>(l.indices.size());
  std::vector<std::string> parts;
  if (fs.bad_indices) {
    const std::int64_t first = std::clamp<std::int64_t>(l.offsets.front(), 0, N);
    const std::int64_t last = std::clamp<std::int64_t>(l.offsets.back(), first, N);
    if (last > first) {
      const std::int64_t values[] = {max_rows, max_rows + 17, INT32_MAX, -1, -max_rows};
      std::set<std::int64_t> positions;
      for (std::int64_t v : values) {
        const std::int64_t p = first + rng.uniform_int(last - first);
        l.indices[p] = v;
        positions.insert(p);
      }
      // the first position: E of its feature's table (bag of p, then its feature)
      const std::int64_t p0 = *positions.begin();
      const std::int64_t bag =
          std::upper_bound(l.offsets.begin(), l.offsets.end(), p0) - l.offsets.begin() - 1;
      std::int64_t feature = 0;
      if (l.vbe_sizes.empty()) {
        feature = l.batch_size > 0 ? bag / l.batch_size : 0;
      } else {
        std::int64_t end = 0;
        for (; feature < l.num_features(); ++feature) {
          for (std::int32_t r = 0; r < l.ranks; ++r) end += l.vbe_sizes[feature * l.ranks + r];
          if (bag < end) break;
        }
      }
      feature = std::clamp<std::int64_t>(feature, 0, l.num_features() - 1);
      l.indices[p0] = l.rows_of_feature[feature];
      parts.push_back(std::to_string(positions.size()) +
                      " bad indices (E_t at the first, E, E+17, 2^31-1, -1, -E)");
    }
  }
  if (fs.bad_first_offset && nb >= 1) {
    l.offsets[0] = -1 - rng.uniform_int(3);
    parts.push_back("offsets[0] = " + std::to_string(l.offsets[0]) + " < 0");
  }
  if (fs.decreasing_pair && nb >= 2) {
    const std::int64_t k = rng.uniform_int(nb - 1);  // k + 1 < nb: the last offset is separate
    l.offsets[k] = l.offsets[k + 1] + 1 + rng.uniform_int(3);
    parts.push_back("offsets[" + std::to_string(k) + "] > offsets[" + std::to_string(k + 1) + "]");
  }
  if (fs.short_last_offset && nb >= 1) {
    // Short of N but not below the previous offset, so the last offender is the last offset.
    const std::int64_t prev = l.offsets[nb - 1];
    const std::int64_t target = std::max(prev, N - 1 - rng.uniform_int(5));
    if (target < N && target >= 0) {
      l.offsets[nb] = target;
      parts.push_back("last offset " + std::to_string(target) + " < N=" + std::to_string(N));
    }
  }
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

// A case's lookups in the index width of the case, with the view.
struct LookupBuffers {
  Lookups l;
  DType index = DType::I64;
  bool weighted = false;
  std::vector<std::int32_t> indices32, offsets32;

  void finalize() {
    if (!weighted) std::vector<float>().swap(l.weights);
    if (index == DType::I32) {
      indices32.assign(l.indices.begin(), l.indices.end());  // every value fits (faults included)
      offsets32.assign(l.offsets.begin(), l.offsets.end());
    }
  }
  LookupBatchView view() const {
    LookupBatchView v;
    v.index_dtype = index;
    v.indices = index == DType::I32 ? static_cast<const void*>(indices32.data())
                                    : static_cast<const void*>(l.indices.data());
    v.offsets = index == DType::I32 ? static_cast<const void*>(offsets32.data())
                                    : static_cast<const void*>(l.offsets.data());
    v.num_indices = static_cast<std::int64_t>(l.indices.size());
    v.num_offsets = static_cast<std::int64_t>(l.offsets.size());
    v.per_sample_weights = weighted ? l.weights.data() : nullptr;
    v.batch_size = l.batch_size;
    v.vbe_batch_sizes = l.vbe_sizes;
    v.vbe_ranks = l.ranks;
    return v;
  }
};

// What the backend under test returned for one input (kept so a failing case can be saved with
// the backend's outputs, docs/case-files.md "recorded").
struct DeviceCapture {
  std::optional<ForwardCall> call;  // set when the backend ran on this input
  std::vector<std::byte> output;    // [numel] elements of the output type, or empty
};

Check judge_output(const std::string& name, const ForwardProblem& p, const PoisonedOutput& out,
                   SectionTimes& times) {
  Check c;
  c.name = name;
  const oracle::ForwardEnclosures enc =
      times.time("enclosures", [&] { return oracle::compute_forward_enclosures(p); });
  oracle::CheckReport report = times.time("judge", [&] {
    const DType out_t = p.options.policy.output;
    std::vector<double> values(static_cast<std::size_t>(enc.layout.numel));
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < enc.layout.numel; ++i)
      values[i] = load_as_double(out_t, out.data(), i);
    return oracle::judge_forward(p, enc, values);
  });
  c.passed = report.passed();
  c.detail = report.summary();
  c.report = std::move(report);
  return c;
}

std::string violation_text(const std::optional<BoundsViolation>& v) {
  return v ? to_string(*v) : std::string("no violation");
}

}  // namespace

// ---- small public helpers -------------------------------------------------------------------

Verdict CaseResult::verdict() const {
  // Failed if any row failed. A case whose device row was skipped (no GPU, not applicable) is
  // skipped even when its CPU self-check passed: it did not verify the kernel under test.
  bool any_pass = false, device_skipped = false;
  for (const RowResult& r : rows) {
    if (r.verdict == Verdict::Failed) return Verdict::Failed;
    any_pass = any_pass || r.verdict == Verdict::Passed;
    device_skipped = device_skipped || (r.target == Target::Device && r.verdict == Verdict::Skipped);
  }
  return any_pass && !device_skipped ? Verdict::Passed : Verdict::Skipped;
}

std::uint64_t stable_hash(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

FaultSet fault_set_for(const CaseAxes& c) {
  if (c.bounds != BoundsCheckMode::Fatal) {
    FaultSet fs;
    fs.bad_first_offset = true;
    return fs;
  }
  switch (stable_hash(case_label(c)) % 3) {
    case 0:
      return FaultSet{};  // first offender: a bag
    case 1:
      return FaultSet{true, false, false};  // first offender: an index
    default:
      return FaultSet{false, false, true};  // first offender: the last offset
  }
}

// ---- Runner ---------------------------------------------------------------------------------

struct Runner::Impl {
  std::optional<ForwardCase> base;  // tables + lookups of the current weight type
  DType base_dtype = DType::F32;
  Lookups full;  // base lookups, non-VBE, B samples per feature
  std::map<std::pair<bool, bool>, Lookups> variants;  // (sequence slice, vbe) -> lookups
  std::vector<std::int32_t> sequence_features;        // features of the pooling=none variant
  std::int64_t max_rows = 0;
};

Runner::Runner(RunnerConfig cfg) : cfg_(std::move(cfg)), impl_(std::make_unique<Impl>()) {
  spec_ = cfg_.custom_spec ? *cfg_.custom_spec : named_workload(cfg_.workload, cfg_.batch);
  spec_.seed = cfg_.seed;
  spec_.weighted = true;  // generated once; unweighted cases drop them
  spec_.index_dtype = DType::I64;
  spec_.vbe_ranks = 0;
}

Runner::~Runner() = default;

std::int64_t Runner::sequence_samples() const {
  const std::int64_t L = std::max<std::int64_t>(spec_.L, 1);
  return std::clamp<std::int64_t>((spec_.B + L - 1) / L, std::min<std::int64_t>(spec_.B, 1),
                                  spec_.B);
}

std::int32_t Runner::vbe_ranks() const {
  Rng pick(cfg_.seed, kVbeStream);
  return 2 + static_cast<std::int32_t>(pick.uniform_int(3));
}

namespace {

struct Prepared {
  ForwardProblem primary;                   // none: valid; warning/ignore: malformed; fatal: valid
  std::optional<ForwardProblem> malformed;  // fatal only
};

// Independent scan for the first FATAL offender of `l` (docs/semantics.md order: bad bags by k, then the
// last offset, then bad indices by position), written apart from the reference's.
std::optional<BoundsViolation> scan_first_offender(
    const Lookups& l, const OutputLayout& layout,
    const std::vector<std::int64_t>& rows_of_feature) {
  const std::int64_t nb = l.num_bags();
  const std::int64_t N = static_cast<std::int64_t>(l.indices.size());
  auto feature_sample = [&](std::int64_t k, BoundsViolation& v) {
    v.feature = layout.feature_of_bag(k);
    v.sample = k - layout.feature_bag_offset[v.feature];
  };
  for (std::int64_t k = 0; k < nb; ++k) {
    const std::int64_t s = l.offsets[k];
    const std::int64_t e = l.offsets[k + 1];
    if (s < 0 || s > e || e > N) {
      BoundsViolation v;
      v.kind = BoundsViolation::Kind::Bag;
      feature_sample(k, v);
      v.position = k;
      v.limit = N;
      return v;
    }
  }
  if (l.offsets.back() != N) {
    BoundsViolation v;
    v.kind = BoundsViolation::Kind::LastOffset;
    v.position = nb;
    v.value = l.offsets.back();
    v.limit = N;
    return v;
  }
  for (std::int64_t k = 0; k < nb; ++k) {
    for (std::int64_t q = l.offsets[k]; q < l.offsets[k + 1]; ++q) {
      BoundsViolation v;
      feature_sample(k, v);
      const std::int64_t E = rows_of_feature[v.feature];
      const std::int64_t i = l.indices[q];
      if (i < 0 || i >= E) {
        v.kind = BoundsViolation::Kind::Index;
        v.position = q;
        v.value = i;
        v.limit = E;
        return v;
      }
    }
  }
  return std::nullopt;
}

// Same offender as the reference's? Kind, position, feature and sample always; the value and limit
// for index and last-offset offenders (a bad bag has two candidate values, s and e).
bool same_offender(const BoundsViolation& a, const BoundsViolation& b) {
  if (a.kind != b.kind || a.position != b.position || a.feature != b.feature ||
      a.sample != b.sample)
    return false;
  if (a.kind == BoundsViolation::Kind::Bag) return true;
  return a.value == b.value && a.limit == b.limit;
}

// Bad-index count of `l` after the offsets are replaced by `repaired` (the reference's rule:
// indices of the repaired bags, i < 0 or i >= E_t).
std::int64_t count_bad_indices(const Lookups& l, const std::vector<std::int64_t>& repaired,
                               const OutputLayout& layout,
                               const std::vector<std::int64_t>& rows_of_feature) {
  std::int64_t bad = 0;
  const std::int64_t nb = static_cast<std::int64_t>(repaired.size()) - 1;
  for (std::int64_t k = 0; k < nb; ++k) {
    const std::int64_t E = rows_of_feature[layout.feature_of_bag(k)];
    for (std::int64_t q = repaired[k]; q < repaired[k + 1]; ++q) {
      const std::int64_t i = l.indices[q];
      bad += (i < 0 || i >= E) ? 1 : 0;
    }
  }
  return bad;
}

// ---- device rows ------------------------------------------------------------------------------

void device_forward_valid(Backend& dev, const ForwardProblem& p, const ForwardStrategy& strategy,
                          std::int64_t expected_warnings, const std::string& prefix,
                          RowResult& row, DeviceCapture& cap, SectionTimes& times) {
  const OutputLayout layout = make_output_layout(p);
  PoisonedOutput out(p.options.policy.output, layout.numel);
  cap.call = times.time("backend", [&] { return call_forward(dev, p, strategy, out.data()); });
  if (!cap.call->ok()) {
    row.checks.push_back(
        agreement(prefix + "forward", false, "unexpected error: " + cap.call->what));
    return;
  }
  cap.output = out.output();
  const ForwardStats& stats = cap.call->stats;
  add_paths(row, stats.paths);
  row.warnings_got += stats.warnings;
  row.checks.push_back(agreement(prefix + "canary", out.canary_intact(),
                                 out.canary_intact() ? "sentinels past the output untouched"
                                                     : "wrote past the end of the output"));
  row.checks.push_back(agreement(
      prefix + "warnings", stats.warnings == expected_warnings,
      "expected " + std::to_string(expected_warnings) + ", got " + std::to_string(stats.warnings)));
  guarded(row.checks, prefix + "oracle",
          [&] { row.checks.push_back(judge_output(prefix + "oracle", p, out, times)); });
}

void device_row(Backend& dev, const CaseAxes& c, const Prepared& prep, bool fused, RowResult& row,
                DeviceCapture& cap_primary, DeviceCapture& cap_malformed, SectionTimes& times) {
  ForwardStrategy strategy;
  strategy.fused_bounds_check = fused;
  const ForwardProblem& p = prep.primary;
  const bool repairs = c.bounds == BoundsCheckMode::Warning || c.bounds == BoundsCheckMode::Ignore;
  if (repairs) {
    guarded(row.checks, "repair", [&] {
      const RepairResult ref = times.time("reference", [&] { return tbe::repair(p); });
      row.warnings_expected = ref.warnings;
      const RepairResult got = times.time("backend", [&] { return dev.repair(p); });
      std::string why;
      const bool same = same_repair(ref, got, &why);
      row.checks.push_back(agreement("repair", same,
                                     same ? "offsets, indices and counts equal the reference's (" +
                                                std::to_string(ref.warnings) + " warnings)"
                                          : why));
    });
  }
  device_forward_valid(dev, p, strategy, row.warnings_expected,
                       c.bounds == BoundsCheckMode::Fatal ? "valid." : "", row, cap_primary, times);
  if (c.bounds != BoundsCheckMode::Fatal) return;

  // FATAL, malformed: both sides throw BoundsCheckError naming the same first offender.
  const ForwardProblem& bad = *prep.malformed;
  std::optional<BoundsViolation> expected;
  guarded(row.checks, "malformed.reference",
          [&] { expected = times.time("reference", [&] { return find_first_violation(bad); }); });
  if (!expected) {
    row.checks.push_back(agreement("malformed.reference", false,
                                   "the malformed copy has no violation (injection failed)"));
    return;
  }
  PoisonedOutput out(bad.options.policy.output, make_output_layout(bad).numel);
  cap_malformed.call =
      times.time("backend", [&] { return call_forward(dev, bad, strategy, out.data()); });
  const ForwardCall& call = *cap_malformed.call;
  std::string got;
  bool ok = false;
  switch (call.outcome) {
    case ForwardCall::Outcome::Output:
      add_paths(row, call.stats.paths);
      got = "no error";
      cap_malformed.output = out.output();
      break;
    case ForwardCall::Outcome::BoundsError:
      ok = call.violation == *expected;
      got = call.error_text();
      break;
    default:
      got = "other error: " + call.what;
  }
  row.checks.push_back(
      agreement("malformed.error", ok,
                "expected BoundsCheckError(" + to_string(*expected) + "), got " + got));
  row.checks.push_back(
      agreement("malformed.untouched", out.untouched(),
                out.untouched() ? "output left untouched" : "output written despite the error"));
}

// ---- CPU self-check rows ------------------------------------------------------------------------

// The emulations of one case's self-check: two summation orders out of the non-reference ones,
// rotated by a hash of the label so the matrix covers all of them, one of which is the seeded
// random permutation or an adversarial sorted order; MEAN scalings rotate the same way.
std::vector<oracle::EmulationOptions> emulations_for(const CaseAxes& c, std::uint64_t seed) {
  static constexpr oracle::SummationOrder kOrders[] = {
      oracle::SummationOrder::SortedAscending, oracle::SummationOrder::SortedDescending,
      oracle::SummationOrder::SortedSigned,    oracle::SummationOrder::RandomPermutation,
      oracle::SummationOrder::PairwiseTree,    oracle::SummationOrder::Chunked256};
  constexpr std::uint64_t kN = sizeof(kOrders) / sizeof(kOrders[0]);
  const std::uint64_t h = stable_hash(case_label(c));
  std::vector<oracle::EmulationOptions> out;
  for (std::uint64_t j = 0; j < 2; ++j) {
    oracle::EmulationOptions eo;
    eo.order = kOrders[(h + j * 3) % kN];  // two different orders, 3 apart
    eo.mean_scaling = oracle::kAllMeanScalings[(h / kN + j) % 3];
    eo.seed = seed;
    out.push_back(eo);
  }
  return out;
}

void self_row(const CaseAxes& c, const Prepared& prep, const Lookups& primary,
              const Lookups* malformed, const std::vector<std::int64_t>& rows_of_feature,
              std::uint64_t seed, RowResult& row, SectionTimes& times) {
  const ForwardProblem& p = prep.primary;
  const OutputLayout layout = make_output_layout(p);
  const bool repairs = c.bounds == BoundsCheckMode::Warning || c.bounds == BoundsCheckMode::Ignore;

  // Input validity as the mode requires: NONE and FATAL's valid input have no violation.
  guarded(row.checks, "input", [&] {
    const auto v = find_first_violation(p);
    if (repairs) {
      row.checks.push_back(
          agreement("input.malformed", v.has_value(),
                    v ? "first offender " + to_string(*v) : "the malformed copy has no violation"));
    } else {
      row.checks.push_back(agreement("input.valid", !v.has_value(),
                                     v ? "valid input has " + to_string(*v) : "no violation"));
    }
  });

  // Reference invariant: the repair's count equals the max-scan count (and the sequential rule).
  if (repairs) {
    guarded(row.checks, "repair", [&] {
      const RepairResult ref = tbe::repair(p);
      row.warnings_expected = ref.warnings;
      const std::int64_t N = static_cast<std::int64_t>(primary.indices.size());
      std::int64_t scan_bags = 0, scan_last = 0, seq_bags = 0, seq_last = 0;
      const auto scan = repair_offsets_max_scan(primary.offsets, N, &scan_bags, &scan_last);
      const auto seq = repair_offsets_sequential(primary.offsets, N, &seq_bags, &seq_last);
      const std::int64_t scan_indices = count_bad_indices(primary, scan, layout, rows_of_feature);
      const std::int64_t scan_count = scan_bags + scan_last + scan_indices;
      std::ostringstream os;
      os << "reference " << ref.warnings << " (bags " << ref.bad_bags << ", last "
         << ref.bad_last_offset << ", indices " << ref.bad_indices << "), max-scan " << scan_count
         << " (bags " << scan_bags << ", last " << scan_last << ", indices " << scan_indices << ")";
      const bool ok = ref.warnings == scan_count && scan == ref.offsets && seq == scan &&
                      seq_bags == scan_bags && seq_last == scan_last;
      if (scan != ref.offsets) os << "; repaired offsets differ from the max-scan's";
      if (seq != scan) os << "; sequential rule differs from the max-scan";
      row.checks.push_back(agreement("repair.count", ok, os.str()));
    });
  }

  // The enclosures, computed once, judge every CPU output of this case.
  std::optional<oracle::ForwardEnclosures> enc;
  guarded(row.checks, "oracle.enclosures", [&] {
    enc = times.time("enclosures", [&] { return oracle::compute_forward_enclosures(p); });
  });
  auto judge = [&](const std::string& name, std::span<const double> values) {
    Check check;
    check.name = name;
    oracle::CheckReport report = oracle::judge_forward(p, *enc, values);
    check.passed = report.passed();
    check.detail = report.summary();
    check.report = std::move(report);
    return check;
  };

  // The reference's rounded output must lie inside its own enclosures; its warning count must
  // equal the repair's.
  guarded(row.checks, "oracle.reference", [&] {
    PoisonedOutput out(p.options.policy.output, layout.numel);
    const ForwardStats stats =
        times.time("reference", [&] { return forward_reference(p, out.data()); });
    add_paths(row, stats.paths);
    row.warnings_got = stats.warnings;
    row.checks.push_back(agreement("warnings", stats.warnings == row.warnings_expected,
                                   "forward " + std::to_string(stats.warnings) + ", repair " +
                                       std::to_string(row.warnings_expected)));
    row.checks.push_back(agreement(
        "canary", out.canary_intact(),
        out.canary_intact() ? "sentinels untouched" : "wrote past the end of the output"));
    if (!enc) return;
    std::vector<double> values(static_cast<std::size_t>(layout.numel));
    const DType out_t = p.options.policy.output;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < layout.numel; ++i)
      values[i] = load_as_double(out_t, out.data(), i);
    row.checks.push_back(judge("oracle.reference", values));
  });

  // CPU emulations of conforming kernels (the policy's accumulation type, other summation orders
  // and MEAN scalings): every one must lie inside the enclosures.
  if (enc) {
    for (const oracle::EmulationOptions& eo : emulations_for(c, seed)) {
      const std::string name = "oracle.emulate[" + oracle::to_string(eo.order) + "]";
      guarded(row.checks, name, [&] {
        const std::vector<double> emulated =
            times.time("emulations", [&] { return oracle::emulate_forward(p, eo); });
        Check check = times.time("judge", [&] { return judge(name, emulated); });
        check.detail = oracle::to_string(eo) + ": " + check.detail;
        row.checks.push_back(std::move(check));
      });
    }
  }

  if (c.bounds != BoundsCheckMode::Fatal || !malformed) return;

  // FATAL offender found: reference == independent scan; the forward and the oracle throw it.
  const ForwardProblem& bad = *prep.malformed;
  guarded(row.checks, "fatal", [&] {
    const auto ref = find_first_violation(bad);
    const auto scan = scan_first_offender(*malformed, make_output_layout(bad), rows_of_feature);
    const bool found = ref && scan && same_offender(*ref, *scan);
    row.checks.push_back(
        agreement("fatal.offender", found,
                  "reference " + violation_text(ref) + ", scan " + violation_text(scan)));
    if (!ref) return;
    auto expect_throw = [&](const std::string& name, auto&& call) {
      std::string got = "no error";
      bool ok = false;
      try {
        call();
      } catch (const BoundsCheckError& e) {
        ok = e.violation() == *ref;
        got = "BoundsCheckError(" + to_string(e.violation()) + ")";
      } catch (const std::exception& e) {
        got = std::string("other error: ") + e.what();
      }
      row.checks.push_back(agreement(name, ok, "got " + got));
    };
    PoisonedOutput out(bad.options.policy.output, make_output_layout(bad).numel);
    expect_throw("fatal.forward", [&] { forward_reference(bad, out.data()); });
    row.checks.push_back(
        agreement("fatal.untouched", out.untouched(),
                  out.untouched() ? "output left untouched" : "output written despite the error"));
    expect_throw("fatal.oracle", [&] { oracle::check_forward(bad, out.data()); });
  });
}

}  // namespace

CaseResult Runner::run(const CaseAxes& c) {
  const auto t0 = std::chrono::steady_clock::now();
  CaseResult result;
  result.axes = c;
  result.label = case_label(c);
  std::string why;
  result.applicable = applicable(c, &why);
  if (!result.applicable) {
    RowResult row;
    row.target = Target::Device;
    row.verdict = Verdict::Skipped;
    row.reason = why;
    result.rows.push_back(std::move(row));
    return result;
  }

  Impl& im = *impl_;
  // Base workload: generated once per weight storage type.
  if (!im.base || im.base_dtype != c.precision.weights) {
    const auto g0 = std::chrono::steady_clock::now();
    im.base.reset();
    im.variants.clear();
    WorkloadSpec spec = spec_;
    if (cfg_.custom_spec) {
      im.sequence_features.clear();  // a custom spec's features share one D
      for (std::int32_t f = 0; f < static_cast<std::int32_t>(spec.T); ++f)
        im.sequence_features.push_back(f);
    } else {
      MatrixBase mb = matrix_base(spec_, c.precision.weights);
      spec = std::move(mb.spec);
      im.sequence_features = std::move(mb.sequence_features);
    }
    spec.options.policy = make_policy(PolicyKind::SeedDefault, c.precision.weights, DType::F32);
    im.base = generate(spec);
    im.base_dtype = c.precision.weights;
    im.full = Lookups{};
    // The lookups move out of the base: case views take only the tables from it.
    im.full.indices = std::move(im.base->indices);
    im.full.offsets = std::move(im.base->offsets);
    im.full.weights = std::move(im.base->per_sample_weights);
    im.full.batch_size = im.base->batch_size;
    im.base->indices.clear();
    im.base->offsets.clear();
    im.base->per_sample_weights.clear();
    im.full.feature_table_map = im.base->feature_table_map;
    for (std::int32_t t : im.base->feature_table_map)
      im.full.rows_of_feature.push_back(im.base->rows[t]);
    im.max_rows = *std::max_element(im.base->rows.begin(), im.base->rows.end());
    generation_seconds_ += seconds_since(g0);
    times_.add("generation", seconds_since(g0));
  }
  const auto l0 = std::chrono::steady_clock::now();
  const std::int64_t B = im.full.batch_size;

  // Variant: sequence slice (pooling none) and/or VBE, cached per base.
  const bool sequence = c.pooling == PoolingMode::None;
  const auto key = std::make_pair(sequence, c.vbe);
  if (!im.variants.count(key)) {
    const std::int64_t samples = sequence ? sequence_samples() : B;
    Lookups v = !sequence ? im.full
                          : take_leading_bags(im.full, B, im.sequence_features,
                                              std::vector<std::int64_t>(
                                                  im.sequence_features.size(), samples));
    v.batch_size = samples;
    if (c.vbe) v = derive_vbe(v, v.num_features(), samples, cfg_.seed);
    im.variants.emplace(key, std::move(v));
  }
  const Lookups& variant = im.variants.at(key);
  result.input.samples_per_feature = sequence ? sequence_samples() : B;
  result.input.vbe_ranks = variant.ranks;

  // The case's lookups: malformed where the mode repairs, plus a malformed copy for FATAL.
  const FaultSet faults = fault_set_for(c);
  const bool repairs = c.bounds == BoundsCheckMode::Warning || c.bounds == BoundsCheckMode::Ignore;
  LookupBuffers primary{variant, c.index, c.weighted, {}, {}};
  if (repairs) result.input.malformed = inject_faults(primary.l, faults, im.max_rows, cfg_.seed);
  primary.finalize();
  std::optional<LookupBuffers> malformed;
  if (c.bounds == BoundsCheckMode::Fatal) {
    malformed = LookupBuffers{variant, c.index, c.weighted, {}, {}};
    result.input.malformed = inject_faults(malformed->l, faults, im.max_rows, cfg_.seed);
    malformed->finalize();
  }
  result.input.bags = primary.l.num_bags();
  result.input.lookups = static_cast<std::int64_t>(primary.l.indices.size());

  ForwardProblem tables = im.base->view();
  Prepared prep;
  prep.primary.tables = tables.tables;
  prep.primary.tables.feature_table_map = primary.l.feature_table_map;  // the variant's features
  prep.primary.lookups = primary.view();
  prep.primary.options.pooling = c.pooling;
  prep.primary.options.bounds_check = c.bounds;
  prep.primary.options.policy =
      make_policy(c.precision.policy, c.precision.weights, c.precision.output);
  if (malformed) {
    prep.malformed = prep.primary;
    prep.malformed->lookups = malformed->view();
  }
  const bool fused = ((stable_hash(result.label) >> 8) & 1) == 0;
  result.input.fused_bounds_check = fused;
  times_.add("lookups", seconds_since(l0));

  RowResult device;
  device.target = Target::Device;
  DeviceCapture cap_primary, cap_malformed;
  if (cfg_.device) {
    const auto r0 = std::chrono::steady_clock::now();
    device_row(*cfg_.device, c, prep, fused, device, cap_primary, cap_malformed, times_);
    finish_row(device);
    device.seconds = seconds_since(r0);
  } else {
    device.verdict = Verdict::Skipped;
    device.reason = cfg_.skip_reason;
  }
  result.rows.push_back(std::move(device));

  if (!cfg_.device) {
    RowResult self;
    self.target = Target::SelfCheck;
    const auto r0 = std::chrono::steady_clock::now();
    self_row(c, prep, primary.l, malformed ? &malformed->l : nullptr, primary.l.rows_of_feature,
             cfg_.seed, self, times_);
    finish_row(self);
    self.seconds = seconds_since(r0);
    result.rows.push_back(std::move(self));
  }

  // A failing case is written to a case folder (inputs + the backend's outputs) for replay/check.
  for (const RowResult& row : result.rows) {
    if (row.verdict != Verdict::Failed || cfg_.save_failures_dir.empty()) continue;
    if (saved_failures_ >= cfg_.save_failures_max) {
      result.save_note = "not saved (--save-failures-max " + std::to_string(cfg_.save_failures_max) + " reached)";
      break;
    }
    bool on_malformed = false;
    std::string failed;
    for (const Check& ck : row.checks) {
      if (ck.passed) continue;
      failed += (failed.empty() ? "" : ", ") + ck.name;
      on_malformed = on_malformed || ck.name.rfind("malformed.", 0) == 0 || ck.name.rfind("fatal.", 0) == 0;
    }
    on_malformed = on_malformed && prep.malformed.has_value();
    const ForwardProblem& judged = on_malformed ? *prep.malformed : prep.primary;
    const DeviceCapture& cap = on_malformed ? cap_malformed : cap_primary;
    io::CaseFile cf;
    cf.name = result.label;
    cf.seed = cfg_.seed;
    std::ostringstream prov;
    prov << "tbe-verify matrix: workload " << spec_.name << " B=" << spec_.B << " seed=" << cfg_.seed
         << ", case " << result.label << (on_malformed ? " (malformed FATAL copy)" : "")
         << ", " << to_string(row.target) << " row failed: " << failed
         << "; bounds strategy " << (fused ? "fused" : "separate");
    if (!result.input.malformed.empty()) prov << "; malformed input: " << result.input.malformed;
    cf.provenance = prov.str();
    const std::string dir = cfg_.save_failures_dir + "/" + result.label;
    try {
      cf.problem = io::copy_case(judged);
      if (row.target == Target::Device && cap.call) {
        cf.recorded = recorded_outputs(
            *cap.call, cap.output, judged.options.policy.output,
            cfg_.device->name() + " (" + (fused ? "fused" : "separate") + " bounds check)");
        cf.expect = io::Expectation{"pass", ""};  // what the suite requires of the backend
      }
      io::write_case(dir, cf);
      result.saved_case = dir;
      ++saved_failures_;
    } catch (const std::exception& e) {
      result.save_note = std::string("saving the case failed: ") + e.what();
    }
    break;
  }
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace tbe::judge
