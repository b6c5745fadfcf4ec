// The oracle's inline directed rounding (oracle/src/float_model.h) gives the same values, bit for
// bit, as tbe::round_down_to / round_up_to and std::nextafter, which it replaces in the hot loops.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "float_model.h"
#include "tbe/rng.h"

namespace {

using tbe::DType;
namespace d = tbe::oracle::detail;

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

// Edge values of FP64 and FP32 (zeros, subnormals, max, inf, NaN, float midpoints) and their
// FP64 neighbours, plus seeded random doubles over every exponent.
std::vector<double> probe_values() {
  const double inf = std::numeric_limits<double>::infinity();
  const double fmax = std::numeric_limits<float>::max();
  const double fden = std::numeric_limits<float>::denorm_min();
  const double fmin = std::numeric_limits<float>::min();
  std::vector<double> base = {0.0,  -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(),
                              1.0,  fmax, fden, fmin, std::numeric_limits<double>::denorm_min(),
                              std::numeric_limits<double>::max(), fden / 2, fden * 1.5,
                              1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-40, fmax * (1 + 0x1p-25),
                              fmax * (1 + 0x1p-23), 3.0e-39, 0.1};
  tbe::Rng rng(20261201, 7);
  for (int i = 0; i < 20000; ++i) {
    const double m = 1.0 + rng.uniform();
    const int e = static_cast<int>(rng.uniform_int(2200)) - 1100;
    base.push_back(std::ldexp(m, e));
  }
  std::vector<double> out;
  for (double x : base)
    for (double s : {x, -x}) {
      out.push_back(s);
      out.push_back(std::nextafter(s, inf));
      out.push_back(std::nextafter(s, -inf));
    }
  return out;
}

}  // namespace

TEST_CASE("float_model: inline directed rounding equals round_down_to / round_up_to",
          "[oracle][float_model]") {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    for (double x : probe_values()) {
      const double lo = d::round_down(t, x), hi = d::round_up(t, x);
      const double want_lo = tbe::round_down_to(t, x), want_hi = tbe::round_up_to(t, x);
      INFO(tbe::to_string(t) << " x = " << x);
      if (std::isnan(x)) {
        CHECK(std::isnan(lo));
        CHECK(std::isnan(hi));
        continue;
      }
      CHECK(bits(lo) == bits(want_lo));
      CHECK(bits(hi) == bits(want_hi));
    }
  }
}

TEST_CASE("float_model: next_down64 / next_up64 equal std::nextafter", "[oracle][float_model]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : probe_values()) {
    INFO("x = " << x);
    if (std::isnan(x)) {
      CHECK(std::isnan(d::next_down64(x)));
      CHECK(std::isnan(d::next_up64(x)));
      continue;
    }
    CHECK(bits(d::next_down64(x)) == bits(std::nextafter(x, -inf)));
    CHECK(bits(d::next_up64(x)) == bits(std::nextafter(x, inf)));
  }
}
