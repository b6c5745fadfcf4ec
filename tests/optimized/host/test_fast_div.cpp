// FastDiv (optimized/kernels/launch.h): the launch-time divisor of the pooled gather's segment
// search (bag k -> feature k / B). Its quotient must equal integer division for every dividend the
// kernel passes (0 <= k < 2^31) and every divisor in [1, 2^32): checked on edge divisors and
// dividends, and on random pairs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/launch.h"

using tbe::cuda::detail::FastDiv;

TEST_CASE("FastDiv equals integer division for dividends below 2^31", "[fast_div]") {
  std::vector<std::uint32_t> divisors = {1, 2, 3, 5, 7, 10, 64, 100, 511, 512, 513, 4096, 131072,
                                         294912, 1000003, (1u << 30) - 1, 1u << 30, (1u << 31) - 1,
                                         1u << 31, (1u << 31) + 1, 0xffffffffu};
  for (int k = 0; k < 32; ++k) {
    divisors.push_back(1u << k);
    divisors.push_back((1u << k) + 1);
    if (k > 1) divisors.push_back((1u << k) - 1);
  }
  const std::uint32_t n_max = (1u << 31) - 1;
  std::mt19937_64 rng(20261202);
  std::uniform_int_distribution<std::uint32_t> any_n(0, n_max);
  for (std::uint32_t d : divisors) {
    const FastDiv f = FastDiv::make(d);
    std::vector<std::uint32_t> ns = {0, 1, n_max, n_max - 1};
    for (std::uint64_t m : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{1000}, n_max / std::uint64_t{d}}) {
      for (std::int64_t delta : {-1, 0, 1}) {
        const std::int64_t n = static_cast<std::int64_t>(m * d) + delta;
        if (n >= 0 && n <= n_max) ns.push_back(static_cast<std::uint32_t>(n));
      }
    }
    for (int i = 0; i < 2000; ++i) ns.push_back(any_n(rng));
    for (std::uint32_t n : ns) {
      INFO("d = " << d << ", n = " << n << ", multiplier = " << f.multiplier << ", shift = " << f.shift);
      REQUIRE(f.div(n) == n / d);
    }
  }
  std::uniform_int_distribution<std::uint32_t> any_d(1, 0xffffffffu);
  for (int i = 0; i < 20000; ++i) {
    const std::uint32_t d = any_d(rng), n = any_n(rng);
    INFO("d = " << d << ", n = " << n);
    REQUIRE(FastDiv::make(d).div(n) == n / d);
  }
}
