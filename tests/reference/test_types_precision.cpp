// types.h names and parsers; the float traits table (dtype_traits.h) against std::numeric_limits
// and Eigen::NumTraits; precision policies; round_to / round_down_to / round_up_to against brute
// force (every FP16 and BF16 value enumerated; FP32 by its defining predicate).
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tbe/dtype_traits.h"
#include "tbe/errors.h"
#include "tbe/float_loader.h"
#include "tbe/host_case.h"
#include "tbe/precision.h"
#include "tbe/types.h"

using namespace tbe;

TEST_CASE("dtype, pooling and bounds-check names round-trip", "[types]") {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32, DType::I64})
    CHECK(parse_dtype(to_string(t)) == t);
  for (PoolingMode m : {PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None})
    CHECK(parse_pooling(to_string(m)) == m);
  for (BoundsCheckMode m : {BoundsCheckMode::Fatal, BoundsCheckMode::Warning,
                            BoundsCheckMode::Ignore, BoundsCheckMode::None})
    CHECK(parse_bounds_check(to_string(m)) == m);
  CHECK(to_string(DType::BF16) == "bf16");
  CHECK(to_string(PoolingMode::Mean) == "mean");
  CHECK(to_string(BoundsCheckMode::Warning) == "warning");
  CHECK(to_string(RoundingMode::Stochastic) == "sr");
  CHECK(parse_policy_kind("fbgemm-cuda") == PolicyKind::FbgemmCuda);
}

TEST_CASE("parsers name the argument and the bad text", "[types]") {
  try {
    parse_dtype("fp8", "--weights");
    FAIL("no throw");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == "--weights");
    CHECK_THAT(e.what(), Catch::Contains("fp8") && Catch::Contains("fp16"));
  }
  CHECK_THROWS_AS(parse_pooling("max"), InvalidArgument);
  CHECK_THROWS_AS(parse_bounds_check("FATAL"), InvalidArgument);
  CHECK_THROWS_WITH(parse_policy_kind("x"), Catch::Contains("'x'"));
}

namespace {

// Machine epsilon of S, the distance from 1 to the next value: for the 16-bit types from the bit
// pattern (Eigen 3.4.0's numeric_limits<Eigen::half>::epsilon() is 2^-13, not 2^-10).
template <class S>
double machine_epsilon() {
  if constexpr (sizeof(S) == 2) {
    const auto one = Eigen::numext::bit_cast<std::uint16_t>(S(1.0f));
    const S next = Eigen::numext::bit_cast<S>(static_cast<std::uint16_t>(one + 1));
    return static_cast<double>(static_cast<float>(next)) - 1.0;
  } else {
    return static_cast<double>(std::numeric_limits<S>::epsilon());
  }
}

// DTypeTraits<T> against the standard library's and Eigen's description of its storage type S.
template <DType T, class S>
void check_traits_against_limits(DType expected_seed_default) {
  using Tr = DTypeTraits<T>;
  using L = std::numeric_limits<S>;
  INFO(to_string(T));
  STATIC_REQUIRE(std::is_same_v<typename Tr::Storage, S>);
  STATIC_REQUIRE(sizeof(typename Tr::Storage) == dtype_size(T));
  // Copies: Eigen's numeric_limits members are declared, not defined (CHECK binds references).
  const int limits_digits = L::digits;
  const std::float_round_style limits_round_style = L::round_style;
  CHECK(Tr::digits == limits_digits);
  CHECK(Tr::unit_roundoff == machine_epsilon<S>() / 2);  // u = eps / 2 = 2^-p
  CHECK(Tr::unit_roundoff == std::ldexp(1.0, -Tr::digits));
  CHECK(Tr::min_subnormal == static_cast<double>(L::denorm_min()));
  CHECK(Tr::min_subnormal == std::ldexp(1.0, Tr::min_subnormal_exponent));
  CHECK(Tr::min_normal == static_cast<double>(L::min()));
  CHECK(Tr::max_finite == static_cast<double>(L::max()));
  CHECK(Tr::max_finite == static_cast<double>(Eigen::NumTraits<S>::highest()));
  CHECK(Tr::rounding == limits_round_style);
  CHECK(Tr::seed_default_accumulation == expected_seed_default);

  // The run-time accessor returns the same values.
  const FloatTraits r = float_traits(T);
  CHECK(r.digits == Tr::digits);
  CHECK(r.unit_roundoff == Tr::unit_roundoff);
  CHECK(r.min_subnormal == Tr::min_subnormal);
  CHECK(r.min_subnormal_exponent == Tr::min_subnormal_exponent);
  CHECK(r.min_normal == Tr::min_normal);
  CHECK(r.max_finite == Tr::max_finite);
  CHECK(r.seed_default_accumulation == Tr::seed_default_accumulation);
  CHECK(r.rounding == Tr::rounding);

  // The rounding functions agree with the table (they do not read it for these values).
  for (double v : {Tr::max_finite, Tr::min_normal, Tr::min_subnormal, 1.0 + 2 * Tr::unit_roundoff})
    CHECK(round_to(T, v) == v);
  CHECK(round_down_to(T, std::nextafter(Tr::min_normal, 0.0)) ==
        Tr::min_normal - Tr::min_subnormal);  // the largest subnormal
  if constexpr (T != DType::F64) {  // points between values of T (FP64 cannot express them)
    CHECK(round_to(T, 1.0 + Tr::unit_roundoff) == 1.0);  // the midpoint above 1: tie to even
    CHECK(round_up_to(T, 1.0 + Tr::unit_roundoff) == 1.0 + 2 * Tr::unit_roundoff);  // ulp(1) = 2u
    CHECK(round_down_to(T, Tr::min_subnormal / 2) == 0.0);
    CHECK(round_up_to(T, Tr::min_subnormal / 2) == Tr::min_subnormal);
    CHECK(std::isinf(round_up_to(T, Tr::max_finite * (1 + Tr::unit_roundoff / 2))));
  }
}

}  // namespace

TEST_CASE("the float traits table matches std::numeric_limits and Eigen::NumTraits", "[traits]") {
  check_traits_against_limits<DType::F16, Eigen::half>(DType::F32);
  check_traits_against_limits<DType::BF16, Eigen::bfloat16>(DType::F32);
  check_traits_against_limits<DType::F32, float>(DType::F64);
  check_traits_against_limits<DType::F64, double>(DType::F64);
}

TEST_CASE("float_traits rejects integer dtypes instead of answering with another type's traits",
          "[traits]") {
  // At run time an InvalidArgument naming the dtype; at compile time DTypeTraits<DType::I32> does
  // not compile (ctest dtype_traits_rejects_integers, tests/reference/compile_fail/).
  for (DType t : {DType::I32, DType::I64}) {
    INFO(to_string(t));
    try {
      (void)float_traits(t);
      FAIL("float_traits accepted an integer dtype");
    } catch (const InvalidArgument& e) {
      CHECK(e.argument() == "dtype");
      CHECK(std::string(e.what()).find(to_string(t)) != std::string::npos);
    }
  }
  STATIC_REQUIRE(FloatTraits::of<DType::F32>().digits == 24);  // usable in constant expressions
}

TEST_CASE("FloatLoader reads every FP16 and BF16 pattern exactly as load_as_double", "[types]") {
  std::vector<std::uint16_t> patterns(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) patterns[b] = static_cast<std::uint16_t>(b);
  for (DType t : {DType::F16, DType::BF16}) {
    INFO(to_string(t));
    const FloatLoader load(t, patterns.data());
    std::int64_t mismatches = 0;
    for (std::int64_t i = 0; i < 65536; ++i) {
      const double a = load(i), b = load_as_double(t, patterns.data(), i);
      if (std::memcmp(&a, &b, sizeof a) != 0 && !(std::isnan(a) && std::isnan(b))) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
  const std::vector<float> f32 = {0.1f, -3.5f, std::numeric_limits<float>::denorm_min()};
  const std::vector<double> f64 = {0.1, -0x1p-1074};
  for (std::int64_t i = 0; i < 3; ++i) CHECK(FloatLoader(DType::F32, f32.data())(i) == f32[i]);
  for (std::int64_t i = 0; i < 2; ++i) CHECK(FloatLoader(DType::F64, f64.data())(i) == f64[i]);
}

TEST_CASE("make_policy follows the seed defaults and FBGEMM's CUDA rule", "[precision]") {
  auto p = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F16);
  CHECK(p.accumulation == DType::F64);
  CHECK(p.output == DType::F16);
  CHECK(p.optimizer_state == DType::F32);
  CHECK(make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32).accumulation == DType::F32);
  CHECK(make_policy(PolicyKind::SeedDefault, DType::BF16, DType::F32).accumulation == DType::F32);
  CHECK(make_policy(PolicyKind::FbgemmCuda, DType::F32, DType::F32).accumulation == DType::F32);
  CHECK(to_string(make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32)) ==
        "seed-default[w=fp16,out=fp32,acc=fp32,state=fp32,rne]");
  CHECK_THROWS_AS(make_policy(PolicyKind::SeedDefault, DType::F64, DType::F32), InvalidArgument);
  CHECK_THROWS_AS(make_policy(PolicyKind::SeedDefault, DType::F32, DType::I32), InvalidArgument);
}

namespace {

// Independent decoders of the 16-bit formats (IEEE binary16: 1/5/10 bits; bfloat16: the top half
// of a binary32).
double decode_f16(std::uint16_t u) {
  const int sign = u >> 15, exp = (u >> 10) & 0x1F, man = u & 0x3FF;
  double mag;
  if (exp == 0x1F) mag = man ? std::nan("") : std::numeric_limits<double>::infinity();
  else if (exp == 0) mag = std::ldexp(man, -24);  // subnormal: man · 2^-24
  else mag = std::ldexp(1024 + man, exp - 25);    // (1 + man/2^10) · 2^(exp-15)
  return sign ? -mag : mag;
}
double decode_bf16(std::uint16_t u) {
  const std::uint32_t b = static_cast<std::uint32_t>(u) << 16;
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// All finite values of a 16-bit type, ascending, with their bit patterns (-0 dropped).
struct Table16 {
  std::vector<double> values;
  std::vector<std::uint16_t> bits;
  double beyond_max;  // max + 1 ulp: where an RNE result becomes inf
};

Table16 enumerate16(DType t) {
  std::vector<std::pair<double, std::uint16_t>> v;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto u = static_cast<std::uint16_t>(b);
    const double x = t == DType::F16 ? decode_f16(u) : decode_bf16(u);
    if (!std::isfinite(x) || u == 0x8000u) continue;
    v.emplace_back(x, u);
  }
  std::sort(v.begin(), v.end());
  Table16 tab;
  for (auto& [x, u] : v) {
    tab.values.push_back(x);
    tab.bits.push_back(u);
  }
  const double mx = tab.values.back();
  tab.beyond_max = mx + (mx - tab.values[tab.values.size() - 2]);
  return tab;
}

struct Brute {
  double down, up, nearest;
};

// Directed and nearest-even rounding by search in the enumerated table.
Brute brute16(const Table16& tab, double x) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto& v = tab.values;
  Brute r;
  if (std::isinf(x)) return {x, x, x};  // infinities are values of every type
  auto it = std::upper_bound(v.begin(), v.end(), x);  // first > x
  r.down = it == v.begin() ? -inf : *(it - 1);
  auto jt = std::lower_bound(v.begin(), v.end(), x);  // first >= x
  r.up = jt == v.end() ? inf : *jt;
  if (r.down == r.up) {
    r.nearest = r.down;
    return r;
  }
  // Overflow: beyond max the next "value" is max + ulp; ties there go to inf (its even side).
  const double lo = std::isinf(r.down) ? -tab.beyond_max : r.down;
  const double hi = std::isinf(r.up) ? tab.beyond_max : r.up;
  const double dl = x - lo, dh = hi - x;
  if (dl < dh) {
    r.nearest = r.down;
  } else if (dh < dl) {
    r.nearest = r.up;
  } else {
    // Tie: the even significand. Inf counts as even (max has an odd significand).
    if (std::isinf(r.up)) r.nearest = r.up;
    else if (std::isinf(r.down)) r.nearest = r.down;
    else {
      const auto bd = tab.bits[static_cast<std::size_t>((it - 1) - v.begin())];
      r.nearest = (bd & 1u) == 0 ? r.down : r.up;
    }
  }
  // Values that round to 0 from below keep the sign: -0.0 == 0.0 for comparisons anyway.
  return r;
}

void check_against(DType t, const Table16& tab, double x) {
  const Brute b = brute16(tab, x);
  INFO(to_string(t) << " x = " << x);
  CHECK(round_down_to(t, x) == b.down);
  CHECK(round_up_to(t, x) == b.up);
  CHECK(round_to(t, x) == b.nearest);
}

}  // namespace

TEST_CASE("FP16/BF16 rounding equals brute force at every value, midpoint and quarter point",
          "[precision]") {
  for (DType t : {DType::F16, DType::BF16}) {
    const Table16 tab = enumerate16(t);
    const auto& v = tab.values;
    for (std::size_t i = 0; i < v.size(); ++i) {
      check_against(t, tab, v[i]);
      if (i + 1 < v.size()) {
        const double a = v[i], b = v[i + 1];
        // Midpoints (ties), and points just off them, are exact in FP64 for these types.
        check_against(t, tab, a + (b - a) / 2);
        check_against(t, tab, a + (b - a) / 4);
        check_against(t, tab, a + 3 * (b - a) / 4);
        check_against(t, tab, std::nextafter(a + (b - a) / 2, b));
        check_against(t, tab, std::nextafter(a + (b - a) / 2, a));
      }
    }
    // Overflow region: between max and max + ulp, exactly halfway, and far beyond.
    const double mx = v.back(), half = (tab.beyond_max - mx) / 2;
    for (double x : {mx + half / 2, mx + half, std::nextafter(mx + half, 0.0), mx * 4, 1e300,
                     std::numeric_limits<double>::infinity()}) {
      check_against(t, tab, x);
      check_against(t, tab, -x);
    }
    // Below the smallest subnormal: to zero or to the subnormal.
    const double sub = float_traits(t).min_subnormal;
    CHECK(round_down_to(t, sub / 3) == 0.0);
    CHECK(round_up_to(t, sub / 3) == sub);
    CHECK(round_to(t, sub / 2) == 0.0);   // tie -> even (zero)
    CHECK(round_to(t, sub * 0.75) == sub);
    CHECK(round_up_to(t, -sub / 3) == 0.0);
    CHECK(round_down_to(t, -sub / 3) == -sub);
  }
}

TEST_CASE("rounding satisfies its defining predicates on random doubles (property)",
          "[precision]") {
  rc::prop("RD <= x <= RU, both representable, nothing between, RN one of them", []() {
    const DType t = *rc::gen::elementOf(std::vector<DType>{DType::F16, DType::BF16, DType::F32});
    // Random magnitudes over the whole range of each type, subnormals included.
    const int e = *rc::gen::inRange(-160, 130);
    const double m = *rc::gen::inRange(0, 1 << 30) / double(1 << 30) + 1.0;
    const double x = (*rc::gen::arbitrary<bool>() ? -1 : 1) * std::ldexp(m, e);
    const double rd = round_down_to(t, x), ru = round_up_to(t, x), rn = round_to(t, x);
    RC_ASSERT(rd <= x);
    RC_ASSERT(x <= ru);
    RC_ASSERT((rn == rd || rn == ru));
    for (double r : {rd, ru}) {
      if (std::isinf(r)) continue;
      RC_ASSERT(round_to(t, r) == r);  // representable
    }
    if (rd != ru && std::isfinite(rd) && std::isfinite(ru)) {
      // Adjacent: rounding anything strictly between lands on one of them.
      const double mid = rd + (ru - rd) / 2;
      RC_ASSERT((round_to(t, mid) == rd || round_to(t, mid) == ru));
      if (t == DType::F32) {
        RC_ASSERT(static_cast<double>(std::nextafter(static_cast<float>(rd),
                                                     std::numeric_limits<float>::infinity())) == ru);
      }
    }
    if (t == DType::F32) {
      RC_ASSERT(rn == static_cast<double>(static_cast<float>(x)));  // hardware RNE
    }
  });
}

TEST_CASE("round_to FP64 is the identity and integer types are rejected", "[precision]") {
  CHECK(round_to(DType::F64, 0.1) == 0.1);
  CHECK(round_down_to(DType::F64, 0.1) == 0.1);
  CHECK(round_up_to(DType::F64, -0.1) == -0.1);
  CHECK(round_to(DType::F32, 0.1) == static_cast<double>(0.1f));
  CHECK(round_to(DType::F16, 1.0 + 0x1p-11) == 1.0);             // tie to even
  CHECK(round_to(DType::F16, 1.0 + 3 * 0x1p-11) == 1.0 + 0x1p-9);  // tie to even (up)
  CHECK(round_to(DType::BF16, 1.0 + 0x1p-8) == 1.0);
  CHECK(std::isinf(round_to(DType::F16, 65520.0)));
  CHECK(round_to(DType::F16, 65519.99) == 65504.0);
  CHECK(std::isnan(round_to(DType::F16, std::nan(""))));
  CHECK(std::isnan(round_up_to(DType::BF16, std::nan(""))));
  CHECK_THROWS_AS(round_to(DType::I32, 1.0), InvalidArgument);
}
