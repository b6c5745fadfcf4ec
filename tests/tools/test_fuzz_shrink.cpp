// tbe-fuzz's shrinker: on the planted bug of --backend cpu-faulty and on planted predicates it
// reaches the minimal failing case, is deterministic, keeps the failing check, and never keeps a
// candidate that passes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/faulty_backend.h"
#include "fuzz/fuzz_case.h"
#include "fuzz/judge.h"
#include "fuzz/shrink.h"
#include "tbe/precision.h"

using namespace tbe;
using namespace tbe::fuzz;

namespace {

// T = 3 features over 2 tables (10 x 4 and 5 x 3, integer values), B = 4, one bag (feature 1,
// sample 2) of 300 lookups, the others short; bounds WARNING with one bad index, a lead index,
// per-sample weights.
FuzzCase planted_case() {
  auto tb = std::make_shared<Tables>();
  tb->dtype = DType::F32;
  tb->rows = {10, 5};
  tb->dims = {4, 3};
  tb->allocate();
  for (std::size_t t = 0; t < 2; ++t)
    for (std::int64_t r = 0; r < tb->rows[t]; ++r)
      for (std::int32_t d = 0; d < tb->dims[t]; ++d)
        tb->set(t, r, d, static_cast<double>((3 * r + d + static_cast<std::int64_t>(t)) % 7 - 3));
  FuzzCase fc;
  fc.tables = tb;
  fc.ftm = {0, 1, 0};
  fc.pooling = PoolingMode::Sum;
  fc.bounds = BoundsCheckMode::Warning;
  fc.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  fc.weighted = true;
  fc.B = 4;
  fc.lead = {1};
  for (std::int64_t f = 0; f < 3; ++f)
    for (std::int64_t b = 0; b < 4; ++b) {
      Bag bag;
      const std::int64_t E = tb->rows[fc.ftm[f]];
      const std::int64_t L = (f == 1 && b == 2) ? 300 : (f + b) % 3;
      for (std::int64_t l = 0; l < L; ++l) {
        bag.idx.push_back((l * 7 + b) % E);
        bag.w.push_back(0.5f + static_cast<float>(l % 3));
      }
      fc.bags.push_back(std::move(bag));
    }
  fc.bags[4].idx.push_back(99);  // out of range: repaired under WARNING
  fc.bags[4].w.push_back(1.0f);
  return fc;
}

std::int64_t longest_bag(const FuzzCase& c) {
  std::int64_t n = 0;
  for (const Bag& b : c.bags)
    n = std::max<std::int64_t>(n, static_cast<std::int64_t>(b.idx.size()));
  return n;
}

Verdict verdict(bool failed, const std::string& check) {
  Verdict j;
  j.failed = failed;
  j.check = check;
  j.detail = failed ? "planted" : "";
  return j;
}

// Fails check "planted" iff some bag has >= 256 lookups.
Verdict long_bag_predicate(const FuzzCase& c) {
  return verdict(longest_bag(c) >= 256, "planted");
}

ShrinkLimits no_time_limit() {
  ShrinkLimits l;
  l.max_seconds = 1e9;  // the run budget alone stops it: deterministic
  return l;
}

std::vector<std::int64_t> all_indices(const FuzzCase& c) {
  std::vector<std::int64_t> v = c.lead;
  for (const Bag& b : c.bags) v.insert(v.end(), b.idx.begin(), b.idx.end());
  return v;
}

}  // namespace

TEST_CASE("shrink: the planted bug of cpu-faulty shrinks to one bag of 256 lookups",
          "[fuzz][shrink]") {
  FaultyBackend dev;
  const FuzzCase start = planted_case();
  const Verdict first = verdict_of(judge_case(dev, start));
  REQUIRE(first.failed);
  REQUIRE(first.check == "oracle");
  const CaseJudge judge = [&](const FuzzCase& c) { return verdict_of(judge_case(dev, c)); };
  const ShrinkResult r = shrink(start, first, judge, no_time_limit());
  INFO(describe(r.shrunk));
  CHECK(r.steps > 0);
  CHECK(r.runs <= no_time_limit().max_runs);
  // Minimal: one feature, one table of 1 x 1, one bag of exactly 256 lookups (255 passes), no
  // lead index, no offset fault, unweighted.
  CHECK(r.shrunk.T() == 1);
  CHECK(r.shrunk.tables->rows == std::vector<std::int64_t>{1});
  CHECK(r.shrunk.tables->dims == std::vector<std::int32_t>{1});
  REQUIRE(r.shrunk.bags.size() == 1);
  CHECK(r.shrunk.bags[0].idx.size() == 256);
  CHECK(r.shrunk.lead.empty());
  CHECK(r.shrunk.faults.empty());
  CHECK_FALSE(r.shrunk.weighted);
  // The result still fails the same check, and its judgement is the shrunk case's.
  CHECK(r.verdict.failed);
  CHECK(r.verdict.check == "oracle");
  const Verdict again = verdict_of(judge_case(dev, r.shrunk));
  CHECK(again.failed);
  CHECK(again.check == "oracle");
  CHECK(again.detail == r.verdict.detail);
}

TEST_CASE("shrink: deterministic in the case and the judge", "[fuzz][shrink]") {
  FaultyBackend dev;
  const FuzzCase start = planted_case();
  const CaseJudge judge = [&](const FuzzCase& c) { return verdict_of(judge_case(dev, c)); };
  const Verdict first = judge(start);
  REQUIRE(first.failed);
  const ShrinkResult a = shrink(start, first, judge, no_time_limit());
  const ShrinkResult b = shrink(start, first, judge, no_time_limit());
  CHECK(a.steps == b.steps);
  CHECK(a.runs == b.runs);
  CHECK(describe(a.shrunk) == describe(b.shrunk));
  CHECK(all_indices(a.shrunk) == all_indices(b.shrunk));
  CHECK(a.shrunk.tables->weights == b.shrunk.tables->weights);
  CHECK(a.verdict.detail == b.verdict.detail);
}

TEST_CASE("shrink: a planted predicate reaches its minimal case, no passing candidate is kept",
          "[fuzz][shrink]") {
  const FuzzCase start = planted_case();
  std::int64_t judged = 0, passing = 0;
  const CaseJudge judge = [&](const FuzzCase& c) {
    ++judged;
    Verdict j = long_bag_predicate(c);
    passing += j.failed ? 0 : 1;
    return j;
  };
  const ShrinkResult r = shrink(start, long_bag_predicate(start), judge, no_time_limit());
  INFO(describe(r.shrunk));
  CHECK(judged == r.runs);
  CHECK(passing > 0);  // candidates that passed were tried ...
  CHECK(long_bag_predicate(r.shrunk).failed);  // ... and none of them was kept
  CHECK(r.shrunk.T() == 1);
  REQUIRE(r.shrunk.bags.size() == 1);
  CHECK(r.shrunk.bags[0].idx.size() == 256);
  CHECK(r.shrunk.tables->rows == std::vector<std::int64_t>{1});
  CHECK(r.shrunk.tables->dims == std::vector<std::int32_t>{1});
}

TEST_CASE("shrink: only candidates failing the same check are kept", "[fuzz][shrink]") {
  // "planted" needs a bag of >= 256 lookups; cases with fewer than 3 bags fail another check
  // ("other"), which must not be taken for the failure being shrunk.
  const CaseJudge judge = [](const FuzzCase& c) {
    if (c.bags.size() < 3) return verdict(true, "other");
    return long_bag_predicate(c);
  };
  const FuzzCase start = planted_case();
  const ShrinkResult r = shrink(start, judge(start), judge, no_time_limit());
  INFO(describe(r.shrunk));
  CHECK(r.verdict.check == "planted");
  CHECK(judge(r.shrunk).check == "planted");
  CHECK(r.shrunk.bags.size() >= 3);
  CHECK(longest_bag(r.shrunk) == 256);
}

TEST_CASE("shrink: a case no candidate of which fails is returned unchanged", "[fuzz][shrink]") {
  const FuzzCase start = planted_case();
  // Only the starting case itself fails (every candidate differs from it somewhere).
  const CaseJudge judge = [&](const FuzzCase& c) {
    return verdict(describe(c) == describe(start) && all_indices(c) == all_indices(start),
                   "planted");
  };
  const ShrinkResult r = shrink(start, judge(start), judge, no_time_limit());
  CHECK(r.steps == 0);
  CHECK(r.runs > 0);
  CHECK(describe(r.shrunk) == describe(start));
  CHECK(all_indices(r.shrunk) == all_indices(start));
  CHECK(r.verdict.failed);
}

TEST_CASE("shrink: the run budget bounds the judged candidates", "[fuzz][shrink]") {
  ShrinkLimits limits = no_time_limit();
  limits.max_runs = 5;
  std::int64_t judged = 0;
  const CaseJudge judge = [&](const FuzzCase& c) {
    ++judged;
    return long_bag_predicate(c);
  };
  const FuzzCase start = planted_case();
  const ShrinkResult r = shrink(start, long_bag_predicate(start), judge, limits);
  CHECK(r.runs == 5);
  CHECK(judged == 5);
  CHECK(long_bag_predicate(r.shrunk).failed);
}
