// The shrinker of tbe-fuzz (shrink.h).
#include "fuzz/shrink.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tbe::fuzz {

namespace {

// Removes bags [first, first + n) and fixes the offset faults that name bags.
void erase_bags(FuzzCase& fc, std::int64_t first, std::int64_t n) {
  fc.bags.erase(fc.bags.begin() + first, fc.bags.begin() + first + n);
  std::vector<OffsetFault> kept;
  for (OffsetFault f : fc.faults) {
    if (f.k >= 0) {
      if (f.k > first + n) f.k -= n;
      else if (f.k > first) continue;  // an inner boundary of the removed range
    }
    kept.push_back(f);
  }
  fc.faults = std::move(kept);
}

// A copy of the tables with table t's rows cut to E' (first rows) and/or D cut to D'.
std::shared_ptr<Tables> reshape_table(const Tables& src, std::size_t t, std::int64_t new_rows,
                                      std::int32_t new_dim) {
  auto tb = std::make_shared<Tables>();
  tb->dtype = src.dtype;
  tb->rows = src.rows;
  tb->dims = src.dims;
  tb->rows[t] = new_rows;
  tb->dims[t] = new_dim;
  tb->allocate();
  const std::size_t es = dtype_size(src.dtype);
  for (std::size_t u = 0; u < src.rows.size(); ++u) {
    if (u != t) {
      std::copy_n(src.row_ptr(u, 0), static_cast<std::size_t>(src.rows[u] * src.dims[u]) * es,
                  tb->row_ptr(u, 0));
      continue;
    }
    for (std::int64_t r = 0; r < new_rows; ++r)
      std::copy_n(src.row_ptr(u, r), static_cast<std::size_t>(new_dim) * es, tb->row_ptr(u, r));
  }
  return tb;
}

std::shared_ptr<Tables> drop_table(const Tables& src, std::size_t t) {
  auto tb = std::make_shared<Tables>();
  tb->dtype = src.dtype;
  for (std::size_t u = 0; u < src.rows.size(); ++u)
    if (u != t) tb->rows.push_back(src.rows[u]), tb->dims.push_back(src.dims[u]);
  tb->allocate();
  const std::size_t es = dtype_size(src.dtype);
  std::size_t v = 0;
  for (std::size_t u = 0; u < src.rows.size(); ++u) {
    if (u == t) continue;
    std::copy_n(src.row_ptr(u, 0), static_cast<std::size_t>(src.rows[u] * src.dims[u]) * es,
                tb->row_ptr(v, 0));
    ++v;
  }
  return tb;
}

struct Shrinker {
  Shrinker(const CaseJudge& j, Verdict first, const ShrinkLimits& limits)
      : judge(j), check(first.check), limits(limits), last(std::move(first)) {}
  const CaseJudge& judge;
  std::string check;  // the failure being preserved
  ShrinkLimits limits;
  int runs = 0, steps = 0;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  Verdict last;

  bool budget() const {
    return runs < limits.max_runs &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
               limits.max_seconds;
  }
  bool still_fails(const FuzzCase& c) {
    ++runs;
    Verdict j = judge(c);
    if (j.device_lost) return false;  // never shrink into a lost device
    if (j.failed && j.check == check) {
      last = std::move(j);
      return true;
    }
    return false;
  }
  bool try_accept(FuzzCase& cur, FuzzCase cand) {
    if (!budget()) return false;
    if (still_fails(cand)) {
      cur = std::move(cand);
      ++steps;
      return true;
    }
    return false;
  }

  // One pass over every kind of step; true if any step was kept.
  bool pass(FuzzCase& cur) {
    bool progress = false;
    // 1. drop features (last first)
    for (std::int64_t f = cur.T() - 1; f >= 0 && cur.T() > 1 && budget(); --f) {
      if (f >= cur.T()) continue;
      FuzzCase c = cur;
      erase_bags(c, c.first_bag(f), c.bags_of_feature(f));
      c.ftm.erase(c.ftm.begin() + f);
      if (c.R) c.vbe.erase(c.vbe.begin() + f * c.R, c.vbe.begin() + (f + 1) * c.R);
      progress |= try_accept(cur, std::move(c));
    }
    // 2. drop tables no feature uses
    for (std::int64_t t = static_cast<std::int64_t>(cur.tables->rows.size()) - 1;
         t >= 0 && cur.tables->rows.size() > 1 && budget(); --t) {
      if (std::find(cur.ftm.begin(), cur.ftm.end(), t) != cur.ftm.end()) continue;
      FuzzCase c = cur;
      c.tables = drop_table(*cur.tables, static_cast<std::size_t>(t));
      for (auto& m : c.ftm) m -= m > t ? 1 : 0;
      progress |= try_accept(cur, std::move(c));
    }
    // 3. halve B: keep the first or the second half of every feature's samples (non-VBE), or
    //    the first half of every (feature, rank) group (VBE)
    for (bool again = true; again && budget();) {
      again = false;
      if (cur.R == 0) {
        if (cur.B == 0) break;
        const std::int64_t B = cur.B, nb = B / 2;
        FuzzCase lo = cur, hi = cur;
        for (std::int64_t f = B ? lo.T() - 1 : -1; f >= 0; --f) {
          erase_bags(lo, f * B + nb, B - nb);  // first half kept
          erase_bags(hi, f * B, B - nb);       // last nb samples kept
        }
        lo.B = nb;
        hi.B = nb;
        again = try_accept(cur, std::move(lo)) || try_accept(cur, std::move(hi));
      } else {
        FuzzCase c = cur;
        bool any = false;
        for (std::int64_t f = c.T() - 1; f >= 0; --f)
          for (std::int32_t q = c.R - 1; q >= 0; --q) {
            const std::int32_t n = c.vbe[f * c.R + q];
            if (n == 0) continue;
            any = true;
            const std::int32_t keep = n / 2;
            std::int64_t first = c.first_bag(f);
            for (std::int32_t u = 0; u < q; ++u) first += c.vbe[f * c.R + u];
            erase_bags(c, first + keep, n - keep);
            c.vbe[f * c.R + q] = keep;
          }
        again = any && try_accept(cur, std::move(c));
      }
      progress |= again;
    }
    // 3b. drop one sample of every feature (non-VBE) or one bag (VBE)
    if (cur.R == 0) {
      for (std::int64_t b = cur.B - 1; b >= 0 && cur.B <= 64 && budget(); --b) {
        if (b >= cur.B) continue;
        FuzzCase c = cur;
        for (std::int64_t f = c.T() - 1; f >= 0; --f) erase_bags(c, f * c.B + b, 1);
        c.B -= 1;
        progress |= try_accept(cur, std::move(c));
      }
    } else {
      for (std::int64_t k = static_cast<std::int64_t>(cur.bags.size()) - 1;
           k >= 0 && cur.bags.size() <= 64 && budget(); --k) {
        if (k >= static_cast<std::int64_t>(cur.bags.size())) continue;
        FuzzCase c = cur;
        std::int64_t acc = 0;
        for (std::size_t g = 0; g < c.vbe.size(); ++g) {
          if (k < acc + c.vbe[g]) {
            c.vbe[g] -= 1;
            break;
          }
          acc += c.vbe[g];
        }
        erase_bags(c, k, 1);
        progress |= try_accept(cur, std::move(c));
      }
    }
    // 4. drop lookups: empty whole bags, halve every bag at once, then bag by bag (first or
    //    second half), then single lookups of short bags
    auto cut_bag = [&](FuzzCase& c, std::size_t b, std::size_t from, std::size_t n) {
      Bag& bag = c.bags[b];
      bag.idx.erase(bag.idx.begin() + from, bag.idx.begin() + from + n);
      bag.w.erase(bag.w.begin() + from, bag.w.begin() + from + n);
    };
    for (std::size_t b = 0; b < cur.bags.size() && cur.bags.size() <= 256 && budget(); ++b) {
      if (cur.bags[b].idx.empty()) continue;
      FuzzCase c = cur;
      cut_bag(c, b, 0, c.bags[b].idx.size());
      progress |= try_accept(cur, std::move(c));
    }
    if (budget()) {
      FuzzCase c = cur;
      bool any = false;
      for (std::size_t b = 0; b < c.bags.size(); ++b) {
        const std::size_t L = c.bags[b].idx.size();
        if (L > 1) cut_bag(c, b, L / 2, L - L / 2), any = true;
      }
      if (any) progress |= try_accept(cur, std::move(c));
    }
    for (std::size_t b = 0; b < cur.bags.size() && budget(); ++b) {
      while (budget() && cur.bags[b].idx.size() > 1) {
        const std::size_t L = cur.bags[b].idx.size();
        FuzzCase lo = cur, hi = cur;
        cut_bag(lo, b, L / 2, L - L / 2);  // keep the first half
        cut_bag(hi, b, 0, L / 2);          // keep the second half
        if (try_accept(cur, std::move(lo)) || try_accept(cur, std::move(hi))) {
          progress = true;
          continue;
        }
        break;
      }
      // chunks of L/8 (at least 1), so a long bag costs at most ~8 runs here
      const std::size_t chunk = std::max<std::size_t>(1, cur.bags[b].idx.size() / 8);
      for (std::size_t l = 0; l < cur.bags[b].idx.size() && budget();) {
        FuzzCase c = cur;
        cut_bag(c, b, l, std::min(chunk, c.bags[b].idx.size() - l));
        if (try_accept(cur, std::move(c))) progress = true;
        else l += chunk;
      }
    }
    // 5. lead indices
    if (!cur.lead.empty() && budget()) {
      FuzzCase c = cur;
      c.lead.clear();
      for (auto& f : c.faults)
        if (!f.relative_to_n && f.value > 0)
          f.value -= std::min<std::int64_t>(f.value, static_cast<std::int64_t>(cur.lead.size()));
      progress |= try_accept(cur, std::move(c));
    }
    // 6. offset faults one at a time
    for (std::size_t i = 0; i < cur.faults.size() && budget();) {
      FuzzCase c = cur;
      c.faults.erase(c.faults.begin() + static_cast<std::ptrdiff_t>(i));
      if (try_accept(cur, std::move(c))) progress = true;
      else ++i;
    }
    // 7. shrink D (NONE pooling needs one D: every table at once)
    for (std::size_t t = 0; t < cur.tables->rows.size() && budget(); ++t) {
      for (bool again = true; again && budget();) {
        again = false;
        const std::int32_t D = cur.tables->dims[t];
        if (D <= 1) break;
        for (std::int32_t nd : {std::int32_t{1}, static_cast<std::int32_t>(D / 2)}) {
          if (nd >= D || nd < 1) continue;
          FuzzCase c = cur;
          if (cur.pooling == PoolingMode::None) {
            std::shared_ptr<Tables> tb = std::make_shared<Tables>(*cur.tables);
            for (std::size_t u = 0; u < tb->rows.size(); ++u)
              tb = reshape_table(*tb, u, tb->rows[u], std::min(nd, tb->dims[u]));
            c.tables = tb;
          } else {
            c.tables = reshape_table(*cur.tables, t, cur.tables->rows[t], nd);
          }
          if (try_accept(cur, std::move(c))) {
            progress = again = true;
            break;
          }
        }
      }
    }
    // 8. shrink E: rows [0, E') kept, in-range indices of the table's features taken mod E'
    for (std::size_t t = 0; t < cur.tables->rows.size() && budget(); ++t) {
      for (bool again = true; again && budget();) {
        again = false;
        const std::int64_t E = cur.tables->rows[t];
        if (E <= 1) break;
        for (std::int64_t ne : {std::int64_t{1}, E / 2}) {
          if (ne >= E || ne < 1) continue;
          FuzzCase c = cur;
          c.tables = reshape_table(*cur.tables, t, ne, cur.tables->dims[t]);
          for (std::int64_t f = 0; f < c.T(); ++f) {
            if (c.ftm[f] != static_cast<std::int32_t>(t)) continue;
            const std::int64_t first = c.first_bag(f), n = c.bags_of_feature(f);
            for (std::int64_t b = first; b < first + n; ++b)
              for (auto& i : c.bags[b].idx)
                if (i >= 0 && i < E) i %= ne;
          }
          if (c.bounds == BoundsCheckMode::None)
            for (auto& i : c.lead) i %= std::min<std::int64_t>(ne, i + 1);
          if (try_accept(cur, std::move(c))) {
            progress = again = true;
            break;
          }
        }
      }
    }
    // 9. simpler options
    if (cur.weighted && budget()) {
      FuzzCase c = cur;
      c.weighted = false;
      progress |= try_accept(cur, std::move(c));
    }
    return progress;
  }
};

}  // namespace

ShrinkResult shrink(const FuzzCase& failing, const Verdict& first, const CaseJudge& judge,
                    const ShrinkLimits& limits) {
  ShrinkResult r;
  r.shrunk = failing;
  Shrinker s(judge, first, limits);
  while (s.budget() && s.pass(r.shrunk)) {
  }
  r.steps = s.steps;
  r.runs = s.runs;
  r.verdict = std::move(s.last);  // of the last accepted candidate, i.e. of r.shrunk
  return r;
}

}  // namespace tbe::fuzz
