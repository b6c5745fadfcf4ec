// Bounds check and repair: the sequential loop of docs/semantics.md equals the max-scan form (values and
// warning counts) on arbitrary offsets; FATAL names the first offender of a brute-force scan;
// WARNING/IGNORE repair equals a brute-force repair, and forward computes on the repaired input.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cstring>
#include <optional>

#include "reference_test_support.h"
#include "tbe/bounds_check.h"

using namespace tbe;
using namespace tbe_test;

namespace {

// Brute force, written from the definitions in docs/semantics.md independently of the library code.
// Bag k is bad iff s < 0, s > e or e > N on the offsets as given.
std::optional<BoundsViolation> brute_first_violation(const ForwardCase& c) {
  const auto feats = bag_features(c);
  const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
  const std::int64_t K = num_bags(c);
  std::vector<std::int64_t> first_bag_of(c.num_features() + 1, K);
  for (std::int64_t k = K - 1; k >= 0; --k) first_bag_of[feats[k]] = k;
  auto sample = [&](std::int64_t k) { return k - first_bag_of[feats[k]]; };
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t s = c.offsets[k], e = c.offsets[k + 1];
    if (s < 0 || s > e)
      return BoundsViolation{BoundsViolation::Kind::Bag, feats[k], sample(k), k, s, N};
    if (e > N) return BoundsViolation{BoundsViolation::Kind::Bag, feats[k], sample(k), k, e, N};
  }
  if (c.offsets[K] != N)
    return BoundsViolation{BoundsViolation::Kind::LastOffset, -1, -1, K, c.offsets[K], N};
  for (std::int64_t q = 0; q < N; ++q) {
    for (std::int64_t k = 0; k < K; ++k) {
      if (c.offsets[k] <= q && q < c.offsets[k + 1]) {
        const std::int64_t E = c.rows[c.feature_table_map[feats[k]]];
        if (c.indices[q] < 0 || c.indices[q] >= E)
          return BoundsViolation{BoundsViolation::Kind::Index, feats[k], sample(k), q,
                                 c.indices[q], E};
        break;  // valid offsets: at most one bag holds q
      }
    }
  }
  return std::nullopt;
}

// Corrupts a valid case: a few offsets and indices get arbitrary values (possibly still valid).
void corrupt(ForwardCase& c) {
  const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
  const auto n_off = *rc::gen::inRange(0, 3);
  for (int i = 0; i < n_off; ++i) {
    const auto k = *rc::gen::inRange<std::size_t>(0, c.offsets.size());
    c.offsets[k] = *rc::gen::inRange<std::int64_t>(-2, N + 3);
  }
  if (N > 0) {
    const auto n_idx = *rc::gen::inRange(0, 4);
    for (int i = 0; i < n_idx; ++i) {
      const auto q = *rc::gen::inRange<std::int64_t>(0, N);
      c.indices[q] = *rc::gen::elementOf(std::vector<std::int64_t>{-1, -7, 60, 61, 1000, 0, 1});
    }
  }
}

}  // namespace

TEST_CASE("sequential repair equals the max-scan form on arbitrary offsets", "[bounds]") {
  rc::prop("values, bad-bag and last-offset counts agree", []() {
    const auto N = *rc::gen::inRange<std::int64_t>(0, 12);
    const auto offsets = *rc::gen::container<std::vector<std::int64_t>>(
        rc::gen::inRange<std::int64_t>(-4, N + 5));
    std::int64_t bb1 = -1, bl1 = -1, bb2 = -1, bl2 = -1;
    const auto seq = repair_offsets_sequential(offsets, N, &bb1, &bl1);
    const auto scan = repair_offsets_max_scan(offsets, N, &bb2, &bl2);
    RC_ASSERT(seq == scan);
    RC_ASSERT(bb1 == bb2);
    RC_ASSERT(bl1 == bl2);
    // The result is valid: starts in [0, N], non-decreasing, ends at N.
    if (!seq.empty()) {
      RC_ASSERT(seq.back() == N);
      RC_ASSERT(seq.front() >= 0);
      for (std::size_t k = 0; k + 1 < seq.size(); ++k) RC_ASSERT(seq[k] <= seq[k + 1]);
      RC_ASSERT(bl1 == (offsets.back() != N ? 1 : 0));
    }
    // Idempotent: a repaired vector needs no repair.
    std::int64_t bb3, bl3;
    RC_ASSERT(repair_offsets_max_scan(seq, N, &bb3, &bl3) == seq);
    RC_ASSERT(bb3 == 0);
    RC_ASSERT(bl3 == 0);
  });
}

TEST_CASE("repair rule on hand-derived offsets", "[bounds]") {
  std::int64_t bb, bl;
  // C02: [0, 3, 2, 4], N = 4 -> bag 1 (3 > 2) repaired: [0, 3, 3, 4], 1 bag.
  CHECK(repair_offsets_sequential({0, 3, 2, 4}, 4, &bb, &bl) == std::vector<std::int64_t>{0, 3, 3, 4});
  CHECK(bb == 1);
  CHECK(bl == 0);
  // Negative start and an end beyond N, last offset wrong: [-2, 1, 9, 3], N = 5
  // -> last := 5; bag0 (-2) -> [0, 1]; bag1 (1, 9 > 5) -> 5; bag2 (5 > 5? no: s = 5, e = 5) ok.
  CHECK(repair_offsets_max_scan({-2, 1, 9, 3}, 5, &bb, &bl) == std::vector<std::int64_t>{0, 1, 5, 5});
  CHECK(bb == 2);
  CHECK(bl == 1);
  // Start beyond N: [7, 7], N = 3 -> last := 3; bag0 s = 7 > e = 3 -> [3, 3].
  CHECK(repair_offsets_sequential({7, 7}, 3, &bb, &bl) == std::vector<std::int64_t>{3, 3});
  CHECK(bb == 1);
  CHECK(bl == 1);
  // Zero bags: the single offset is the last one.
  CHECK(repair_offsets_max_scan({2}, 0, &bb, &bl) == std::vector<std::int64_t>{0});
  CHECK(bb == 0);
  CHECK(bl == 1);
  CHECK(repair_offsets_sequential({}, 0, nullptr, nullptr).empty());
}

TEST_CASE("FATAL names the first offender of a brute-force scan and writes nothing",
          "[bounds]") {
  rc::prop("find_first_violation == brute force; forward throws it", []() {
    GenOptions opt;
    opt.allow_none = false;
    GenCase g = *gen_case(opt);
    ForwardCase& c = g.c;
    corrupt(c);
    c.index_dtype = DType::I64;  // corrupt values may not fit int32 mirrors... they do; keep I64
    c.options.bounds_check = BoundsCheckMode::Fatal;
    const auto expected = brute_first_violation(c);
    const auto p = c.view();
    RC_ASSERT(find_first_violation(p) == expected);
    const auto L = make_output_layout(p);
    std::vector<float> out(static_cast<std::size_t>(L.numel) + 1, 12345.0f);
    const auto before = out;
    if (expected) {
      try {
        forward_reference(p, out.data());
        RC_FAIL("forward did not throw");
      } catch (const BoundsCheckError& e) {
        RC_ASSERT(e.violation() == *expected);
      }
      RC_ASSERT(out == before);  // nothing written
      RC_ASSERT_THROWS_AS(repair(p), BoundsCheckError);
    } else {
      const auto r = repair(p);
      RC_ASSERT(r.warnings == 0);
      RC_ASSERT(r.offsets == c.offsets);
      RC_ASSERT(r.indices == c.indices);
    }
  });
}

TEST_CASE("WARNING/IGNORE repair equals a brute-force repair and forward uses it", "[bounds]") {
  rc::prop("repaired offsets/indices/counts; forward(bad) == forward(repaired)", []() {
    GenOptions opt;
    opt.allow_none = false;
    GenCase g = *gen_case(opt);
    ForwardCase& c = g.c;
    corrupt(c);
    c.index_dtype = *rc::gen::elementOf(std::vector<DType>{DType::I32, DType::I64});
    c.options.bounds_check =
        *rc::gen::elementOf(std::vector<BoundsCheckMode>{BoundsCheckMode::Warning,
                                                         BoundsCheckMode::Ignore});
    const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
    // Brute force: the literal sequential loop, then every in-bag bad index -> 0.
    std::int64_t bad_bags, bad_last;
    ForwardCase fixed = c;
    fixed.offsets = repair_offsets_sequential(c.offsets, N, &bad_bags, &bad_last);
    const auto feats = bag_features(c);
    std::int64_t bad_indices = 0;
    for (std::int64_t k = 0; k < num_bags(c); ++k) {
      const std::int64_t E = c.rows[c.feature_table_map[feats[k]]];
      for (std::int64_t q = fixed.offsets[k]; q < fixed.offsets[k + 1]; ++q)
        if (fixed.indices[q] < 0 || fixed.indices[q] >= E) {
          fixed.indices[q] = 0;
          ++bad_indices;
        }
    }
    const auto r = repair(c.view());
    RC_ASSERT(r.offsets == fixed.offsets);
    RC_ASSERT(r.indices == fixed.indices);
    RC_ASSERT(r.bad_bags == bad_bags);
    RC_ASSERT(r.bad_last_offset == bad_last);
    RC_ASSERT(r.bad_indices == bad_indices);
    RC_ASSERT(r.warnings == bad_bags + bad_last + bad_indices);

    ForwardStats st;
    const auto out = fwd64(c, &st);
    RC_ASSERT(st.warnings == r.warnings);
    fixed.options.bounds_check = BoundsCheckMode::None;
    fixed.index_dtype = DType::I64;
    ForwardStats st2;
    RC_ASSERT(fwd64(fixed, &st2) == out);
    RC_ASSERT(st2.warnings == 0);
  });
}

TEST_CASE("bounds check None passes input through and indices before the first offset are ignored",
          "[bounds]") {
  // E = 4; offsets start at 2, so indices[0..1] (bad values) belong to no bag.
  ForwardCase c = one_table_case(4, 1, 2, {-9, 99, 1, 3, 2}, {2, 4, 5},
                                 [](auto r, auto) { return double(r + 1); });
  for (auto mode : {BoundsCheckMode::Fatal, BoundsCheckMode::Warning, BoundsCheckMode::Ignore,
                    BoundsCheckMode::None}) {
    c.options.bounds_check = mode;
    ForwardStats st;
    CHECK(fwd64(c, &st) == std::vector<double>{2 + 4, 3});
    CHECK(st.warnings == 0);
    CHECK(st.paths == std::vector<std::string>{"reference"});
    const auto r = repair(c.view());
    CHECK(r.indices == c.indices);
    CHECK(r.warnings == 0);
  }
}

TEST_CASE("FATAL message names feature, sample, position, value and limit", "[bounds]") {
  // T = 2 (E = 10 and 3), B = 2; the bad index is 3 in feature 1, sample 1, position 3.
  ForwardCase c;
  c.set_tables(DType::F32, {10, 3}, {2, 2});
  c.feature_table_map = {0, 1};
  c.batch_size = 2;
  c.indices = {9, 0, 2, 3};
  c.offsets = {0, 1, 2, 3, 4};
  c.options.bounds_check = BoundsCheckMode::Fatal;
  try {
    fwd64(c);
    FAIL("no throw");
  } catch (const BoundsCheckError& e) {
    const auto& v = e.violation();
    CHECK(v.kind == BoundsViolation::Kind::Index);
    CHECK(v.feature == 1);
    CHECK(v.sample == 1);
    CHECK(v.position == 3);
    CHECK(v.value == 3);
    CHECK(v.limit == 3);
    CHECK(std::string(e.what()) ==
          "bounds check FATAL: index 3 at position 3 (feature 1, sample 1) is outside [0, E=3)");
  }
  c.offsets = {0, 1, 3, 2, 4};
  try {
    fwd64(c);
    FAIL("no throw");
  } catch (const BoundsCheckError& e) {
    CHECK(e.violation().kind == BoundsViolation::Kind::Bag);
    CHECK(e.violation().position == 2);  // bag 2 = (feature 1, sample 0): starts at 3 > 2
    CHECK(e.violation().feature == 1);
    CHECK(e.violation().sample == 0);
    CHECK(e.violation().value == 3);
    CHECK_THAT(e.what(), Catch::Contains("bag 2 (feature 1, sample 0)"));
  }
  c.offsets = {0, 1, 2, 3, 3};
  try {
    fwd64(c);
    FAIL("no throw");
  } catch (const BoundsCheckError& e) {
    CHECK(e.violation().kind == BoundsViolation::Kind::LastOffset);
    CHECK(std::string(e.what()) ==
          "bounds check FATAL: last offset offsets[4] = 3 != N = 4 (len(indices))");
  }
  c.offsets = {-1, 1, 2, 3, 4};
  CHECK_THROWS_WITH(fwd64(c), Catch::Contains("negative offset -1"));
  c.offsets = {0, 1, 2, 5, 5};
  CHECK_THROWS_WITH(fwd64(c), Catch::Contains("bag 2") && Catch::Contains("offset 5 beyond N=4"));
}
