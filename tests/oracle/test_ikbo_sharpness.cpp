// IKBO oracle sharpness: seeded faults are caught, each on an input where the fault provably
// matters; and the report names the worst element's coordinates.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "ikbo_test_support.h"
#include "tbe/oracle/ikbo_emulation.h"
#include "tbe/oracle/ikbo_oracle.h"
#include "tbe/oracle/report_json.h"

using namespace ikbo_test;
using namespace tbe::oracle;

namespace {

LceCase random_lce(DType st, LceRounding r, MapKind map, std::uint64_t seed) {
  return make_lce_case({8, 4, 5, 6, 40, 30}, {st, DType::F32, r}, map, seed);
}

AttentionCase random_attention(DType st, std::int64_t S, std::uint64_t seed) {
  return make_attention_case(dense_shape(4, 2, 3, 2, 64, S), {st, DType::F32, {}},
                             MapKind::Unsorted, seed);
}

}  // namespace

TEST_CASE("ikbo lce: a wrong user (map off by one) is caught", "[ikbo][oracle][sharpness]") {
  for (DType st : {DType::F16, DType::BF16})
    for (MapKind map : {MapKind::Sorted, MapKind::Unsorted, MapKind::UserPerCandidate}) {
      const LceCase c = random_lce(st, LceRounding::RoundOnce, map, 11);
      LceEmulation e;
      e.user_offset = 1;
      const CheckReport r = check_lce_values(c.view(), emulate_lce(c.view(), e));
      INFO(r.summary());
      // Every candidate reads another user's E_u: O(1) changes against radii of ~1e-2.
      CHECK(r.failures > r.elements / 2);
    }
}

TEST_CASE("ikbo lce: FP16 accumulation is caught (1 + 4096·2^-12 lost)",
          "[ikbo][oracle][sharpness]") {
  // One element: w_c = 1, e_c = [1, 2^-12 x 4096]. FP32 accumulation gives exactly 2 in any
  // order; FP16 accumulation in ascending order absorbs every 2^-12 (1 + 2^-12 rounds to 1 in
  // FP16), returning 1. The enclosure is within an FP16 ulp of 2.
  LceCase c = make_lce_case({1, 1, 1, 1, 4097, 0}, {DType::F16, DType::F32, LceRounding::RoundOnce},
                            MapKind::Sorted, 1);
  for (std::int64_t k = 0; k < 4097; ++k) {
    store_from_double(DType::F16, c.w_c.data(), k, 1.0);
    store_from_double(DType::F16, c.e_c.data(), k, k == 0 ? 1.0 : 0x1p-12);
  }
  const IkboEnclosures enc = compute_lce_enclosures(c.view());
  LceEmulation good;
  CHECK(judge_lce(c.view(), enc, emulate_lce(c.view(), good)).passed());
  LceEmulation bad;
  bad.accumulation = DType::F16;
  const std::vector<double> v = emulate_lce(c.view(), bad);
  CHECK(v[0] == 1.0);
  const CheckReport r = judge_lce(c.view(), enc, v);
  INFO(r.summary());
  CHECK_FALSE(r.passed());
  CHECK(enc.enclosures[0].lo > 1.9);
}

TEST_CASE("ikbo lce: a published-rounding output judged under round-once", "[ikbo][oracle][sharpness]") {
  // The half-way case of test_ikbo_lce: cand = (1 + 2^-10)^2, user = 2^-11 (FP16).
  // Published gives 1 + 2^-9, round-once 1 + 3·2^-10; both parts are single exact products, so
  // each policy's enclosure is a point and the other policy's value is outside it.
  LceCase c = make_lce_case({1, 1, 1, 1, 1, 1}, {DType::F16, DType::F32, LceRounding::RoundOnce},
                            MapKind::Sorted, 1);
  store_from_double(DType::F16, c.w_c.data(), 0, 1 + 0x1p-10);
  store_from_double(DType::F16, c.e_c.data(), 0, 1 + 0x1p-10);
  store_from_double(DType::F16, c.w_u.data(), 0, 0x1p-11);
  store_from_double(DType::F16, c.e_u.data(), 0, 1.0);
  LceEmulation published;
  published.rounding = LceRounding::Published;
  const std::vector<double> pv = emulate_lce(c.view(), published);
  CHECK(pv[0] == 1 + 0x1p-9);
  const IkboEnclosures once = compute_lce_enclosures(c.view());
  CHECK(once.enclosures[0].lo == 1 + 3 * 0x1p-10);
  CHECK(once.enclosures[0].hi == 1 + 3 * 0x1p-10);
  CHECK_FALSE(judge_lce(c.view(), once, pv).passed());
  // And the other way round: the published policy rejects the round-once value.
  c.policy.lce_rounding = LceRounding::Published;
  const IkboEnclosures pub = compute_lce_enclosures(c.view());
  CHECK(judge_lce(c.view(), pub, pv).passed());
  CHECK_FALSE(judge_lce(c.view(), pub, std::vector<double>{1 + 3 * 0x1p-10}).passed());
}

TEST_CASE("ikbo lce: a published-rounding output judged under user-rounded",
          "[ikbo][oracle][sharpness]") {
  // The same half-way case: user-rounded stores RN(user) = 2^-11 and adds it to the FP32
  // candidate part 1 + 2^-9 + 2^-20 (exact), above the midpoint: 1 + 3·2^-10, as round-once.
  // The enclosure is that one value (the FP32 radius ~2^-23 is far below the 2^-20 margin), so
  // the published value 1 + 2^-9 (the candidate part rounded to 16 bits first) is caught.
  LceCase c = make_lce_case({1, 1, 1, 1, 1, 1},
                            {DType::F16, DType::F32, LceRounding::UserRounded}, MapKind::Sorted, 1);
  store_from_double(DType::F16, c.w_c.data(), 0, 1 + 0x1p-10);
  store_from_double(DType::F16, c.e_c.data(), 0, 1 + 0x1p-10);
  store_from_double(DType::F16, c.w_u.data(), 0, 0x1p-11);
  store_from_double(DType::F16, c.e_u.data(), 0, 1.0);
  const IkboEnclosures enc = compute_lce_enclosures(c.view());
  CHECK(enc.enclosures[0].lo == 1 + 3 * 0x1p-10);
  CHECK(enc.enclosures[0].hi == 1 + 3 * 0x1p-10);
  LceEmulation published;
  published.rounding = LceRounding::Published;
  const std::vector<double> pv = emulate_lce(c.view(), published);
  CHECK(pv[0] == 1 + 0x1p-9);
  CHECK_FALSE(judge_lce(c.view(), enc, pv).passed());
  CHECK(judge_lce(c.view(), enc, emulate_lce(c.view(), LceEmulation{})).passed());
}

TEST_CASE("ikbo lce: round-once and user-rounded outputs judged under each other",
          "[ikbo][oracle][sharpness]") {
  // test_ikbo_lce's midpoint case (FP16): cand = 1 - 2^-14, user = u0 + 2^-13 with
  // u0 = 0.75 + 2^-11 (1 + u0 is the midpoint of 1.75 and 1.75 + 2^-10). Round-once: the exact
  // sum is 2^-14 above the midpoint, 1.75 + 2^-10. User-rounded: RN(user) = u0, the FP32 sum
  // is 2^-14 below the midpoint, 1.75. Every partial sum is exact and the radius (~2^-22) is
  // below the 2^-14 margins: both enclosures are points and each rejects the other's value.
  LceCase c = make_lce_case({1, 1, 1, 1, 1, 2},
                            {DType::F16, DType::F32, LceRounding::UserRounded}, MapKind::Sorted, 1);
  store_from_double(DType::F16, c.w_c.data(), 0, 1 + 0x1p-7);
  store_from_double(DType::F16, c.e_c.data(), 0, 1 - 0x1p-7);
  store_from_double(DType::F16, c.w_u.data(), 0, 1537 * 0x1p-11);
  store_from_double(DType::F16, c.w_u.data(), 1, 0x1p-13);
  store_from_double(DType::F16, c.e_u.data(), 0, 1.0);
  store_from_double(DType::F16, c.e_u.data(), 1, 1.0);
  const IkboEnclosures ur = compute_lce_enclosures(c.view());
  CHECK(ur.enclosures[0].lo == 1.75);
  CHECK(ur.enclosures[0].hi == 1.75);
  LceEmulation once;
  once.rounding = LceRounding::RoundOnce;
  const std::vector<double> ov = emulate_lce(c.view(), once);
  CHECK(ov[0] == 1.75 + 0x1p-10);
  CHECK_FALSE(judge_lce(c.view(), ur, ov).passed());
  for (LceOrder order : kAllLceOrders) {  // every conforming user-rounded kernel gives 1.75
    LceEmulation e;
    e.order = order;
    CHECK(judge_lce(c.view(), ur, emulate_lce(c.view(), e)).passed());
  }
  c.policy.lce_rounding = LceRounding::RoundOnce;
  const IkboEnclosures ro = compute_lce_enclosures(c.view());
  CHECK(ro.enclosures[0].lo == 1.75 + 0x1p-10);
  CHECK(ro.enclosures[0].hi == 1.75 + 0x1p-10);
  CHECK_FALSE(judge_lce(c.view(), ro, std::vector<double>{1.75}).passed());
}

TEST_CASE("ikbo lce: published and round-once outputs under a user-rounded policy, random data",
          "[ikbo][oracle][sharpness]") {
  // Pinned outcomes (docs/oracle.md IKBO §2.5). Short reductions (K = 70): the enclosures are
  // one or two FP16 values; published (candidate part also rounded to 16 bits) and round-once
  // (user part not rounded) each differ from user-rounded by one ulp where one extra or one
  // missing 16-bit rounding moves the sum across a midpoint: some elements, not most.
  const LceCase c = random_lce(DType::F16, LceRounding::UserRounded, MapKind::Unsorted, 5);
  for (LceRounding other : {LceRounding::Published, LceRounding::RoundOnce}) {
    LceEmulation e;
    e.rounding = other;
    const CheckReport r = check_lce_values(c.view(), emulate_lce(c.view(), e));
    INFO(to_string(other) << ": " << r.summary());
    CHECK(r.failures > 0);
    CHECK(r.failures < r.elements / 2);
  }
}

TEST_CASE("ikbo lce: published rounding under a round-once policy, random data",
          "[ikbo][oracle][sharpness]") {
  // Pinned outcomes (docs/oracle.md IKBO §2.4). The policies differ by about one storage ulp
  // where the double rounding matters. Short reductions (K = 70): the FP32 radius
  // γ(70)·Σ|terms| ~ 1e-4 is far below an FP16 ulp (2^-9 near 3), enclosures are one or two
  // values, and the published output is caught. The ikbo-lce depth (K = 2044): the radius
  // ~ 2044·2^-23·Σ|terms| spans many FP16 ulps, so the one-ulp difference is hidden.
  LceEmulation published;
  published.rounding = LceRounding::Published;
  const LceCase shallow = random_lce(DType::F16, LceRounding::RoundOnce, MapKind::Sorted, 5);
  const CheckReport r = check_lce_values(shallow.view(), emulate_lce(shallow.view(), published));
  INFO(r.summary());
  CHECK(r.failures > 0);
  CHECK(r.failures < r.elements / 2);  // only where the double rounding changes the result
  const LceCase deep = make_lce_case({2, 2, 2, 3, 866, 1178},
                                     {DType::F16, DType::F32, LceRounding::RoundOnce},
                                     MapKind::Sorted, 5);
  const CheckReport rd = check_lce_values(deep.view(), emulate_lce(deep.view(), published));
  INFO(rd.summary());
  CHECK(rd.passed());
}

TEST_CASE("ikbo attention: a wrong user, a missing scale and a dropped block are caught",
          "[ikbo][oracle][sharpness]") {
  for (DType st : {DType::F16, DType::BF16}) {
    const AttentionCase c = random_attention(st, 256, 3);
    const AttentionProblem p = c.view();
    const IkboEnclosures enc = compute_attention_enclosures(p);
    AttentionEmulation good;
    CHECK(judge_attention(p, enc, emulate_attention(p, good)).passed());

    AttentionEmulation no_scale;  // logits sqrt(64) = 8 times too large: sharper softmax
    no_scale.apply_scale = false;
    const CheckReport r1 = judge_attention(p, enc, emulate_attention(p, no_scale));
    INFO(r1.summary());
    CHECK(r1.failures > r1.elements / 4);

    AttentionEmulation dropped;  // keys 64..127 of every user missing (a quarter of the keys)
    dropped.drop_block = 1;
    const CheckReport r2 = judge_attention(p, enc, emulate_attention(p, dropped));
    INFO(r2.summary());
    CHECK(r2.failures > r2.elements / 10);

    AttentionCase wrong = c;  // candidates query the next user's sequence
    for (auto& u : wrong.cand_to_user) u = (u + 1) % static_cast<std::int32_t>(wrong.shape.U);
    const CheckReport r3 = judge_attention(p, enc, emulate_attention(wrong.view(), good));
    INFO(r3.summary());
    CHECK(r3.failures > r3.elements / 2);
  }
}

TEST_CASE("ikbo attention: a softmax without max subtraction overflows on large logits",
          "[ikbo][oracle][sharpness]") {
  // Logits up to 100·(1·1) with scale 100: exp(100) overflows FP32 (max ~ e^88.7), so
  // exp(s) / Σ exp(s) is inf/inf = NaN; the enclosure is finite (the max-subtracted softmax is
  // well conditioned here).
  AttentionShape sh = dense_shape(1, 1, 1, 1, 1, 4);
  sh.scale = 100.0;
  AttentionCase c = make_attention_case(sh, {DType::F16, DType::F32, {}}, MapKind::OneUser, 1);
  const double q[] = {1.0}, k[] = {1.0, 0.5, -1.0, 0.25}, v[] = {0.5, 1.0, -1.0, 0.75};
  store_from_double(DType::F16, c.q.data(), 0, q[0]);
  for (int j = 0; j < 4; ++j) {
    store_from_double(DType::F16, c.k.data(), j, k[j]);
    store_from_double(DType::F16, c.v.data(), j, v[j]);
  }
  const AttentionProblem p = c.view();
  const IkboEnclosures enc = compute_attention_enclosures(p);
  CHECK(std::isfinite(enc.enclosures[0].lo));
  CHECK(std::isfinite(enc.enclosures[0].hi));
  AttentionEmulation good;
  CHECK(judge_attention(p, enc, emulate_attention(p, good)).passed());
  AttentionEmulation no_max;
  no_max.subtract_max = false;
  const std::vector<double> bad = emulate_attention(p, no_max);
  CHECK(std::isnan(bad[0]));
  CHECK_FALSE(judge_attention(p, enc, bad).passed());
}

TEST_CASE("ikbo attention: an empty range admits exactly 0", "[ikbo][oracle][sharpness]") {
  AttentionShape sh = dense_shape(4, 2, 2, 1, 8, 0);
  sh.jagged = true;
  sh.lengths = {0, 7};
  const AttentionCase c = make_attention_case(sh, {DType::BF16, DType::F32, {}},
                                              MapKind::Sorted, 2);
  const AttentionProblem p = c.view();
  const IkboEnclosures enc = compute_attention_enclosures(p);
  std::vector<double> v = emulate_attention(p, AttentionEmulation{});
  CHECK(judge_attention(p, enc, v).passed());
  CHECK(enc.enclosures[0].lo == 0.0);
  CHECK(enc.enclosures[0].hi == 0.0);
  v[0] = std::numeric_limits<double>::quiet_NaN();  // 0/0 of an unguarded kernel
  const CheckReport r = judge_attention(p, enc, v);
  CHECK(r.failures == 1);
  CHECK(r.worst.where.flat == 0);
}

TEST_CASE("ikbo reports name the worst element's coordinates", "[ikbo][oracle][report]") {
  const LceCase c = random_lce(DType::BF16, LceRounding::Published, MapKind::Unsorted, 8);
  const LceProblem p = c.view();
  std::vector<double> v = emulate_lce(p, LceEmulation{});
  // Candidate 5, m 3, n 4 gets +1000.
  const std::int64_t flat = (5 * p.M + 3) * p.N + 4;
  v[flat] = round_to(DType::BF16, v[flat] + 1000);
  const CheckReport r = check_lce_values(p, v);
  CHECK(r.failures == 1);
  CHECK(r.check == "ikbo-lce");
  CHECK(r.worst.where.space == ElementCoord::Space::IkboLce);
  CHECK(r.worst.where.sample == 5);
  CHECK(r.worst.where.row == 3);
  CHECK(r.worst.where.column == 4);
  CHECK_THAT(r.summary(), Catch::Contains("(candidate 5, m 3, n 4; flat " + std::to_string(flat)));
  nlohmann::json j = r;
  CHECK(j["worst"]["where"]["space"] == "ikbo-lce");

  const AttentionCase a = random_attention(DType::F16, 20, 4);
  const AttentionProblem ap = a.view();
  std::vector<double> av = emulate_attention(ap, AttentionEmulation{});
  // Row 7 (candidate 2, i = 1), head 1, d 9.
  const std::int64_t aflat = (7 * ap.H + 1) * ap.Dh + 9;
  av[aflat] = round_to(DType::F16, av[aflat] + 0.5);
  const CheckReport ar = check_attention_values(ap, av);
  CHECK(ar.failures == 1);
  CHECK(ar.worst.where.row == 7);
  CHECK(ar.worst.where.sample == 2);
  CHECK(ar.worst.where.head == 1);
  CHECK(ar.worst.where.column == 9);
  CHECK_THAT(ar.summary(), Catch::Contains("(row 7, candidate 2, head 1, d 9; flat "));
  // A value that is not a storage value fails even inside its interval.
  std::vector<double> unrounded = emulate_attention(ap, AttentionEmulation{});
  unrounded[3] = unrounded[3] + 0x1p-30;
  CHECK(check_attention_values(ap, unrounded).failures >= 1);
  // check_* read host buffers of the storage type.
  auto out = a.make_output();
  attention_reference(ap, out.data());
  CHECK(check_attention(ap, out.data()).passed());
  CHECK_THROWS_WITH(check_attention(ap, nullptr), Catch::Contains("out: null pointer"));
}
