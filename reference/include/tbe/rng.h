// The project's one seeded random number generator: splitmix64 (G. L. Steele, D. Lea, C. H.
// Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014), in keyed streams.
// Pure 64-bit integer arithmetic (no std:: distributions, whose output differs between standard
// libraries): a seed gives the same numbers on every platform, compiler and thread count. The
// workload generators (workloads.h, ikbo_workloads.h), the oracle's emulations (random summation
// orders, stochastic-rounding draws) and the tests draw from it; recorded cases and tbe-verify
// verdicts depend on these streams, so tests/reference/test_rng.cpp pins their values.
#pragma once

#include <cstdint>

namespace tbe {

/// splitmix64's increment γ (the odd integer nearest 2^64/φ): the state advances by γ per draw
/// (a Weyl sequence).
inline constexpr std::uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

/// splitmix64's output function: a bijective 64-bit mixer (Stafford's "Mix13" constants), also
/// used as a 64-bit hash to derive stream keys.
constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A splitmix64 stream. Start one of two ways:
/// - `Rng(seed, stream)`: a keyed stream, state mix(mix(seed) ^ (stream·γ + 1)). Give every
///   independent unit of work (a bag, a table row, a chunk of a tensor) its own stream key, so
///   that what it draws does not depend on evaluation order (OpenMP schedules, thread counts).
/// - `Rng::from_state(s)`: the plain splitmix64 sequence from state s, whose first draw is
///   mix(s + γ) (0xE220A8397B1DCDAF for s = 0, the published reference value).
/// Each draw advances the state by γ and returns mix(state).
class Rng {
 public:
  constexpr Rng(std::uint64_t seed, std::uint64_t stream)
      : state_(splitmix64_mix(splitmix64_mix(seed) ^ (stream * kSplitMix64Gamma + 1))) {}
  /// The plain splitmix64 sequence from state `state` (no key mixing).
  static constexpr Rng from_state(std::uint64_t state) { return Rng(State{state}); }

  /// The next 64 random bits.
  constexpr std::uint64_t next_u64() {
    state_ += kSplitMix64Gamma;
    return splitmix64_mix(state_);
  }
  /// Skips n draws in O(1): the state is a Weyl sequence, so the stream after advance(n) is the
  /// one n next_u64() calls would leave (a parallel fill computes element i of a stream of
  /// one-draw values directly, the same values as a serial loop).
  constexpr void advance(std::uint64_t n) { state_ += n * kSplitMix64Gamma; }
  /// Uniform in [0, 1) with 53 random bits: (next_u64() >> 11) · 2^-53 (exact, one draw).
  constexpr double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1p-53; }
  /// Uniform integer in [0, n), unbiased (Lemire's multiply-shift with rejection); 0 for n <= 1.
  /// Usually one draw.
  std::int64_t uniform_int(std::int64_t n);
  /// Uniform integer in [0, n), n >= 1, unbiased by the remainder method: draws below the largest
  /// multiple of n are reduced mod n, others redrawn. Another stream of values than uniform_int
  /// for the same state (the emulations' random orders use this one).
  constexpr std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t x;
    do x = next_u64(); while (x >= limit);
    return x % n;
  }
  /// Standard normal (Box-Muller, first output only; two draws).
  double normal();
  /// k >= 1 with P(k) ∝ k^-alpha (Devroye's rejection method, as numpy's Generator.zipf).
  /// Throws InvalidArgument if alpha <= 1.
  std::int64_t zipf(double alpha);

 private:
  struct State {
    std::uint64_t value;
  };
  constexpr explicit Rng(State s) : state_(s.value) {}
  std::uint64_t state_;
};

}  // namespace tbe
