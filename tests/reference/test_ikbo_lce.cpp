// IKBO LCE reference: naive triple loop (bitwise), the unfused baseline formula, zero padding of
// K, every map kind, both rounding policies, the backend interface.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "ikbo_test_support.h"

using namespace ikbo_test;

namespace {

/// Copies a [R, C] row-major storage tensor into [R, C_new] with zero columns appended.
std::vector<std::byte> pad_columns(const std::vector<std::byte>& t, DType st, std::int64_t R,
                                   std::int64_t C, std::int64_t C_new) {
  std::vector<std::byte> out(static_cast<std::size_t>(R * C_new) * dtype_size(st));
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c)
      store_from_double(st, out.data(), r * C_new + c, load_as_double(st, t.data(), r * C + c));
  return out;
}
/// [G, K, N] -> [G, K_new, N] with zero rows appended to every slice.
std::vector<std::byte> pad_rows(const std::vector<std::byte>& t, DType st, std::int64_t G,
                                std::int64_t K, std::int64_t N, std::int64_t K_new) {
  std::vector<std::byte> out(static_cast<std::size_t>(G * K_new * N) * dtype_size(st));
  for (std::int64_t g = 0; g < G; ++g)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t n = 0; n < N; ++n)
        store_from_double(st, out.data(), (g * K_new + k) * N + n,
                          load_as_double(st, t.data(), (g * K + k) * N + n));
  return out;
}
std::int64_t round_up8(std::int64_t k) { return (k + 7) / 8 * 8; }

std::vector<double> output_as_double(DType st, const std::vector<std::byte>& out) {
  std::vector<double> v(out.size() / dtype_size(st));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = load_as_double(st, out.data(), static_cast<std::int64_t>(i));
  return v;
}

}  // namespace

TEST_CASE("ikbo lce fp64 == naive triple loop (bitwise) for every map kind", "[ikbo][lce]") {
  rc::prop("fp64 parts and sum equal the naive loops", []() {
    const LceSpec s = *gen_lce_spec();
    RC_TAG(to_string(s.map));
    const LceCase c = build(s);
    const LceProblem p = c.view();
    const LceReference r = lce_reference_fp64(p);
    const NaiveLce n = naive_lce(p);
    RC_ASSERT(r.candidate_part == n.cand);
    RC_ASSERT(r.user_part == n.user);
    RC_ASSERT(r.out == n.out);
  });
}

TEST_CASE("ikbo lce == unfused baseline W = (W_u | W_c), E = (E_u(u) over E_c)", "[ikbo][lce]") {
  rc::prop("equal to the baseline within both FP64 errors, exactly for small integers", []() {
    const LceSpec s = *gen_lce_spec();
    const LceCase c = build(s);
    const LceProblem p = c.view();
    const LceReference r = lce_reference_fp64(p);
    const DType st = s.policy.storage;
    const std::int64_t K = p.K_u + p.K_c;
    for (std::int64_t b = 0; b < p.B; ++b) {
      const std::int64_t u = p.cand_to_user[b];
      for (std::int64_t m = 0; m < p.M; ++m)
        for (std::int64_t j = 0; j < p.N; ++j) {
          // out = W·E with W [M, K_u + K_c] (user columns first) and E[b] the stacked rows.
          double sum = 0.0, absum = 0.0;
          for (std::int64_t k = 0; k < K; ++k) {
            const bool user = k < p.K_u;
            const double w = user ? load_as_double(st, p.w_u, m * p.K_u + k)
                                  : load_as_double(st, p.w_c, m * p.K_c + (k - p.K_u));
            const double e = user ? load_as_double(st, p.e_u, (u * p.K_u + k) * p.N + j)
                                  : load_as_double(st, p.e_c,
                                                   (b * p.K_c + (k - p.K_u)) * p.N + j);
            sum += w * e;
            absum += std::fabs(w * e);
          }
          const double got = r.out[(b * p.M + m) * p.N + j];
          if (s.small_integers) {
            RC_ASSERT(got == sum);
          } else {
            // Both are FP64 sums of the same K exact products in different trees: each within
            // γ64(K)·Σ|terms| of the exact value (Higham §4.2), so within twice that of each other.
            const double g = K * 0x1p-53 / (1 - K * 0x1p-53);
            RC_ASSERT(std::fabs(got - sum) <= 2 * g * absum * (1 + 0x1p-50));
          }
        }
    }
  });
}

TEST_CASE("ikbo lce zero padding of K to a multiple of 8 leaves the fp64 result unchanged",
          "[ikbo][lce]") {
  rc::prop("padded == unpadded (bitwise, as doubles)", []() {
    const LceSpec s = *gen_lce_spec();
    LceCase c = build(s);
    const LceReference r = lce_reference_fp64(c.view());
    const DType st = s.policy.storage;
    const LceShape sh = c.shape;
    const std::int64_t Kc8 = round_up8(sh.K_c), Ku8 = sh.K_u > 0 ? round_up8(sh.K_u) : 0;
    LceCase padded = c;
    padded.shape.K_c = Kc8;
    padded.shape.K_u = Ku8;
    padded.w_c = pad_columns(c.w_c, st, sh.M, sh.K_c, Kc8);
    padded.w_u = pad_columns(c.w_u, st, sh.M, sh.K_u, Ku8);
    padded.e_c = pad_rows(c.e_c, st, sh.B, sh.K_c, sh.N, Kc8);
    padded.e_u = pad_rows(c.e_u, st, sh.U, sh.K_u, sh.N, Ku8);
    const LceReference rp = lce_reference_fp64(padded.view());
    RC_ASSERT(rp.candidate_part == r.candidate_part);
    RC_ASSERT(rp.user_part == r.user_part);
    RC_ASSERT(rp.out == r.out);
    // The rounded outputs are bitwise identical too.
    auto o1 = c.make_output(), o2 = padded.make_output();
    lce_reference(c.view(), o1.data());
    lce_reference(padded.view(), o2.data());
    RC_ASSERT(o1 == o2);
  });
}

TEST_CASE("ikbo lce rounded output follows the policy's rounding points", "[ikbo][lce]") {
  rc::prop("published: RN(RN(c) + RN(u)); round-once: RN(c + u); user-rounded: "
           "RN(RN_acc(c + RN(u)))", []() {
    const LceSpec s = *gen_lce_spec();
    const LceCase c = build(s);
    const LceReference r = lce_reference_fp64(c.view());
    auto out = c.make_output();
    lce_reference(c.view(), out.data());
    const DType st = s.policy.storage;
    const std::vector<double> got = output_as_double(st, out);
    for (std::size_t i = 0; i < got.size(); ++i) {
      double want = round_to(st, r.out[i]);
      if (s.policy.lce_rounding == LceRounding::Published)
        want = round_to(st, round_to(st, r.candidate_part[i]) + round_to(st, r.user_part[i]));
      else if (s.policy.lce_rounding == LceRounding::UserRounded)
        want = round_to(st, round_to(s.policy.accumulation,
                                     r.candidate_part[i] + round_to(st, r.user_part[i])));
      RC_ASSERT(got[i] == want);
    }
  });
}

TEST_CASE("ikbo lce published and round-once differ on a half-way case (fp16)", "[ikbo][lce]") {
  // cand = (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20, user = 2^-11 · 1.
  // Published: RN(cand) = 1 + 2^-9, + 2^-11 is the midpoint of 1 + 2^-9 and 1 + 3·2^-10: ties to
  // even, 1 + 2^-9. Round-once: 1 + 2^-9 + 2^-11 + 2^-20 is above that midpoint: 1 + 3·2^-10.
  LceCase c = make_lce_case({1, 1, 1, 1, 1, 1}, {DType::F16, DType::F32, LceRounding::Published},
                            MapKind::Sorted, 1);
  store_from_double(DType::F16, c.w_c.data(), 0, 1 + 0x1p-10);
  store_from_double(DType::F16, c.e_c.data(), 0, 1 + 0x1p-10);
  store_from_double(DType::F16, c.w_u.data(), 0, 0x1p-11);
  store_from_double(DType::F16, c.e_u.data(), 0, 1.0);
  auto out = c.make_output();
  lce_reference(c.view(), out.data());
  CHECK(load_as_double(DType::F16, out.data(), 0) == 1 + 0x1p-9);
  c.policy.lce_rounding = LceRounding::RoundOnce;
  lce_reference(c.view(), out.data());
  CHECK(load_as_double(DType::F16, out.data(), 0) == 1 + 3 * 0x1p-10);
  // User-rounded: RN(u) = 2^-11 exactly; FP32 holds 1 + 2^-9 + 2^-11 + 2^-20 exactly, above the
  // midpoint: 1 + 3·2^-10, as round-once (the candidate part is not rounded to 16 bits first).
  c.policy.lce_rounding = LceRounding::UserRounded;
  lce_reference(c.view(), out.data());
  CHECK(load_as_double(DType::F16, out.data(), 0) == 1 + 3 * 0x1p-10);
}

TEST_CASE("ikbo lce user-rounded differs from round-once when the stored user part crosses a midpoint",
          "[ikbo][lce]") {
  // FP16. cand = (1 + 2^-7)(1 - 2^-7) = 1 - 2^-14 (K_c = 1); user = u0·1 + 2^-13·1 (K_u = 2,
  // exact in FP32) with u0 = 1537·2^-11 = 0.75 + 2^-11, so 1 + u0 is the midpoint of 1.75 and
  // 1.75 + 2^-10.
  //   round-once: 1 - 2^-14 + u0 + 2^-13 = (1 + u0) + 2^-14, above the midpoint: 1.75 + 2^-10.
  //   user-rounded: RN(user) = u0 (2^-13 < half an ulp 2^-12 of [0.5, 1)); the FP32 sum
  //   1 + u0 - 2^-14 is exact and below the midpoint: 1.75.
  //   published: RN(cand) = 1, 1 + u0 is the midpoint, ties to even: 1.75.
  LceCase c = make_lce_case({1, 1, 1, 1, 1, 2}, {DType::F16, DType::F32, LceRounding::RoundOnce},
                            MapKind::Sorted, 1);
  const double u0 = 1537 * 0x1p-11;
  store_from_double(DType::F16, c.w_c.data(), 0, 1 + 0x1p-7);
  store_from_double(DType::F16, c.e_c.data(), 0, 1 - 0x1p-7);
  store_from_double(DType::F16, c.w_u.data(), 0, u0);
  store_from_double(DType::F16, c.w_u.data(), 1, 0x1p-13);
  store_from_double(DType::F16, c.e_u.data(), 0, 1.0);
  store_from_double(DType::F16, c.e_u.data(), 1, 1.0);
  auto out = c.make_output();
  lce_reference(c.view(), out.data());
  CHECK(load_as_double(DType::F16, out.data(), 0) == 1.75 + 0x1p-10);
  c.policy.lce_rounding = LceRounding::UserRounded;
  lce_reference(c.view(), out.data());
  CHECK(load_as_double(DType::F16, out.data(), 0) == 1.75);
  c.policy.lce_rounding = LceRounding::Published;
  lce_reference(c.view(), out.data());
  CHECK(load_as_double(DType::F16, out.data(), 0) == 1.75);
}

TEST_CASE("ikbo lce K_u = 0 has no user part, B = 0 writes nothing", "[ikbo][lce]") {
  LceCase c = make_lce_case({3, 2, 4, 5, 7, 0}, {DType::BF16, DType::F32, LceRounding::Published},
                            MapKind::Unsorted, 9);
  const LceReference r = lce_reference_fp64(c.view());
  for (double v : r.user_part) CHECK(v == 0.0);
  CHECK(r.out == r.candidate_part);
  LceCase empty = make_lce_case({0, 2, 4, 5, 7, 3}, {}, MapKind::Sorted, 9);
  CHECK(lce_reference_fp64(empty.view()).out.empty());
  lce_reference(empty.view(), nullptr);  // nothing to write: a null output is fine
}

TEST_CASE("ikbo map kinds have their defining properties", "[ikbo][workloads]") {
  for (std::int64_t B : {0, 1, 7, 64, 1024}) {
    for (MapKind k : kAllMapKinds) {
      const std::int64_t U_req = 15;
      const std::int64_t U = map_users(k, B, U_req);
      const auto map = make_cand_to_user(k, B, U_req, 3);
      INFO(to_string(k) << " B=" << B);
      REQUIRE(static_cast<std::int64_t>(map.size()) == B);
      CHECK(validate_map(map, U).ok());
      std::vector<std::int64_t> count(static_cast<std::size_t>(U), 0);
      for (auto u : map) ++count[u];
      switch (k) {
        case MapKind::Sorted:
          CHECK(std::is_sorted(map.begin(), map.end()));
          if (B >= U)
            for (auto n : count) CHECK((n == B / U || n == B / U + 1));
          break;
        case MapKind::Unsorted: {
          auto sorted = map;
          std::sort(sorted.begin(), sorted.end());
          CHECK(sorted == make_cand_to_user(MapKind::Sorted, B, U_req, 3));
          if (B >= 64) CHECK_FALSE(std::is_sorted(map.begin(), map.end()));
          break;
        }
        case MapKind::UsersWithoutCandidates:
          for (std::int64_t u = 0; u < U; u += 3) CHECK(count[u] == 0);
          break;
        case MapKind::OneUser: CHECK(U == 1); break;
        case MapKind::UserPerCandidate:
          CHECK(U == std::max<std::int64_t>(B, 1));
          if (B > 0) for (auto n : count) CHECK(n == 1);
          break;
      }
    }
  }
  CHECK(parse_map_kind("u-eq-b") == MapKind::UserPerCandidate);
  CHECK_THROWS_WITH(parse_map_kind("diagonal"), Catch::Contains("unknown map kind 'diagonal'"));
  CHECK_THROWS_WITH(map_users(MapKind::UsersWithoutCandidates, 4, 1),
                    Catch::Contains("U: 1 must be >= 2"));
}

TEST_CASE("ikbo generator is deterministic and values are uniform in -1 to 1 of storage",
          "[ikbo][workloads]") {
  const LceShape sh{5, 3, 4, 6, 9, 11};
  for (DType st : {DType::F16, DType::BF16, DType::F32}) {
    const IkboPolicy pol{st, DType::F32, LceRounding::RoundOnce};
    const LceCase a = make_lce_case(sh, pol, MapKind::Unsorted, 42);
    const LceCase b = make_lce_case(sh, pol, MapKind::Unsorted, 42);
    const LceCase d = make_lce_case(sh, pol, MapKind::Unsorted, 43);
    CHECK(a.e_c == b.e_c);
    CHECK(a.cand_to_user == b.cand_to_user);
    CHECK(a.e_c != d.e_c);
    for (std::size_t i = 0; i < a.e_c.size() / dtype_size(st); ++i) {
      const double v = load_as_double(st, a.e_c.data(), static_cast<std::int64_t>(i));
      CHECK((v >= -1.0 && v <= 1.0));  // [-1, 1) rounded to storage may reach 1.0
    }
  }
  const LceShape named = named_lce_shape("ikbo-lce");
  CHECK((named.M == 433 && named.N == 256 && named.K_u == 1178 && named.K_c == 866 &&
         named.B == 1024 && named.U == 15));
  CHECK(named_lce_shape("ikbo-lce", 64).B == 64);
  const AttentionShape fa = named_attention_shape("ikbo-fa", 1024);
  CHECK((fa.B == 2048 && fa.H == 2 && fa.n_seed == 64 && fa.Dh == 128 && fa.U == 32 &&
         fa.S == 1024));
  CHECK_THROWS_WITH(named_lce_shape("ikbo-x"), Catch::Contains("unknown LCE shape 'ikbo-x'"));
}

TEST_CASE("ikbo reference backend runs the reference and validates first", "[ikbo][lce]") {
  auto be = make_reference_ikbo_backend();
  CHECK(be->name() == "cpu-reference");
  LceCase c = make_lce_case({4, 2, 3, 5, 6, 2}, {}, MapKind::Unsorted, 5);
  auto out = c.make_output(), want = c.make_output();
  be->lce(c.view(), out.data());
  lce_reference(c.view(), want.data());
  CHECK(out == want);
  // A bad map: InvalidArgument, output untouched.
  c.cand_to_user[2] = 2;
  std::vector<std::byte> poisoned(out.size(), std::byte{0x7B});
  auto copy = poisoned;
  CHECK_THROWS_WITH(be->lce(c.view(), poisoned.data()),
                    Catch::Contains("cand_to_user[2]: 2 outside [0, U=2)"));
  CHECK(poisoned == copy);
}
