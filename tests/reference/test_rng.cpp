// tbe::Rng (rng.h): the splitmix64 reference values, pinned values of every draw (taken from
// the generator code before it moved into rng.h: the streams that recorded cases and tbe-verify
// verdicts depend on must never change), reproducibility and the distributions.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numbers>
#include <vector>

#include "content_hash.h"
#include "tbe/errors.h"
#include "tbe/rng.h"

using namespace tbe;

TEST_CASE("Rng::from_state is the published splitmix64 sequence", "[rng]") {
  // Reference output of Vigna's splitmix64.c for state 0.
  Rng r = Rng::from_state(0);
  CHECK(r.next_u64() == 0xE220A8397B1DCDAFull);
  CHECK(r.next_u64() == 0x6E789E6AA1B965F4ull);
  CHECK(r.next_u64() == 0x06C45D188009454Full);
}

TEST_CASE("Rng streams are pinned: keyed, uniform, uniform_int, below, normal, zipf", "[rng]") {
  Rng a(5, 9);
  CHECK(a.next_u64() == 0x3127D34FC694B9C9ull);
  CHECK(a.next_u64() == 0x142504F79BC625BDull);
  CHECK(a.next_u64() == 0x4855B7E5D829719Full);

  Rng r(1, 2);  // one draw after another from the same stream
  CHECK(r.uniform() == 0x1.25713aec24b27p-1);
  CHECK(r.uniform() == 0x1.c128b9387d1f8p-4);
  CHECK(r.uniform_int(7) == 0);
  CHECK(r.uniform_int(7) == 1);
  CHECK(r.uniform_int(1000003) == 168419);
  CHECK(r.normal() == 0x1.61279eb5248adp-2);
  CHECK(r.normal() == -0x1.7e260a007a29p-2);
  CHECK(r.zipf(1.15) == 3568);
  CHECK(r.zipf(1.15) == 17724);
  CHECK(r.zipf(2.0) == 2);
  CHECK(r.next_u64() == 0x7F2F06602A06996Bull);

  Rng b = Rng::from_state(42);  // the emulations' random orders and SR draws
  CHECK(b.below(10) == 3);
  CHECK(b.below(1000003) == 164266);
  CHECK(b.below(1000003) == 771887);
  CHECK(b.uniform() == 0x1.607387fc392b8p-2);
}

TEST_CASE("Rng::advance(n) is n draws skipped", "[rng]") {
  for (std::uint64_t n : {0ull, 1ull, 7ull, 1000ull, 123457ull}) {
    Rng serial(3, 11), skipped(3, 11);
    for (std::uint64_t i = 0; i < n; ++i) serial.next_u64();
    skipped.advance(n);
    CHECK(skipped.next_u64() == serial.next_u64());
    CHECK(skipped.uniform() == serial.uniform());
  }
}

TEST_CASE("content_hash is FNV-1a 64", "[rng]") {
  // Published FNV-1a 64 test vectors: "" and "a".
  tbe_test::ContentHash empty;
  CHECK(empty.value == 0xCBF29CE484222325ull);
  tbe_test::ContentHash a;
  a.bytes("a", 1);
  CHECK(a.value == 0xAF63DC4C8601EC8Cull);
}

TEST_CASE("Rng streams are reproducible, distinct and in range", "[rng]") {
  Rng a(5, 9), b(5, 9), c(5, 10), d(6, 9);
  std::vector<std::uint64_t> va, vb, vc, vd;
  for (int i = 0; i < 64; ++i) {
    va.push_back(a.next_u64());
    vb.push_back(b.next_u64());
    vc.push_back(c.next_u64());
    vd.push_back(d.next_u64());
  }
  CHECK(va == vb);
  CHECK(va != vc);
  CHECK(va != vd);
  Rng r(1, 2);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) {
    const double u = r.uniform();
    REQUIRE((u >= 0.0 && u < 1.0));
    const auto k = r.uniform_int(7);
    REQUIRE((k >= 0 && k < 7));
    ++counts[k];
  }
  for (int k = 0; k < 7; ++k) CHECK(std::abs(counts[k] - 10000) < 500);  // ~5.3 sigma
  CHECK(r.uniform_int(1) == 0);
  double s1 = 0, s2 = 0;
  for (int i = 0; i < 100000; ++i) {
    const double z = r.normal();
    s1 += z;
    s2 += z * z;
  }
  CHECK(std::abs(s1 / 1e5) < 0.02);
  CHECK(std::abs(s2 / 1e5 - 1.0) < 0.03);
}

TEST_CASE("Rng::zipf follows P(k) ∝ k^-alpha", "[rng]") {
  // alpha = 2: P(1) = 6/π², P(2) = P(1)/4, P(3) = P(1)/9.
  Rng r(3, 4);
  const int n = 200000;
  std::map<std::int64_t, int> count;
  for (int i = 0; i < n; ++i) {
    const auto k = r.zipf(2.0);
    REQUIRE(k >= 1);
    ++count[k];
  }
  const double p1 = 6.0 / (std::numbers::pi * std::numbers::pi);
  CHECK(std::abs(count[1] / double(n) - p1) < 0.006);
  CHECK(std::abs(count[2] / double(n) - p1 / 4) < 0.004);
  CHECK(std::abs(count[3] / double(n) - p1 / 9) < 0.003);
  CHECK_THROWS_AS(r.zipf(1.0), InvalidArgument);
}
