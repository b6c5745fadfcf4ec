// Bounds check and offset/index repair (bounds_check.h, docs/semantics.md "Bounds check").
#include "tbe/bounds_check.h"

#include <algorithm>
#include <limits>

#include "parallel_internal.h"
#include "tbe/host_case.h"

namespace tbe {

namespace {

// (feature, sample) of bag k. Non-VBE: k = f·B + b. VBE: sample = rank-major bag index inside f.
struct BagCoords {
  std::int64_t feature, sample;
};
BagCoords bag_coords(const OutputLayout& layout, std::int64_t k) {
  const std::int64_t f = layout.feature_of_bag(k);
  return {f, k - layout.feature_bag_offset[f]};
}

// E of the table feature f reads.
std::int64_t rows_of_feature(const ForwardProblem& p, std::int64_t f) {
  return p.tables.rows[p.tables.feature_table_map[f]];
}

std::vector<std::int64_t> copy_as_int64(DType t, const void* data, std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  if (t == DType::I32) {
    const auto* src = static_cast<const std::int32_t*>(data);
    for (std::int64_t i = 0; i < n; ++i) v[i] = src[i];
  } else if (n > 0) {
    std::copy_n(static_cast<const std::int64_t*>(data), n, v.begin());
  }
  return v;
}

}  // namespace

std::optional<BoundsViolation> find_first_violation(const ForwardProblem& p) {
  const LookupBatchView& lk = p.lookups;
  const DType it = lk.index_dtype;
  const std::int64_t N = lk.num_indices;
  const std::int64_t K = lk.num_offsets - 1;  // number of bags
  const OutputLayout layout = make_output_layout(p);
  auto off = [&](std::int64_t k) { return load_index(it, lk.offsets, k); };

  // 1. Bad bags on the original offsets, lowest k first.
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t s = off(k), e = off(k + 1);
    std::int64_t value;
    if (s < 0 || s > e) {
      value = s;
    } else if (e > N) {
      value = e;
    } else {
      continue;
    }
    const BagCoords c = bag_coords(layout, k);
    return BoundsViolation{BoundsViolation::Kind::Bag, c.feature, c.sample, k, value, N};
  }
  // 2. The last offset must be N.
  if (off(K) != N)
    return BoundsViolation{BoundsViolation::Kind::LastOffset, -1, -1, K, off(K), N};

  // 3. Indices inside bags (offsets are valid here, so bags cover [offsets[0], N) in order);
  // the lowest bad position wins. Parallel min-reduction over bags.
  std::int64_t first_bad = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for schedule(dynamic, 256) reduction(min : first_bad) \
    if (detail::worth_parallel(N + K))
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t s = off(k), e = off(k + 1);
    if (s == e) continue;
    const std::int64_t E = rows_of_feature(p, layout.feature_of_bag(k));
    for (std::int64_t q = s; q < e; ++q) {
      const std::int64_t i = load_index(it, lk.indices, q);
      if (i < 0 || i >= E) {
        first_bad = std::min(first_bad, q);
        break;
      }
    }
  }
  if (first_bad == std::numeric_limits<std::int64_t>::max()) return std::nullopt;
  // Bag holding position first_bad: last k with offsets[k] <= first_bad < offsets[k+1].
  std::int64_t lo = 0, hi = K - 1;
  while (lo < hi) {  // largest k with off(k) <= first_bad
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (off(mid) <= first_bad) lo = mid; else hi = mid - 1;
  }
  while (off(lo + 1) <= first_bad) ++lo;  // skip empty bags ending at first_bad (defensive)
  const BagCoords c = bag_coords(layout, lo);
  return BoundsViolation{BoundsViolation::Kind::Index, c.feature, c.sample, first_bad,
                         load_index(it, lk.indices, first_bad), rows_of_feature(p, c.feature)};
}

std::vector<std::int64_t> repair_offsets_sequential(std::vector<std::int64_t> o,
                                                    std::int64_t N, std::int64_t* bad_bags,
                                                    std::int64_t* bad_last_offset) {
  std::int64_t bags = 0, last = 0;
  if (!o.empty()) {
    const std::size_t K = o.size() - 1;
    // Step 1: the last offset must be N.
    if (o[K] != N) {
      o[K] = N;
      last = 1;
    }
    // Step 2: bags in order, each judged on the offsets as repaired so far.
    for (std::size_t k = 0; k < K; ++k) {
      const std::int64_t s = o[k], e = o[k + 1];
      if (s < 0 || s > e || e > N) {
        ++bags;
        o[k] = std::clamp<std::int64_t>(s, 0, N);
        o[k + 1] = std::clamp<std::int64_t>(e, o[k], N);
      }
    }
  }
  if (bad_bags) *bad_bags = bags;
  if (bad_last_offset) *bad_last_offset = last;
  return o;
}

std::vector<std::int64_t> repair_offsets_max_scan(const std::vector<std::int64_t>& offsets,
                                                  std::int64_t N, std::int64_t* bad_bags,
                                                  std::int64_t* bad_last_offset) {
  std::int64_t bags = 0, last = 0;
  std::vector<std::int64_t> o1 = offsets;  // after step 1
  std::vector<std::int64_t> r(offsets.size());
  if (!o1.empty()) {
    const std::size_t K = o1.size() - 1;
    if (o1[K] != N) {
      o1[K] = N;
      last = 1;
    }
    // o'[k] = min(N, max(0, max_{j<=k} o1[j])): an inclusive max-scan, then a clamp to [0, N].
    // (Equal to o'[0] = clamp(o1[0], 0, N), o'[k+1] = min(max(o1[k+1], o'[k]), N).)
    std::int64_t running = 0;
    for (std::size_t k = 0; k <= K; ++k) {
      running = std::max(running, o1[k]);
      r[k] = std::min(running, N);
    }
    // Bag k was repaired iff its end moved, or (k = 0) its start moved.
    for (std::size_t k = 0; k < K; ++k)
      if ((k == 0 && r[0] != o1[0]) || r[k + 1] != o1[k + 1]) ++bags;
  }
  if (bad_bags) *bad_bags = bags;
  if (bad_last_offset) *bad_last_offset = last;
  return r;
}

RepairResult repair(const ForwardProblem& p) {
  throw_if_error(validate(p));
  const LookupBatchView& lk = p.lookups;
  const std::int64_t N = lk.num_indices;
  RepairResult res;
  res.offsets = copy_as_int64(lk.index_dtype, lk.offsets, lk.num_offsets);
  res.indices = copy_as_int64(lk.index_dtype, lk.indices, N);

  switch (p.options.bounds_check) {
    case BoundsCheckMode::None: return res;
    case BoundsCheckMode::Fatal:
      if (auto v = find_first_violation(p)) throw BoundsCheckError(*v);
      return res;
    case BoundsCheckMode::Warning:
    case BoundsCheckMode::Ignore: break;
  }

  res.offsets = repair_offsets_max_scan(res.offsets, N, &res.bad_bags, &res.bad_last_offset);
  const OutputLayout layout = make_output_layout(p);
  const std::int64_t K = lk.num_offsets - 1;
  std::int64_t bad_indices = 0;
  // Index checks on the repaired bags; positions before offsets'[0] belong to no bag.
#pragma omp parallel for schedule(dynamic, 256) reduction(+ : bad_indices) \
    if (detail::worth_parallel(N + K))
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t s = res.offsets[k], e = res.offsets[k + 1];
    if (s == e) continue;
    const std::int64_t E = rows_of_feature(p, layout.feature_of_bag(k));
    for (std::int64_t q = s; q < e; ++q) {
      if (res.indices[q] < 0 || res.indices[q] >= E) {
        res.indices[q] = 0;  // its per-sample weight is kept: it now weights row 0
        ++bad_indices;
      }
    }
  }
  res.bad_indices = bad_indices;
  res.warnings = res.bad_bags + res.bad_last_offset + res.bad_indices;
  return res;
}

}  // namespace tbe
