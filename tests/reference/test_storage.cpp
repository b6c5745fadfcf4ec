// The reference kernels' typed storage access (reference/src/storage_internal.h): the branch-free
// FP16 -> FP32 conversion (and the finite-row fast load) equals Eigen's for all 65536 bit
// patterns, and the direct (vectorised) RNE of FP64 rows to FP16 / BF16 equals half_rne /
// bfloat16_rne (round to odd first) on ties, their neighbours, the ends of the normal range and
// random values; the row stores equal store_from_double.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "storage_internal.h"
#include "tbe/host_case.h"
#include "tbe/precision.h"
#include "tbe/workloads.h"

using namespace tbe;
using namespace tbe::detail;

namespace {

std::uint16_t half_bits(double x) { return Eigen::numext::bit_cast<std::uint16_t>(half_rne(x)); }
std::uint16_t bf16_bits(double x) {
  return Eigen::numext::bit_cast<std::uint16_t>(bfloat16_rne(x));
}

/// FP64 values around every boundary the direct rounding handles: each representable value of
/// the 16-bit format `to_double` decodes, the midpoints to its neighbour, and one FP64 ulp on
/// either side of both.
template <class Decode>
std::vector<double> probes(Decode to_double) {
  std::vector<double> v;
  for (std::uint32_t b = 0; b < 0x7fff; ++b) {
    const double a = to_double(static_cast<std::uint16_t>(b));
    const double c = to_double(static_cast<std::uint16_t>(b + 1));
    if (!std::isfinite(a)) continue;
    const double mid = std::isfinite(c) ? 0.5 * (a + c) : a * (1 + 0x1p-9);
    for (double x : {a, mid})
      for (double y : {x, std::nextafter(x, 0.0), std::nextafter(x, 1e300)}) {
        v.push_back(y);
        v.push_back(-y);
      }
  }
  return v;
}

}  // namespace

TEST_CASE("storage: FP16 bits -> FP32 equals Eigen for all 65536 patterns", "[storage]") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float eigen = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h));
    const float ours = half_bits_to_float(h);
    INFO("bits 0x" << std::hex << b);
    REQUIRE(std::bit_cast<std::uint32_t>(ours) == std::bit_cast<std::uint32_t>(eigen));
    REQUIRE(std::bit_cast<std::uint64_t>(F16Storage::load(&h, 0)) ==
            std::bit_cast<std::uint64_t>(load_as_double(DType::F16, &h, 0)));
    // fast_row rejects exactly inf / NaN; load_fast equals load wherever it accepts.
    REQUIRE(F16Storage::fast_row(&h, 1) == std::isfinite(eigen));
    if (F16Storage::fast_row(&h, 1))
      REQUIRE(std::bit_cast<std::uint64_t>(F16Storage::load_fast(&h, 0)) ==
              std::bit_cast<std::uint64_t>(F16Storage::load(&h, 0)));
  }
  const std::vector<std::uint16_t> row = {0x3c00, 0x8001, 0x7bff, 0x7c00, 0x0000};  // one inf
  CHECK(F16Storage::fast_row(row.data(), 3));
  CHECK_FALSE(F16Storage::fast_row(row.data(), 5));
}

TEST_CASE("storage: direct RNE to FP16 / BF16 equals rounding to odd first", "[storage]") {
  const auto half = [](std::uint16_t b) {
    return static_cast<double>(static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(b)));
  };
  const auto bf16 = [](std::uint16_t b) {
    return static_cast<double>(static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(b)));
  };
  std::vector<double> xs = probes(half), xb = probes(bf16);
  Rng rng(5, 6);
  for (int i = 0; i < 200000; ++i) {
    const int exponent = static_cast<int>(rng.uniform_int(300)) - 150;
    const double x = std::ldexp(rng.uniform() * 2 - 1, exponent);
    xs.push_back(x);
    xb.push_back(x);
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : {0.0, -0.0, 1e-300, 65504.0, 65519.99, 65520.0, 1e6, 3e38, 4e38, inf,
                   std::numeric_limits<double>::quiet_NaN()}) {
    xs.push_back(x);
    xb.push_back(x);
  }
  // Element by element (rows of one): the fast path accepts exactly the normal range and then
  // equals the rounding to odd first; the row stores equal store_from_double everywhere.
  const auto check = [](const std::vector<double>& x, DType t, auto fast_row, auto store_row,
                        auto reference_bits, double lo, double hi) {
    std::int64_t fast = 0;
    std::vector<double> in_range;
    for (double v : x) {
      std::uint16_t b = 0;
      const bool ok = fast_row(&b, &v, 1);
      INFO(to_string(t) << " x = " << v);
      REQUIRE(ok == (std::fabs(v) >= lo && std::fabs(v) < hi));
      if (!ok) continue;
      ++fast;
      REQUIRE(b == reference_bits(v));
      in_range.push_back(v);
    }
    const std::vector<double>& fast_only = in_range;
    for (const std::vector<double>* row : {&x, &fast_only}) {  // fallback row, fast row
      std::vector<std::uint16_t> got(row->size()), want(row->size());
      store_row(got.data(), row->data(), static_cast<std::int64_t>(row->size()));
      for (std::size_t d = 0; d < row->size(); ++d)
        store_from_double(t, want.data(), static_cast<std::int64_t>(d), (*row)[d]);
      REQUIRE(got == want);
    }
    return fast;
  };
  const std::int64_t fast16 =
      check(xs, DType::F16, rne_normal_row<DType::F16>, F16Storage::store_row, half_bits, 0x1p-14,
            0x1p16);
  const std::int64_t fast_bf16 =
      check(xb, DType::BF16, rne_normal_row<DType::BF16>, BF16Storage::store_row, bf16_bits, 0x1p-126,
            0x1p128);
  CHECK(fast16 > 100000);  // the fast path is exercised, ties included
  CHECK(fast_bf16 > 100000);

  // tbe::round_to (precision.h) takes the direct path in the normal range: every probe rounds to
  // the value of the rounding to odd first (NaN stays NaN), and round_down_to / round_up_to stay
  // the neighbours below / above.
  const auto same = [](double a, double b) { return (a != a && b != b) || a == b; };
  for (double v : xs) {
    INFO("fp16 x = " << v);
    REQUIRE(same(round_to(DType::F16, v), static_cast<double>(static_cast<float>(half_rne(v)))));
    if (v == v) REQUIRE((round_down_to(DType::F16, v) <= v && round_up_to(DType::F16, v) >= v));
  }
  for (double v : xb) {
    INFO("bf16 x = " << v);
    REQUIRE(same(round_to(DType::BF16, v),
                 static_cast<double>(static_cast<float>(bfloat16_rne(v)))));
    if (v == v) REQUIRE((round_down_to(DType::BF16, v) <= v && round_up_to(DType::BF16, v) >= v));
  }
}
