// Axes, case enumeration and the greedy pairwise covering design of tbe-verify.
#include "tbe/judge/matrix.h"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace tbe::judge {
namespace {

// A case as 6 factor levels: precision level, weighted, index, pooling, bounds, vbe.
constexpr int kFactors = 6;
using Levels = std::array<int, kFactors>;

const std::array<DType, 2> kIndexTypes = {DType::I32, DType::I64};
const std::array<PoolingMode, 3> kPoolings = {PoolingMode::Sum, PoolingMode::Mean,
                                              PoolingMode::None};
const std::array<BoundsCheckMode, 4> kBounds = {BoundsCheckMode::None, BoundsCheckMode::Warning,
                                                BoundsCheckMode::Ignore, BoundsCheckMode::Fatal};

std::array<int, kFactors> factor_sizes() {
  return {static_cast<int>(precision_levels().size()), 2, 2, 3, 4, 2};
}

CaseAxes from_levels(const Levels& l) {
  CaseAxes c;
  c.precision = precision_levels()[l[0]];
  c.weighted = l[1] == 1;
  c.index = kIndexTypes[l[2]];
  c.pooling = kPoolings[l[3]];
  c.bounds = kBounds[l[4]];
  c.vbe = l[5] == 1;
  return c;
}

template <typename Array, typename Value>
int position_of(const Array& a, const Value& v) {
  return static_cast<int>(std::find(a.begin(), a.end(), v) - a.begin());
}

Levels to_levels(const CaseAxes& c) {
  const auto& p = precision_levels();
  return {static_cast<int>(std::find(p.begin(), p.end(), c.precision) - p.begin()),
          c.weighted ? 1 : 0,
          position_of(kIndexTypes, c.index),
          position_of(kPoolings, c.pooling),
          position_of(kBounds, c.bounds),
          c.vbe ? 1 : 0};
}

// Every tuple of factor levels, in lexicographic order (first factor slowest).
std::vector<Levels> all_tuples() {
  const auto sizes = factor_sizes();
  std::vector<Levels> out;
  Levels l{};
  while (true) {
    out.push_back(l);
    int f = kFactors - 1;
    while (f >= 0 && ++l[f] == sizes[f]) {
      l[f] = 0;
      --f;
    }
    if (f < 0) break;
  }
  return out;
}

// Index of the pair (factor i, level a) x (factor j, level b), i < j, in a dense table.
struct PairIndex {
  std::array<int, kFactors> sizes = factor_sizes();
  int max_levels = *std::max_element(sizes.begin(), sizes.end());
  std::size_t count() const {
    return static_cast<std::size_t>(kFactors * kFactors * max_levels * max_levels);
  }
  std::size_t operator()(int i, int a, int j, int b) const {
    return static_cast<std::size_t>(((i * kFactors + j) * max_levels + a) * max_levels + b);
  }
};

std::string factor_value_text(int factor, int level) {
  const CaseAxes c = [&] {
    Levels l{};
    l[factor] = level;
    return from_levels(l);
  }();
  switch (factor) {
    case 0:
      return "policy=" + axis_value(c, "policy") + "/w=" + axis_value(c, "w") +
             "/out=" + axis_value(c, "out");
    case 1:
      return "weighted=" + axis_value(c, "weighted");
    case 2:
      return "index=" + axis_value(c, "index");
    case 3:
      return "pooling=" + axis_value(c, "pooling");
    case 4:
      return "bounds=" + axis_value(c, "bounds");
    default:
      return "vbe=" + axis_value(c, "vbe");
  }
}

// Greedy covering array (AETG style, deterministic): repeatedly take the applicable tuple that
// covers the most still-uncovered pairs; ties go to the tuple whose values have been used least,
// then to the first in lexicographic order.
std::vector<Levels> greedy_pairwise() {
  const PairIndex pi;
  std::vector<Levels> candidates;
  for (const Levels& l : all_tuples())
    if (applicable(from_levels(l))) candidates.push_back(l);

  std::vector<char> uncovered(pi.count(), 0);
  std::size_t remaining = 0;
  for (const Levels& l : candidates)
    for (int i = 0; i < kFactors; ++i)
      for (int j = i + 1; j < kFactors; ++j) {
        char& u = uncovered[pi(i, l[i], j, l[j])];
        if (!u) {
          u = 1;
          ++remaining;
        }
      }

  std::array<std::vector<int>, kFactors> used;
  for (int f = 0; f < kFactors; ++f) used[f].assign(pi.sizes[f], 0);

  std::vector<Levels> design;
  while (remaining > 0) {
    int best_gain = -1, best_use = 0;
    std::size_t best = 0;
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      const Levels& l = candidates[k];
      int gain = 0, use = 0;
      for (int i = 0; i < kFactors; ++i) {
        use += used[i][l[i]];
        for (int j = i + 1; j < kFactors; ++j) gain += uncovered[pi(i, l[i], j, l[j])];
      }
      if (gain > best_gain || (gain == best_gain && use < best_use)) {
        best_gain = gain;
        best_use = use;
        best = k;
      }
    }
    const Levels& l = candidates[best];
    for (int i = 0; i < kFactors; ++i) {
      ++used[i][l[i]];
      for (int j = i + 1; j < kFactors; ++j) {
        char& u = uncovered[pi(i, l[i], j, l[j])];
        if (u) {
          u = 0;
          --remaining;
        }
      }
    }
    design.push_back(l);
  }
  return design;
}

// Stable grouping by weight storage type (the base workload is generated once per type).
void group_by_weights(std::vector<CaseAxes>& cases) {
  const std::array<DType, 3> order = {DType::F32, DType::F16, DType::BF16};
  std::stable_sort(cases.begin(), cases.end(), [&](const CaseAxes& a, const CaseAxes& b) {
    return position_of(order, a.precision.weights) < position_of(order, b.precision.weights);
  });
}

}  // namespace

const std::vector<PrecisionLevel>& precision_levels() {
  static const std::vector<PrecisionLevel> levels = [] {
    std::vector<PrecisionLevel> v;
    for (PolicyKind k : {PolicyKind::SeedDefault, PolicyKind::FbgemmCuda})
      for (DType w : {DType::F32, DType::F16, DType::BF16}) v.push_back({k, w, DType::F32});
    v.push_back({PolicyKind::SeedDefault, DType::F16, DType::F16});
    v.push_back({PolicyKind::FbgemmCuda, DType::BF16, DType::BF16});
    return v;
  }();
  return levels;
}

const std::vector<std::string>& axis_names() {
  static const std::vector<std::string> names = {"policy", "w",       "out",    "weighted",
                                                 "index",  "pooling", "bounds", "vbe"};
  return names;
}

const std::vector<std::string>& axis_values(const std::string& axis) {
  static const std::map<std::string, std::vector<std::string>> values = {
      {"policy", {"seed-default", "fbgemm-cuda"}},
      {"w", {"fp32", "fp16", "bf16"}},
      {"out", {"fp32", "fp16", "bf16"}},
      {"weighted", {"0", "1"}},
      {"index", {"int32", "int64"}},
      {"pooling", {"sum", "mean", "none"}},
      {"bounds", {"none", "warning", "ignore", "fatal"}},
      {"vbe", {"0", "1"}},
  };
  auto it = values.find(axis);
  if (it == values.end()) throw std::invalid_argument("unknown axis '" + axis + "'");
  return it->second;
}

std::string axis_value(const CaseAxes& c, const std::string& axis) {
  if (axis == "policy") return to_string(c.precision.policy);
  if (axis == "w") return to_string(c.precision.weights);
  if (axis == "out") return to_string(c.precision.output);
  if (axis == "weighted") return c.weighted ? "1" : "0";
  if (axis == "index") return to_string(c.index);
  if (axis == "pooling") return to_string(c.pooling);
  if (axis == "bounds") return to_string(c.bounds);
  if (axis == "vbe") return c.vbe ? "1" : "0";
  throw std::invalid_argument("unknown axis '" + axis + "'");
}

std::string case_label(const CaseAxes& c) {
  std::string s;
  for (const std::string& a : axis_names()) {
    if (!s.empty()) s += ',';
    s += a + '=' + axis_value(c, a);
  }
  return s;
}

bool applicable(const CaseAxes& c, std::string* why) {
  if (c.weighted && c.pooling == PoolingMode::None) {
    if (why) *why = "not applicable: per-sample weights are rejected with pooling none";
    return false;
  }
  if (why) why->clear();
  return true;
}

std::string to_string(Design d) { return d == Design::Full ? "full" : "pairwise"; }

Design parse_design(const std::string& s) {
  if (s == "pairwise") return Design::Pairwise;
  if (s == "full") return Design::Full;
  throw std::invalid_argument("'" + s + "' is not a design (allowed: pairwise, full)");
}

std::vector<CaseAxes> enumerate_cases(Design d) {
  std::vector<CaseAxes> cases;
  if (d == Design::Full) {
    for (const Levels& l : all_tuples()) cases.push_back(from_levels(l));
  } else {
    for (const Levels& l : greedy_pairwise()) cases.push_back(from_levels(l));
    // One not-applicable case, so the skip of weighted x pooling=none shows in every run.
    for (const CaseAxes& c : std::vector<CaseAxes>(cases)) {
      if (c.pooling == PoolingMode::None && !c.weighted) {
        CaseAxes na = c;
        na.weighted = true;
        cases.push_back(na);
        break;
      }
    }
  }
  group_by_weights(cases);
  return cases;
}

Coverage pair_coverage(const std::vector<CaseAxes>& cases) {
  const PairIndex pi;
  std::vector<char> required(pi.count(), 0), covered(pi.count(), 0);
  auto mark = [&](std::vector<char>& table, const Levels& l) {
    for (int i = 0; i < kFactors; ++i)
      for (int j = i + 1; j < kFactors; ++j) table[pi(i, l[i], j, l[j])] = 1;
  };
  for (const Levels& l : all_tuples())
    if (applicable(from_levels(l))) mark(required, l);
  for (const CaseAxes& c : cases)
    if (applicable(c)) mark(covered, to_levels(c));

  Coverage cov;
  for (int i = 0; i < kFactors; ++i)
    for (int j = i + 1; j < kFactors; ++j)
      for (int a = 0; a < pi.sizes[i]; ++a)
        for (int b = 0; b < pi.sizes[j]; ++b) {
          const std::size_t k = pi(i, a, j, b);
          if (!required[k]) continue;
          ++cov.required;
          if (covered[k]) {
            ++cov.covered;
          } else if (cov.missing.size() < 8) {
            cov.missing.push_back(factor_value_text(i, a) + " & " + factor_value_text(j, b));
          }
        }
  return cov;
}

CaseFilter CaseFilter::parse(const std::string& text) {
  CaseFilter f;
  f.text_ = text;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) {
      if (comma >= text.size()) break;
      continue;
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("'" + item +
                                  "' is not axis=value (axes: policy, w, out, "
                                  "weighted, index, pooling, bounds, vbe)");
    const std::string axis = item.substr(0, eq);
    const auto& names = axis_names();
    if (std::find(names.begin(), names.end(), axis) == names.end())
      throw std::invalid_argument(
          "unknown axis '" + axis + "' in '" + item +
          "' (axes: policy, w, out, weighted, index, pooling, bounds, vbe)");
    const auto& allowed = axis_values(axis);
    std::string values = item.substr(eq + 1);
    std::size_t vstart = 0;
    while (vstart <= values.size()) {
      const std::size_t bar = std::min(values.find('|', vstart), values.size());
      const std::string v = values.substr(vstart, bar - vstart);
      vstart = bar + 1;
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        throw std::invalid_argument("axis " + axis + ": '" + v +
                                    "' is not a value (allowed: " + list + ")");
      }
      f.allowed_[axis].insert(v);
      if (bar >= values.size()) break;
    }
  }
  return f;
}

bool CaseFilter::matches(const CaseAxes& c) const {
  for (const auto& [axis, values] : allowed_)
    if (!values.count(axis_value(c, axis))) return false;
  return true;
}

bool CaseFilter::pins_one_case() const {
  for (const std::string& a : axis_names()) {
    auto it = allowed_.find(a);
    if (it == allowed_.end() || it->second.size() != 1) return false;
  }
  return true;
}

}  // namespace tbe::judge
