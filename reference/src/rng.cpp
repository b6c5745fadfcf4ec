// The draws of tbe::Rng that are not inline (rng.h).
#include "tbe/rng.h"

#include <cmath>
#include <numbers>
#include <string>

#include "tbe/errors.h"

namespace tbe {

std::int64_t Rng::uniform_int(std::int64_t n) {
  if (n <= 1) return 0;
  // Lemire's multiply-shift with rejection of the biased low region (unbiased).
  const std::uint64_t range = static_cast<std::uint64_t>(n);
  const std::uint64_t threshold = (0 - range) % range;
  for (;;) {
    const unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * range;
    if (static_cast<std::uint64_t>(m) >= threshold) return static_cast<std::int64_t>(m >> 64);
  }
}

double Rng::normal() {
  // Box-Muller, first output only; u1 in (0, 1] keeps log finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::int64_t Rng::zipf(double alpha) {
  if (!(alpha > 1.0))
    throw InvalidArgument("zipf_alpha", "zipf_alpha: " + std::to_string(alpha) +
                                            " must be > 1 (use Uniform for alpha <= 1)");
  // Devroye's rejection method (Non-Uniform Random Variate Generation, X.6), the algorithm
  // numpy's Generator.zipf uses: X = floor(U^(-1/(a-1))), accepted with a ratio test.
  const double am1 = alpha - 1.0;
  const double b = std::pow(2.0, am1);
  for (;;) {
    const double u = 1.0 - uniform();  // (0, 1]
    const double v = uniform();
    const double x = std::floor(std::pow(u, -1.0 / am1));
    if (!(x >= 1.0) || x >= 9.2e18) continue;  // beyond int64: redraw, as numpy does
    const double t = std::pow(1.0 + 1.0 / x, am1);
    if (v * x * (t - 1.0) / (b - 1.0) <= t / b) return static_cast<std::int64_t>(x);
  }
}

}  // namespace tbe
