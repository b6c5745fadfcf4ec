// The reference kernels' typed storage access (reference/src/storage_internal.h): the branch-free
// FP16 -> FP32 conversion equals Eigen's for all 65536 bit patterns, and the direct RNE of FP64
// to FP16 / BF16 equals half_rne / bfloat16_rne (round to odd first) on ties, their neighbours,
// the ends of the normal range and random values; the stores equal store_from_double.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "storage_internal.h"
#include "tbe/host_case.h"
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
  }
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
  std::int64_t fast16 = 0, fast_bf16 = 0;
  for (double x : xs) {
    std::uint16_t b = 0;
    if (rne_normal_bits<10, 15>(x, b)) {
      ++fast16;
      INFO("fp16 x = " << x);
      REQUIRE(b == half_bits(x));
    }
    std::uint16_t s = 0;
    F16Storage::store(&s, 0, x);
    std::uint16_t want = 0;
    store_from_double(DType::F16, &want, 0, x);
    REQUIRE(s == want);
  }
  for (double x : xb) {
    std::uint16_t b = 0;
    if (rne_normal_bits<7, 127>(x, b)) {
      ++fast_bf16;
      INFO("bf16 x = " << x);
      REQUIRE(b == bf16_bits(x));
    }
    std::uint16_t s = 0;
    BF16Storage::store(&s, 0, x);
    std::uint16_t want = 0;
    store_from_double(DType::BF16, &want, 0, x);
    REQUIRE(s == want);
  }
  CHECK(fast16 > 100000);  // the fast path is exercised, ties included
  CHECK(fast_bf16 > 100000);
}
